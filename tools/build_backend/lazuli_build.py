"""PEP 517 build backend for Lazuli, kept in the tree so `pip install .` works offline.

build_wheel configures and builds the `_C` extension (and, where PyTorch is found, the lazy
PyTorch device: `_torch_site`) with CMake and Ninja outside the source tree
(in a temporary directory removed afterwards, or in $LAZULI_WHEEL_BUILD_DIR, kept and reused, for
fast repeated installs), then writes a wheel holding python/lazuli's modules and the extension
built there. Nothing is written into a checkout; an unpacked sdist (pip's own copy) is built in
its build-wheel/. Run scripts/setup.sh first on a fresh machine: it installs the compilers and
libraries with apt-get.
"""
import base64
import hashlib
import os
import pathlib
import re
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME = "lazuli"
# The one version number: CMakeLists.txt's project(lazuli VERSION x.y.z), which also gives
# lazuli.__version__ and the C++ library's SOVERSION.
VERSION = re.search(r"project\(lazuli VERSION ([0-9.]+)",
                    (ROOT / "CMakeLists.txt").read_text()).group(1)


# The bindings need pybind11 >= 2.12 for numpy 2 (requirements-build.txt pins the one tested; it
# is also pyproject.toml's build requirement, installed by pip into the isolated build).
PYBIND11 = "pybind11>=2.12"


def get_requires_for_build_wheel(config_settings=None):
    return [PYBIND11]


def get_requires_for_build_editable(config_settings=None):
    return [PYBIND11]


def _pybind11_dir():
    """pybind11's CMake folder, from the pybind11 this build imports (pip installs it into the
    isolated build environment); Debian's 2.10 would build bindings numpy 2 cannot use."""
    try:
        import pybind11
    except ImportError as e:
        raise RuntimeError(f"building lazuli needs {PYBIND11} importable (pip installs it from "
                           "pyproject.toml's build requirements; with --no-build-isolation, install "
                           "it first)") from e
    return pybind11.get_cmake_dir()


def _tag():
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{py}-{py}-{plat}"


def _torch_site():
    """The site-packages folder holding PyTorch, to build the lazy device against: the
    LAZULI_TORCH_SITE environment variable, else the building Python's own torch (with pip's
    --no-build-isolation), else none (the wheel then has no lazy device)."""
    site = os.environ.get("LAZULI_TORCH_SITE")
    if site:
        return site
    try:
        import torch
    except ImportError:
        return ""
    return str(pathlib.Path(torch.__file__).resolve().parents[1])


def _build_extension(build):
    """Builds _C, liblazuli.so, liblazuli_jit.so and, where PyTorch is found, the lazy device
    (_device.so) and the torch glue (_torch_glue.so) into build/lazuli; returns that directory."""
    out = build / NAME
    site = _torch_site()
    subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja",
                           "-DCMAKE_BUILD_TYPE=Release", "-DLAZULI_BUILD_PYTHON=ON",
                           "-DLAZULI_BUILD_TESTS=OFF", "-DLAZULI_BUILD_BENCH=OFF",
                           "-DLAZULI_BUILD_EXAMPLES=OFF", f"-DLAZULI_PYTHON_OUTPUT_DIR={out}",
                           # LLVM inside liblazuli_jit.so: no libLLVM where the wheel goes.
                           "-DLAZULI_LLVM_STATIC=ON",
                           f"-DLAZULI_TORCH_SITE={site}", f"-Dpybind11_DIR={_pybind11_dir()}",
                           f"-DPython_EXECUTABLE={sys.executable}"], stdout=sys.stderr)
    targets = ["_C"] + (["lazuli_device", "lazuli_torch_glue"] if site else [])
    subprocess.check_call(["cmake", "--build", str(build), "--target", *targets], stdout=sys.stderr)
    return out


def _torch_extra():
    """The `[torch]` extra's requirements: the lines of requirements-torch.txt (the one place the
    PyTorch pins live, also read by scripts/torch-venv.sh) marked "[torch] extra"."""
    reqs = []
    for line in (ROOT / "requirements-torch.txt").read_text().splitlines():
        req, _, comment = line.partition("#")
        if req.strip() and "[torch] extra" in comment:
            reqs.append(req.strip())
    return reqs


def _entry_points():
    """entry_points.txt from pyproject.toml's [project.entry-points] (the dynamo backend)."""
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    text = ""
    for group, entries in project.get("entry-points", {}).items():
        text += f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n"
    return text.encode()


def _metadata():
    extra = "".join(f'Requires-Dist: {r}; extra == "torch"\n' for r in _torch_extra())
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
            f"Summary: A lazy tensor runtime\nRequires-Python: >=3.11\n"
            f"Requires-Dist: numpy>=1.24\nProvides-Extra: torch\n"
            f"{extra}").encode()


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    kept = os.environ.get("LAZULI_WHEEL_BUILD_DIR")
    if kept:
        return _write_wheel(wheel_directory, _build_extension(pathlib.Path(kept).resolve()))
    if (ROOT / "PKG-INFO").exists() and not _own_git_checkout():
        # An unpacked sdist (pip's own copy): built in its build-wheel/, where the sources' paths
        # relative to the build are those of scripts/setup.sh's build/, so ccache (CMakeLists.txt)
        # reuses what an earlier build of the same sources compiled. Not build/: that is
        # setup.sh's, should someone run it in an unpacked sdist.
        return _write_wheel(wheel_directory, _build_extension(ROOT / "build-wheel"))
    with tempfile.TemporaryDirectory(prefix="lazuli-wheel-build-") as build:
        return _write_wheel(wheel_directory, _build_extension(pathlib.Path(build)))


