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


def mpirun(n, program, timeout=120):
    """Runs `program` on n ranks; returns the records each rank emitted (emit(**fields), written
    to a file per rank: ranks' stdout lines can interleave), by rank."""
    out_dir = tempfile.mkdtemp(prefix="lazuli-mpi-")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               # One thread per rank: the ranks share this machine's cores.
               OMP_NUM_THREADS="1", LAZULI_NUM_THREADS="1", LAZULI_TEST_OUT=out_dir)
    code = PRELUDE + textwrap.dedent(program)
    out = subprocess.run([MPIRUN, "-n", str(n), "--oversubscribe", sys.executable, "-c", code],
                         env=env, capture_output=True, text=True, timeout=timeout)
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
        dist.reduce_scatter_tensor(rs, lz.tensor(np.ones((n, 4), dtype=np.float32) * (r + 1)))
        emit(size=n, s=s.tolist(), avg=avg.tolist(), mx=mx.tolist(), ints=ints.tolist(),
             half=half.float().tolist(), b=b.tolist(), g=g.tolist(),
             parts=[p.tolist() for p in parts], rs=rs.tolist(),
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
        np.testing.assert_array_equal(rec["rs"], [[n * (n + 1) / 2] * 4])
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
    ddp = lz.nn.parallel.DistributedDataParallel(model(seed=100 + r))
    before = lz.debug.counter_value("UncachedCompile")
    share = slice(r * 8 // n, (r + 1) * 8 // n)
    got = train(ddp, X[share], Y[share])
    compiles = lz.debug.counter_value("UncachedCompile") - before
    # The same model trained in one process on the whole batch.
    want = train(model(seed=100), X, Y)
    emit(diff=max(float(np.abs(a - b).max()) for a, b in zip(got, want)), compiles=compiles,
         params=[p.ravel().tolist() for p in got])
"""


@needs_mpi
def test_data_parallel_training_equals_one_process_over_the_whole_batch():
    ranks = mpirun(2, DDP_PROGRAM)
    (a,), (b,) = ranks
    assert a["diff"] < 1e-5 and b["diff"] < 1e-5, (a["diff"], b["diff"])
    assert a["params"] == b["params"], "the ranks' parameters differ"
    # A step program for the first step and one for the steady state (the optimizer's momentum
    # buffers appear at step 2), then none: the collectives add no recompiles.
    assert a["compiles"] <= 2, a["compiles"]


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
