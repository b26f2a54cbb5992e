"""lazuli.distributed across processes: collectives and DistributedDataParallel on the MPI engine,
each test one `mpirun` of a small program whose ranks print JSON lines.

Without mpirun (Open MPI) on the machine these tests skip, unless LAZULI_REQUIRE_MPI=1 (which
scripts/test.sh sets: setup.sh installs Open MPI) makes that a failure.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

import lazuli as lz
import lazuli.distributed as dist

MPIRUN = shutil.which("mpirun")
if MPIRUN is None and os.environ.get("LAZULI_REQUIRE_MPI") == "1":
    raise RuntimeError("LAZULI_REQUIRE_MPI=1, but mpirun is not installed (scripts/setup.sh "
                       "installs Debian's openmpi-bin)")
needs_mpi = pytest.mark.skipif(MPIRUN is None, reason="mpirun (Open MPI) is not installed")


def mpirun(n, program, timeout=120, env=None, fails=False):
    """Runs `program` on n ranks; returns the records each rank emitted (emit(**fields), written
    to a file per rank: ranks' stdout lines can interleave), by rank. `fails`: the job is expected
    to fail; returns mpirun's CompletedProcess instead."""
    out_dir = tempfile.mkdtemp(prefix="lazuli-mpi-")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               # One thread per rank: the ranks share this machine's cores.
               OMP_NUM_THREADS="1", LAZULI_NUM_THREADS="1", LAZULI_TEST_OUT=out_dir, **(env or {}))
    code = PRELUDE + textwrap.dedent(program)
    out = subprocess.run([MPIRUN, "-n", str(n), "--oversubscribe", sys.executable, "-c", code],
                         env=env, capture_output=True, text=True, timeout=timeout)
    if fails:
        assert out.returncode != 0, out.stdout + out.stderr
        return out
    assert out.returncode == 0, out.stdout + out.stderr
    ranks = []
    for r in range(n):
        path = os.path.join(out_dir, f"rank{r}.json")
        assert os.path.exists(path), f"rank {r} emitted nothing: " + out.stdout + out.stderr
        with open(path) as f:
            ranks.append([json.loads(line) for line in f])
    shutil.rmtree(out_dir)
    return ranks