def _write_wheel(wheel_directory, built):
    pkg = ROOT / "python" / NAME
    # Every module of the package and its subpackages (nn, optim, ...) from the source tree; the
    # extension and the LLVM code generator it loads at the first kernel compile from the build.
    modules = [(p, p.relative_to(pkg)) for p in pkg.rglob("*.py") if "__pycache__" not in p.parts]
    binaries = [(p, p.relative_to(built)) for p in built.iterdir()
                if p.name in ("liblazuli.so", "liblazuli_jit.so", "liblazuli_mpi.so", "_device.so",
                              "_torch_glue.so")
                or (p.name.startswith("_C.") and p.suffix == ".so")]
    names = {p.name for p, _ in binaries}
    if not any(n.startswith("_C.") for n in names) or not {"liblazuli.so", "liblazuli_jit.so"} <= names:
        raise RuntimeError("the _C extension, liblazuli.so or liblazuli_jit.so was not built; see "
                           "the CMake output above")
    files = sorted(modules + binaries, key=lambda f: f[1].as_posix())
    return _zip_wheel(wheel_directory, [(f"{NAME}/{rel.as_posix()}", p.read_bytes()) for p, rel in files])


def _zip_wheel(wheel_directory, entries):
    """Writes a wheel of `entries` ((archive name, bytes)) and the dist-info; returns its name."""
    dist_info = f"{NAME}-{VERSION}.dist-info"
    wheel_name = f"{NAME}-{VERSION}-{_tag()}.whl"
    wheel = (f"Wheel-Version: 1.0\nGenerator: lazuli_build\nRoot-Is-Purelib: false\n"
             f"Tag: {_tag()}\n").encode()
    records = []
    path = pathlib.Path(wheel_directory) / wheel_name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arc, data in list(entries) + [(f"{dist_info}/METADATA", _metadata()),
                                          (f"{dist_info}/WHEEL", wheel),
                                          (f"{dist_info}/entry_points.txt", _entry_points())]:
            zf.writestr(arc, data)
            records.append(_record_line(arc, data))
        records.append(f"{dist_info}/RECORD,,")
        zf.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    return wheel_name


# ---- sdist -------------------------------------------------------------------------------------

def get_requires_for_build_sdist(config_settings=None):
    return []


def _own_git_checkout():
    """Whether ROOT is the top of its own git repository (not a copy inside another's)."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return False
    return pathlib.Path(top).resolve() == ROOT


def _source_files():
    """The files an sdist carries: git's tracked files in Lazuli's own checkout; in an unpacked
    sdist (no git), every file but build outputs and caches."""
    if _own_git_checkout():
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        return sorted(pathlib.Path(p.decode()) for p in out.split(b"\0") if p)
    def wanted(rel):
        parts = rel.parts
        if parts[0] in ("build", "PKG-INFO") or parts[0].startswith("build-"):  # build outputs
            return False
        if any(p in (".git", "__pycache__", ".pytest_cache", ".venv") for p in parts):
            return False
        return ".so" not in rel.suffixes  # built extensions and libraries (liblazuli.so.0.1.0)
    return sorted(rel for rel in (p.relative_to(ROOT) for p in ROOT.rglob("*") if p.is_file())
                  if wanted(rel))


def build_sdist(sdist_directory, config_settings=None):
    """lazuli-<version>.tar.gz: the sources, PKG-INFO, and a REVISION file naming the commit they
    came from (cmake/write_build_revision.cmake reads it where there is no git)."""
    import io
    import tarfile
    base = f"{NAME}-{VERSION}"
    name = f"{base}.tar.gz"
    files = [f for f in _source_files() if f.as_posix() != "REVISION"]
    if (ROOT / "REVISION").exists():
        revision = (ROOT / "REVISION").read_text().strip()
    elif _own_git_checkout():
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.strip()
        revision = f"g{commit}"
    else:
        revision = ""  # the sources' hash, computed at build time
    with tarfile.open(pathlib.Path(sdist_directory) / name, "w:gz", format=tarfile.PAX_FORMAT) as tf:
        def add_bytes(arc, data, mode=0o644):
            info = tarfile.TarInfo(f"{base}/{arc}")
            info.size, info.mode, info.mtime = len(data), mode, 0
            tf.addfile(info, io.BytesIO(data))
        for f in files:
            p = ROOT / f
            if p.is_file():
                add_bytes(f.as_posix(), p.read_bytes(), 0o755 if os.access(p, os.X_OK) else 0o644)
        add_bytes("PKG-INFO", _metadata())
        if revision:
            add_bytes("REVISION", (revision + "\n").encode())
    return name


# ---- editable install (PEP 660) ------------------------------------------------------------------

def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """`pip install -e .`: builds the extension in the checkout, as scripts/setup.sh does (into
    build/, reused when configured; the extension lands in python/lazuli/), and writes a wheel
    whose one file is a .pth putting python/ on sys.path: edits to the Python sources take effect
    at the next import, C++ edits after `cmake --build build`."""
    build = ROOT / "build"
    site = _torch_site()
    cache = build / "CMakeCache.txt"
    # build/ is scripts/setup.sh's: configured there with pybind11 and torch from their lasting
    # places (pip's isolated build environment, and its pybind11, is deleted after the install).
    if not cache.exists() or "LAZULI_BUILD_PYTHON:BOOL=ON" not in cache.read_text():
        raise RuntimeError("pip install -e . builds into build/, which scripts/setup.sh configures "
                           "(with the Python extension); run `bash scripts/setup.sh` first")
    targets = ["_C"] + (["lazuli_device", "lazuli_torch_glue"] if site else [])
    subprocess.check_call(["cmake", "--build", str(build), "--target", *targets], stdout=sys.stderr)
    pth = (str(ROOT / "python") + "\n").encode()
    return _zip_wheel(wheel_directory, [(f"_{NAME}_editable.pth", pth)])
