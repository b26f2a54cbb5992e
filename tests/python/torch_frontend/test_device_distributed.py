"""torch.distributed on the lazuli device (the "lazuli" c10d backend, docs/distributed.md): 2
processes started by torchrun. Collectives on device tensors are recorded into the step graph and
run inside its program; PyTorch's DistributedDataParallel and FSDP2 (fully_shard) over a device
model train as one process over the whole batch, with their collectives inside the step program and
no compile after warm-up; ranks that record different collectives raise on every rank instead of hanging."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("this PyTorch has no torch.distributed", allow_module_level=True)

PROGRAM = textwrap.dedent("""
    import json, os, sys
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    import lazuli as lz
    import lazuli.torch as lzt

    dev = lzt.device()
    dist.init_process_group("lazuli")
    rank, world = dist.get_rank(), dist.get_world_size()
    out = dict(backend=dist.get_backend())

    # Collectives on device tensors: recorded, run by the next value read.
    t = torch.full((3,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    out["state_after_all_reduce"] = lzt.tensor_state(t)
    out["graph"] = torch.ops.lazuli.dump_graph([t])
    out["all_reduce"] = t.cpu().tolist()
    ops = {}
    for name in ("MAX", "MIN", "AVG", "PRODUCT"):
        x = torch.tensor([float(rank + 2)], device=dev)
        dist.all_reduce(x, op=getattr(dist.ReduceOp, name))
        ops[name] = x.item()
    out["ops"] = ops
    b = torch.arange(4.0, device=dev) * (rank + 1)
    dist.broadcast(b, src=1)
    out["broadcast"] = b.cpu().tolist()
    gathered = [torch.zeros(2, device=dev) for _ in range(world)]
    dist.all_gather(gathered, torch.full((2,), float(rank), device=dev))
    out["all_gather"] = [g.cpu().tolist() for g in gathered]
    into = torch.zeros(world, 2, device=dev)
    dist.all_gather_into_tensor(into, torch.full((2,), float(rank), device=dev))
    out["all_gather_into_tensor"] = into.cpu().tolist()
    rs = torch.zeros(2, device=dev)
    dist.reduce_scatter_tensor(rs, torch.arange(2.0 * world, device=dev) * (rank + 1))
    out["reduce_scatter_tensor"] = rs.cpu().tolist()
    cpu = torch.full((2,), float(rank))  # CPU tensors of the same group: gloo, at once
    dist.all_reduce(cpu)
    out["cpu"] = cpu.tolist()
    dist.barrier()

    # DistributedDataParallel over a device model equals one process over the whole batch.
    torch.manual_seed(0)
    X, Y = torch.randn(8, 6), torch.randint(0, 3, (8,))

    def model(seed):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))

    m = model(1 + rank).to(dev)  # DDP broadcasts rank 0's parameters
    ddp = DDP(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.3, momentum=0.9)
    share = slice(rank * 8 // world, (rank + 1) * 8 // world)
    x, y = X[share].to(dev), Y[share].to(dev)
    compiles = []
    for step in range(4):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        if step == 0:
            out["step_graph"] = torch.ops.lazuli.dump_graph([p.grad for p in m.parameters()])
        opt.step()
        lzt.sync()
        compiles.append(lz.debug.counter_value("UncachedCompile"))
    out["compiles"] = compiles
    ref = model(1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.3, momentum=0.9)
    for _ in range(4):
        ref_opt.zero_grad()
        torch.nn.functional.cross_entropy(ref(X), Y).backward()
        ref_opt.step()
    out["ddp_diff"] = max(float((p.detach().cpu() - r.detach()).abs().max())
                          for p, r in zip(m.parameters(), ref.parameters()))
    out["params"] = [p.detach().cpu().flatten().tolist() for p in m.parameters()]

    # FSDP2 (fully_shard) over a device model: parameters sharded over the ranks, all-gathered for
    # the forward and backward, gradients reduce-scattered, all inside the step program.
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("lazuli", (world,))
    m = model(1).to(dev)
    for layer in (m[0], m[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    opt = torch.optim.SGD(m.parameters(), lr=0.3, momentum=0.9)
    compiles = []
    for step in range(4):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(x), y).backward()
        if step == 1:
            out["fsdp_graph"] = torch.ops.lazuli.dump_graph([p.grad.to_local()
                                                             for p in m.parameters()])
        opt.step()
        lzt.sync()
        compiles.append(lz.debug.counter_value("UncachedCompile"))
    out["fsdp_compiles"] = compiles
    out["fsdp_diff"] = max(float((p.full_tensor().detach().cpu() - r.detach()).abs().max())
                           for p, r in zip(m.parameters(), ref.parameters()))
    out["fallbacks"] = {n: lz.debug.counter_value(n) for n in lz.debug.counter_names()
                        if n.startswith("fallback::") and lz.debug.counter_value(n)}

    # Another group (new_group): CPU tensors run on it; device tensors say they cannot; destroying
    # it leaves the default group's engine working.
    sub = dist.new_group([0, 1])
    c = torch.ones(2)
    dist.all_reduce(c, group=sub)
    try:
        dist.all_reduce(torch.ones(2, device=dev), group=sub)
        out["subgroup_error"] = None
    except NotImplementedError as e:
        out["subgroup_error"] = str(e)
    dist.destroy_process_group(sub)
    after = torch.ones(2, device=dev)
    dist.all_reduce(after)
    out["subgroup"] = dict(cpu=c.tolist(), after=after.cpu().tolist())

    # Ranks that record different collectives: every rank raises, naming both.
    bad = torch.ones(3 + rank, device=dev)
    dist.all_reduce(bad)
    try:
        bad.cpu()
        out["divergence"] = None
    except RuntimeError as e:
        out["divergence"] = str(e)
    with open(os.path.join(sys.argv[1], f"train{rank}.json"), "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()
""")


def run_two_ranks(program, tmp, name):
    """`program` on 2 processes started by torchrun (1 thread each); each rank's JSON report."""
    script = tmp / f"{name}.py"
    script.write_text(program)
    env = dict(os.environ, OMP_NUM_THREADS="1", LAZULI_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", str(script), str(tmp)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads((tmp / f"{name}{r}.json").read_text()) for r in range(2)]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return run_two_ranks(PROGRAM, tmp_path_factory.mktemp("device_ddp"), "train")


def test_collectives_on_device_tensors_are_recorded_and_run_at_the_value_read(ranks):
    for r in ranks:
        assert r["backend"] == "lazuli"
        assert r["state_after_all_reduce"] == "ir"
        assert "all_reduce" in r["graph"].lower().replace("allreduce", "all_reduce"), r["graph"]
        assert r["all_reduce"] == [3.0, 3.0, 3.0]
        assert r["ops"] == {"MAX": 3.0, "MIN": 2.0, "AVG": 2.5, "PRODUCT": 6.0}
        assert r["broadcast"] == [0.0, 2.0, 4.0, 6.0]
        assert r["all_gather"] == [[0.0, 0.0], [1.0, 1.0]]
        assert r["all_gather_into_tensor"] == [[0.0, 0.0], [1.0, 1.0]]
        assert r["cpu"] == [1.0, 1.0]
    # arange(4) * 1 + arange(4) * 2 = [0, 3, 6, 9]: rank 0 holds block 0, rank 1 block 1.
    assert ranks[0]["reduce_scatter_tensor"] == [0.0, 3.0]
    assert ranks[1]["reduce_scatter_tensor"] == [6.0, 9.0]


def test_ddp_on_the_device_trains_as_one_process_over_the_whole_batch(ranks):
    for r in ranks:
        assert r["ddp_diff"] < 1e-5, r["ddp_diff"]
        # The gradient buckets' all-reduce is a node of the step graph, not a call of its own.
        assert "all_reduce" in r["step_graph"].lower().replace("allreduce", "all_reduce")
        # Warm-up is three steps: step 1 reads the parameters DDP broadcast, step 2 has momentum
        # buffers and the buckets DDP rebuilds after its first step, step 3 those buckets' values.
        # Step 4 compiles nothing.
        assert r["compiles"][2] == r["compiles"][3], r["compiles"]
    assert ranks[0]["params"] == ranks[1]["params"], "the ranks' parameters differ"


def test_fsdp2_on_the_device_trains_as_one_process_over_the_whole_batch(ranks):
    for r in ranks:
        assert r["fsdp_diff"] < 1e-5, r["fsdp_diff"]
        # Step 1 reads the parameters as sharded at wrapping; from step 2 on, one program.
        assert r["fsdp_compiles"][1] == r["fsdp_compiles"][2] == r["fsdp_compiles"][3], \
            r["fsdp_compiles"]
        assert r["fallbacks"] == {}, r["fallbacks"]
        # The gradients' program holds the parameters' all-gathers and the reduce-scatters.
        assert "all_gather" in r["fsdp_graph"] and "reduce_scatter" in r["fsdp_graph"]


def test_device_collectives_over_another_group_raise_and_leave_the_world_working(ranks):
    for r in ranks:
        assert "default group" in r["subgroup_error"], r["subgroup_error"]
        assert r["subgroup"] == dict(cpu=[2.0, 2.0], after=[2.0, 2.0])


def test_ranks_recording_different_collectives_raise_on_every_rank(ranks):
    for r in ranks:
        assert r["divergence"] is not None, "a divergent step ran"
        assert "rank 0" in r["divergence"] and "rank 1" in r["divergence"], r["divergence"]


NATIVE = textwrap.dedent("""
    import json, os, sys
    import lazuli as lz
    import lazuli.distributed as dist

    try:
        dist.init_process_group("mpi")
        mpi_error = None
    except RuntimeError as e:
        mpi_error = str(e)
    dist.init_process_group("gloo")  # torchrun's environment, torch.distributed's gloo
    rank, world = dist.get_rank(), dist.get_world_size()
    t = lz.full([3], float(rank + 1))
    dist.all_reduce(t)
    lz.manual_seed(0)
    X = lz.randn([8, 4])
    lz.manual_seed(1)
    model = lz.nn.Linear(4, 2)
    ddp = lz.nn.parallel.DistributedDataParallel(model)
    y = ddp(X[rank * 4:(rank + 1) * 4])
    (y * y).mean().backward()
    lz.sync()
    out = dict(mpi_error=mpi_error, backend=dist.get_backend(), all_reduce=t.numpy().tolist(),
               grad=model.weight.grad.numpy().tolist(), x=X.numpy().tolist(),
               weight=model.weight.numpy().tolist(), bias=model.bias.numpy().tolist())
    with open(os.path.join(sys.argv[1], f"native{rank}.json"), "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()
""")


def test_the_native_api_runs_under_torchrun_on_gloo(tmp_path):
    np = pytest.importorskip("numpy")
    ranks = run_two_ranks(NATIVE, tmp_path, "native")
    for r in ranks:
        assert "torchrun" in r["mpi_error"] and "gloo" in r["mpi_error"], r["mpi_error"]
        assert r["backend"] == "gloo"
        assert r["all_reduce"] == [3.0, 3.0, 3.0]
    # The averaged gradient is the gradient of the mean loss over the whole batch.
    x, w, b = (np.array(ranks[0][k]) for k in ("x", "weight", "bias"))
    y = x @ w.T + b
    want = 2 * (y.T @ x) / y.size
    np.testing.assert_allclose(ranks[0]["grad"], want, rtol=1e-5, atol=1e-6)
    assert ranks[0]["grad"] == ranks[1]["grad"]