PRELUDE = """\
import json, os, numpy as np, lazuli as lz, lazuli.distributed as dist
def emit(**fields):
    path = os.path.join(os.environ["LAZULI_TEST_OUT"], f"rank{dist.get_rank()}.json")
    with open(path, "a") as f:
        f.write(json.dumps(dict(fields, rank=dist.get_rank())) + "\\n")
"""


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_collectives_give_every_rank_the_combined_values(n):
    ranks = mpirun(n, """
        dist.init_process_group("mpi")
        r, n = dist.get_rank(), dist.get_world_size()
        x = lz.tensor(np.arange(4, dtype=np.float32) + r)
        s = x * 1
        dist.all_reduce(s)
        avg = x * 1
        dist.all_reduce(avg, dist.ReduceOp.AVG)
        mx = x * 1
        dist.all_reduce(mx, op=dist.ReduceOp.MAX)
        ints = lz.tensor(np.array([r, 10 * r], dtype=np.int64))
        dist.all_reduce(ints)
        half = (x * 0.5).half()
        dist.all_reduce(half)
        b = x * 1
        dist.broadcast(b, src=n - 1)
        g = lz.zeros(n * 4)
        dist.all_gather_into_tensor(g, x)
        parts = [lz.zeros(2, 2) for _ in range(n)]
        dist.all_gather(parts, x.reshape(2, 2))
        rs = lz.zeros(1, 4)
        # Block b of rank r's input holds 10 * b + r: rank b gets the sum over r of 10 * b + r.
        blocks = np.arange(n, dtype=np.float32)[:, None] * 10 + r + np.zeros((n, 4), np.float32)
        dist.reduce_scatter_tensor(rs, lz.tensor(blocks))
        prod = lz.tensor(np.array([r + 1.0, 2.0], dtype=np.float32))
        dist.all_reduce(prod, dist.ReduceOp.PRODUCT)
        mn = x * 1
        dist.all_reduce(mn, dist.ReduceOp.MIN)
        bf = (x + 0.5).to(lz.bfloat16)
        dist.broadcast(bf, src=1)
        flags = lz.tensor(np.array([r == 0, True]))
        gathered_flags = lz.zeros(2 * n, dtype=lz.bool)
        dist.all_gather_into_tensor(gathered_flags, flags)
        emit(size=n, s=s.tolist(), avg=avg.tolist(), mx=mx.tolist(), ints=ints.tolist(),
             half=half.float().tolist(), b=b.tolist(), g=g.tolist(),
             parts=[p.tolist() for p in parts], rs=rs.tolist(), prod=prod.tolist(),
             mn=mn.tolist(), bf=bf.float().tolist(), flags=gathered_flags.tolist(),
             fallbacks=lz.debug.counter_value("fallback::all_reduce"))
        dist.barrier()
    """)
    base = np.arange(4, dtype=np.float32)
    total = sum(base + r for r in range(n))
    for r, [rec] in enumerate(ranks):
        assert rec["size"] == n
        np.testing.assert_array_equal(rec["s"], total)
        np.testing.assert_allclose(rec["avg"], total / n, rtol=1e-6)
        np.testing.assert_array_equal(rec["mx"], base + n - 1)
        assert rec["ints"] == [sum(range(n)), 10 * sum(range(n))]
        np.testing.assert_array_equal(rec["half"], total * 0.5)
        np.testing.assert_array_equal(rec["b"], base + n - 1)
        np.testing.assert_array_equal(rec["g"], np.concatenate([base + q for q in range(n)]))
        for q, p in enumerate(rec["parts"]):
            np.testing.assert_array_equal(p, (base + q).reshape(2, 2))
        np.testing.assert_array_equal(rec["rs"], [[10 * r * n + n * (n - 1) / 2] * 4])
        np.testing.assert_array_equal(rec["prod"], [float(np.prod(np.arange(1, n + 1))), 2.0 ** n])
        np.testing.assert_array_equal(rec["mn"], base)
        np.testing.assert_array_equal(rec["bf"], base + 1.5)
        assert rec["flags"] == [q == 0 if i % 2 == 0 else True for q in range(n) for i in range(2)]
        assert rec["fallbacks"] == 0


DDP_PROGRAM = """
    dist.init_process_group("mpi")
    r, n = dist.get_rank(), dist.get_world_size()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, 5)).astype(np.float32)
    Y = rng.integers(0, 3, 8)

    def model(seed):
        lz.manual_seed(seed)
        return lz.nn.Sequential(lz.nn.Linear(5, 16), lz.nn.ReLU(), lz.nn.Linear(16, 3))

    def train(m, x, y, steps=5):
        opt = lz.optim.SGD(m.parameters(), lr=0.5, momentum=0.9)
        for _ in range(steps):
            opt.zero_grad()
            loss = lz.nn.functional.cross_entropy(m(lz.tensor(x)), lz.tensor(y))
            loss.backward()
            opt.step()
            lz.sync()
        return [p.numpy() for p in m.parameters()]

    # Each rank's own initialization: DistributedDataParallel makes rank 0's everyone's.
    ddp = lz.nn.parallel.DistributedDataParallel(model(seed=100 + r), bucket_cap_mb=CAP)
    before = lz.debug.counter_value("UncachedCompile")
    reduces = lz.debug.counter_value("ExecutedNode::all_reduce")
    share = slice(r * 8 // n, (r + 1) * 8 // n)
    got = train(ddp, X[share], Y[share])
    compiles = lz.debug.counter_value("UncachedCompile") - before
    reduces = lz.debug.counter_value("ExecutedNode::all_reduce") - reduces
    # The same model trained in one process on the whole batch.
    want = train(model(seed=100), X, Y)
    emit(diff=max(float(np.abs(a - b).max()) for a, b in zip(got, want)), compiles=compiles,
         params=[p.ravel().tolist() for p in got], reduces=reduces)
"""


