"""A process whose kernels all come from the disk cache never loads LLVM, and neither does import."""
import os
import subprocess
import sys

CHILD = r"""
import lazuli as lz
def llvm():
    return "libLLVM" in open("/proc/self/maps").read()
after_import = llvm()
x = lz.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
v = (lz.nn.functional.softmax(x * 2 + 1, dim=-1) * x).sum().item()
print(after_import, llvm(), lz.debug.counter_value("KernelCompile"),
      lz.debug.counter_value("PersistentCacheHit"), round(v, 4))
"""


def run(cache):
    env = dict(os.environ, LAZULI_CACHE_DIR=str(cache), LAZULI_BACKEND="cpu")
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    a, b, compiles, hits, value = out.stdout.split()
    return a == "True", b == "True", int(compiles), int(hits), float(value)


def test_import_does_not_load_llvm_and_a_warm_process_never_does(tmp_path):
    cold = run(tmp_path)
    warm = run(tmp_path)
    assert cold[0] is False and warm[0] is False, "import lazuli loaded libLLVM"
    assert cold[1] is True and cold[2] > 0, "the first process should compile (and load LLVM)"
    assert warm[2] == 0 and warm[3] > 0, f"the second process compiled: {warm}"
    assert warm[1] is False, "a process served by the disk cache loaded libLLVM"
    assert warm[4] == cold[4]
