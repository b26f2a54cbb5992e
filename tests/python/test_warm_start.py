"""A process whose kernels all come from the disk cache never loads LLVM, and neither does import;
the code generator's build ID is what keys that cache to it."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import lazuli

CHILD = r"""
import lazuli as lz
def llvm():  # the code generator: libLLVM, or LLVM linked into liblazuli_jit.so (the wheel's)
    maps = open("/proc/self/maps").read()
    return "libLLVM" in maps or "liblazuli_jit" in maps
after_import = llvm()
x = lz.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
v = (lz.nn.functional.softmax(x * 2 + 1, dim=-1) * x).sum().item()
print(after_import, llvm(), lz.debug.counter_value("KernelCompile"),
      lz.debug.counter_value("PersistentCacheHit"), round(v, 4))
"""


def run(cache, path=None):
    env = dict(os.environ, LAZULI_CACHE_DIR=str(cache), LAZULI_BACKEND="cpu")
    if path:
        env["PYTHONPATH"] = str(path)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    a, b, compiles, hits, value = out.stdout.split()
    return a == "True", b == "True", int(compiles), int(hits), float(value)


def test_import_does_not_load_llvm_and_a_warm_process_never_does(tmp_path):
    cold = run(tmp_path)
    warm = run(tmp_path)
    assert cold[0] is False and warm[0] is False, "import lazuli loaded LLVM"
    assert cold[1] is True and cold[2] > 0, "the first process should compile (and load LLVM)"
    assert warm[2] == 0 and warm[3] > 0, f"the second process compiled: {warm}"
    assert warm[1] is False, "a process served by the disk cache loaded LLVM"
    assert warm[4] == cold[4]


def build_id(lib):
    out = subprocess.run(["readelf", "-n", str(lib)], capture_output=True, text=True, check=True).stdout
    return bytes.fromhex(re.search(r"Build ID: ([0-9a-f]+)", out).group(1))


def test_the_code_generators_build_id_keys_the_disk_cache(tmp_path):
    # A copy of the package whose liblazuli_jit.so this test edits (liblazuli.so loads the one
    # beside it), with the libraries a portable wheel keeps beside the package (lazuli.libs).
    package = pathlib.Path(lazuli.__file__).parent
    shutil.copytree(package, tmp_path / "pkg" / "lazuli", ignore=shutil.ignore_patterns("__pycache__"))
    if (package.parent / "lazuli.libs").is_dir():
        shutil.copytree(package.parent / "lazuli.libs", tmp_path / "pkg" / "lazuli.libs")
    jit = tmp_path / "pkg" / "lazuli" / "liblazuli_jit.so"
    cache = tmp_path / "cache"
    assert run(cache, tmp_path / "pkg")[2] > 0
    # Bytes that change no code (as auditwheel's patchelf edits only the dynamic section): the
    # kernels compiled for it still serve.
    with open(jit, "ab") as f:
        f.write(b"\0" * 64)
    again = run(cache, tmp_path / "pkg")
    assert again[2] == 0 and again[3] > 0, f"an edit outside the code missed the cache: {again}"
    # Another build of the code generator (another build ID): its kernels are compiled afresh.
    data = jit.read_bytes()
    old = build_id(jit)
    assert data.count(old) == 1
    jit.write_bytes(data.replace(old, bytes(b ^ 0xFF for b in old)))
    other = run(cache, tmp_path / "pkg")
    assert other[2] > 0 and other[3] == 0, f"another code generator's build reused kernels: {other}"
    assert other[4] == again[4]