# The default buckets (the model's 4 gradients in one all_reduce) and one per parameter.
@needs_mpi
@pytest.mark.parametrize("cap,reduces_per_step", [(None, 1), (0, 4)])
def test_data_parallel_training_equals_one_process_over_the_whole_batch(cap, reduces_per_step):
    ranks = mpirun(2, DDP_PROGRAM.replace("bucket_cap_mb=CAP", f"bucket_cap_mb={cap}"))
    (a,), (b,) = ranks
    assert a["diff"] < 1e-5 and b["diff"] < 1e-5, (a["diff"], b["diff"])
    assert a["params"] == b["params"], "the ranks' parameters differ"
    # A step program for the first step and one for the steady state (the optimizer's momentum
    # buffers appear at step 2), then none: the collectives add no recompiles.
    assert a["compiles"] <= 2, a["compiles"]
    assert a["reduces"] == 5 * reduces_per_step, a["reduces"]


@needs_mpi
def test_a_single_process_without_mpirun_is_a_group_of_one(tmp_path):
    code = ("import lazuli as lz, lazuli.distributed as dist\n"
            "dist.init_process_group('mpi')\n"
            "x = lz.ones(3)\n"
            "dist.all_reduce(x, dist.ReduceOp.AVG)\n"
            "print(dist.get_rank(), dist.get_world_size(), dist.get_backend(), x.tolist())\n")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[-2] == "0 1 mpi [1.0, 1.0, 1.0]"


@needs_mpi
def test_ranks_about_to_run_different_collectives_all_raise_naming_each_ranks():
    ranks = mpirun(2, """
        dist.init_process_group("mpi")
        r = dist.get_rank()
        x = lz.ones(4 + r)  # rank 1's tensor is longer
        dist.all_reduce(x)
        try:
            x.tolist()
        except lz.ExecutionError as e:
            emit(error=str(e))
        dist.barrier()
        y = lz.ones(3)  # the group is still usable afterwards
        dist.all_reduce(y)
        emit(after=y.tolist())
    """)
    for [failed, after] in ranks:
        assert "the ranks are about to run different collectives" in failed["error"]
        assert "rank 0: all_reduce float32[4] sum (program cut at <string>:" in failed["error"]
        assert "rank 1: all_reduce float32[5] sum (program cut at <string>:" in failed["error"]
        assert after["after"] == [2.0, 2.0, 2.0]


@needs_mpi
def test_a_rank_that_never_arrives_is_reported_after_the_timeout():
    ranks = mpirun(2, """
        dist.init_process_group("mpi")
        if dist.get_rank() == 0:
            x = lz.ones(2)
            dist.all_reduce(x)
            try:
                x.tolist()
            except lz.ExecutionError as e:
                emit(error=str(e))
        else:
            emit(skipped=True)  # rank 1 runs no collective and exits
    """, env={"LAZULI_DIST_TIMEOUT": "2"}, timeout=60)
    assert "did not complete within 2 s (LAZULI_DIST_TIMEOUT)" in ranks[0][0]["error"]
    assert ranks[1] == [{"skipped": True, "rank": 1}]


@needs_mpi
def test_an_uncaught_exception_on_one_rank_ends_every_rank():
    out = mpirun(2, """
        dist.init_process_group("mpi")
        if dist.get_rank() == 1:
            raise KeyError("only on rank 1")
        x = lz.ones(2)
        dist.all_reduce(x)  # rank 0 would wait here for rank 1 forever
        x.tolist()
    """, fails=True, timeout=60)
    assert "KeyError: 'only on rank 1'" in out.stderr
    assert "lazuli.distributed: rank 1 ends the job (an uncaught KeyError)" in out.stderr


def test_without_a_process_group_collectives_say_how_to_start_one():
    assert not dist.is_initialized()
    x = lz.ones(2)
    with pytest.raises(lz.Error, match="init_process_group"):
        dist.all_reduce(x)
    with pytest.raises(lz.Error, match="init_process_group"):
        dist.get_world_size()
    with pytest.raises(RuntimeError, match="init_process_group"):
        lz.nn.parallel.DistributedDataParallel(lz.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="unknown backend"):
        dist.init_process_group("nccl")
    assert x.tolist() == [1.0, 1.0]
