#!/usr/bin/env bash
# Sets up everything (system packages, build) and runs every test:
#   1. the C++ tests (GoogleTest under ctest) on a Release build;
#   2. the Python tests (pytest) against the package built from an sdist by `pip wheel` and
#      installed, under numpy 1 (Debian's), and under numpy 2 (requirements-build.txt) against the
#      portable wheel with Debian's libraries hidden; the PyTorch bridge's tests (the pinned torch:
#      scripts/torch-venv.sh, installed once per machine);
#   3. the C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer, and the concurrency
#      tests under ThreadSanitizer (skip both with LAZULI_SKIP_SANITIZERS=1 for a quick local run).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${LAZULI_JOBS:-$(nproc)}

# Every stage ends with one line saying how long it took, so a slow suite shows where.
source scripts/stage.sh
RUN_START=$SECONDS

stage "setup and Release build"
bash scripts/setup.sh build
# setup.sh installs Open MPI: the distributed tests (tests/python/test_distributed.py) must run.
export LAZULI_REQUIRE_MPI=1
# Compiled kernels go to a fresh persistent cache, so every run exercises compiling and reloading.
export LAZULI_CACHE_DIR="${LAZULI_CACHE_DIR:-$(mktemp -d)/lazuli-cache}"
stage "C++ tests (Release)"
ctest --test-dir build --output-on-failure -j "$JOBS"

stage "Python: an sdist, a wheel built from it (offline), an editable install"
VENV=$(mktemp -d)/venv
/usr/bin/python3 -m venv --system-site-packages "$VENV"
# pip builds out of the tree (tools/build_backend/lazuli_build.py): the checkout must not change.
# PYTHONDONTWRITEBYTECODE: Python's import cache of the backend module is not the build's doing.
# The lazy PyTorch device is built into the wheel against the pinned torch (LAZULI_TORCH_SITE).
TORCH_SITE=""
if [ "${LAZULI_SKIP_TORCH:-0}" != "1" ]; then
  TORCH_SITE=$(bash scripts/torch-venv.sh)
fi
# The sdist comes from the build backend's own hook (what `python -m build --sdist` calls); the
# wheel is built from that sdist, so every run is a round trip (the sdist carries what a build
# needs, and its REVISION file names this commit). pip builds it as a user's `pip install` does,
# in an isolated environment whose build requirement (pybind11) comes from the wheels
# scripts/py-tools.sh keeps: nothing is fetched. ccache hands it the objects setup.sh's build
# compiled from the same sources, except the bindings' (pybind11's headers are in pip's temporary
# environment, a new path each time). The wheel is built once and installed into both test
# environments (numpy 1 and 2).
PY_TOOLS=$(bash scripts/py-tools.sh)
SDIST_DIR=$(mktemp -d) WHEEL_DIR=$(mktemp -d)
STAMP=$(mktemp) TREE_BEFORE=$(git status --porcelain --ignored 2>&1 || true)
SDIST=$SDIST_DIR/$(PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c 'import sys; sys.path.insert(0, "tools/build_backend"); import lazuli_build; print(lazuli_build.build_sdist(sys.argv[1]))' "$SDIST_DIR")
command -v ccache >/dev/null && ccache --zero-stats >/dev/null
LAZULI_TORCH_SITE="$TORCH_SITE" PYTHONDONTWRITEBYTECODE=1 "$VENV/bin/pip" wheel --no-index --quiet \
  --find-links "$PY_TOOLS/wheels" --no-deps -w "$WHEEL_DIR" "$SDIST"
if command -v ccache >/dev/null; then
  echo "the wheel's build, ccache: $(ccache --print-stats | awk -F'\t' '$1 ~ /^(direct|preprocessed)_cache_hit$/ {h += $2}
    $1 == "cache_miss" {m += $2} END {print h + 0 " compiles reused, " m + 0 " done"}')"
fi
WRITTEN=$(find . -path ./.git -prune -o -newer "$STAMP" -print)
if [ -n "$WRITTEN" ] || [ "$TREE_BEFORE" != "$(git status --porcelain --ignored 2>&1 || true)" ]; then
  echo "the sdist or the wheel build wrote into the source tree: ${WRITTEN:-$(git status --porcelain --ignored)}" >&2
  exit 1
fi
tar -xOzf "$SDIST" "$(basename "$SDIST" .tar.gz)/REVISION" | grep -qx "g$(git rev-parse --short=12 HEAD)" ||
  { echo "the sdist's REVISION does not name this commit" >&2; exit 1; }
WHEEL=$(ls "$WHEEL_DIR"/lazuli-*.whl)
# The portable wheel: the same wheel with the libraries it links from Debian's packages copied in
# by auditwheel (tools/portable_wheel.py), tagged manylinux. The numpy 2 tests run against it below.
PORTABLE=$("$PY_TOOLS/venv/bin/python" tools/portable_wheel.py repair "$WHEEL" "$(mktemp -d)")
echo "portable wheel: $(basename "$PORTABLE"), $(($(stat -c %s "$PORTABLE") / 1048576)) MiB"
# pip install -e .: builds into build/ (done above: nothing to compile) and puts python/ on the
# path, so the checkout's sources are what imports.
EDITABLE=$(mktemp -d)/venv
/usr/bin/python3 -m venv --system-site-packages "$EDITABLE"
LAZULI_TORCH_SITE="$TORCH_SITE" "$EDITABLE/bin/pip" install --no-index --quiet \
  --find-links "$PY_TOOLS/wheels" -e .
(cd "$(mktemp -d)" && "$EDITABLE/bin/python" -c 'import sys, lazuli as lz; assert lz.__file__.startswith(sys.argv[1] + "/python/lazuli/"), lz.__file__; print("editable install:", lz.__file__, lz.__version__, (lz.ones(2) * 3).tolist())' "$OLDPWD")
"$VENV/bin/pip" install --no-index --quiet "$WHEEL"
# PyTorch for tests/python/torch_frontend: the pinned torch, installed once per machine outside the
# checkout (scripts/torch-venv.sh), is made visible to the test venv by a .pth file, not copied.
# LAZULI_SKIP_TORCH=1 leaves it out (those tests are then not collected).
if [ "${LAZULI_SKIP_TORCH:-0}" != "1" ]; then
  "$VENV/bin/python" -c 'import sysconfig, sys; open(sysconfig.get_paths()["purelib"] + "/lazuli-torch.pth", "w").write(sys.argv[1] + "\n")' "$TORCH_SITE"
  "$VENV/bin/python" -c 'import torch; print("torch", torch.__version__, "from", torch.__file__)'
fi
# From outside the source tree, so `import lazuli` is the installed package. The PyTorch front
# end's tests run in a process of their own: once torch is imported, its OpenMP threads spin
# beside Lazuli's pool and slow every later test on a small machine.
stage "Python tests (pytest against the installed package)"
(cd "$(mktemp -d)" && "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
   --ignore="$OLDPWD/tests/python/torch_frontend" "$OLDPWD/tests/python")
# The same tests under numpy 2 (requirements-build.txt), in a venv that sees no Debian package,
# against the portable wheel, where the libraries Debian's packages gave the build (oneDNN, xxHash,
# libgomp, LLVM, ...) are hidden as on a machine without them (tools/portable_wheel.py hide: a
# private mount namespace covers each with an empty file). The kernels compiled above are in the
# persistent cache, and keyed to the code generator's build ID, which auditwheel's edits keep:
# this run compiles almost nothing.
stage "Python tests under numpy 2, on the portable wheel with Debian's libraries hidden"
NP2=$(mktemp -d)/venv
/usr/bin/python3 -m venv "$NP2"
"$NP2/bin/pip" install --no-index --quiet --find-links "$PY_TOOLS/wheels" -r requirements-build.txt "$PORTABLE"
"$NP2/bin/python" -c 'import numpy; print("numpy", numpy.__version__)'
HIDDEN=("$PY_TOOLS/venv/bin/python" "$PWD/tools/portable_wheel.py" hide --wheel "$PORTABLE"
        --from "$PWD/build/liblazuli.so" "$PWD/build/liblazuli_jit.so" --)
# The hiding works here (a mount namespace: unshare), and takes: the from-source build, linked to
# those libraries, cannot load there, for the reason the hiding gives.
"${HIDDEN[@]}" /usr/bin/python3 -c 'pass' ||
  { echo "cannot hide libraries here (unshare --mount failed): the portable wheel cannot be checked" >&2; exit 1; }
HIDDEN_LOAD=$("${HIDDEN[@]}" /usr/bin/python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$PWD/build/liblazuli.so" 2>&1 || true)
grep -q "file too short" <<<"$HIDDEN_LOAD" ||
  { echo "the libraries were not hidden: loading the from-source liblazuli.so gave: $HIDDEN_LOAD" >&2; exit 1; }
(cd "$(mktemp -d)" && "${HIDDEN[@]}" "$NP2/bin/python" -m pytest -q -p no:cacheprovider \
   --ignore="$OLDPWD/tests/python/torch_frontend" "$OLDPWD/tests/python")
if [ "${LAZULI_SKIP_TORCH:-0}" != "1" ]; then
  stage "Python tests of the PyTorch front end"
  # A process per core (pytest-xdist) for the tests that build models and trace with dynamo; the
  # OpInfo files' 17,000 small cases in one process, where xdist's per-test cost would triple them.
  TF="$PWD/tests/python/torch_frontend"
  OPINFO=("$TF/test_opinfo.py" "$TF/test_device_opinfo.py")
  # At most 4: each process has its own Lazuli pool and PyTorch threads, and its own memory.
  (cd "$(mktemp -d)" && "$VENV/bin/python" -m pytest -q -p no:cacheprovider -n $((JOBS < 4 ? JOBS : 4)) "$TF" \
     "${OPINFO[@]/#/--ignore=}")
  (cd "$(mktemp -d)" && "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${OPINFO[@]}")
  # The portable wheel beside PyTorch, Debian's libraries hidden: the lazy device and torch.compile.
  PT_PORTABLE=$(mktemp -d)/venv
  /usr/bin/python3 -m venv --system-site-packages "$PT_PORTABLE"
  "$PT_PORTABLE/bin/pip" install --no-index --quiet "$PORTABLE"
  "$PT_PORTABLE/bin/python" -c 'import sysconfig, sys; open(sysconfig.get_paths()["purelib"] + "/lazuli-torch.pth", "w").write(sys.argv[1] + "\n")' "$TORCH_SITE"
  (cd "$(mktemp -d)" && "${HIDDEN[@]}" "$PT_PORTABLE/bin/python" "$OLDPWD/tests/install/portable_wheel_torch.py")
fi

if [ "${LAZULI_SKIP_SANITIZERS:-0}" != "1" ]; then
  stage "C++ tests (ASan + UBSan)"
  # -Og -g1: reports keep file:line stacks, the tests run as fast as at -O1 (138 s against 141 s
  # here), and the build takes 271 s instead of about 600: GCC's -O1 with ASan spent 143 s on the
  # largest test file alone, -Og 32 s (-O0 is slower than both to build and to run).
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-Og -g1" \
        -DLAZULI_SANITIZE=ON -DLAZULI_BUILD_BENCH=OFF >/dev/null
  cmake --build build-asan --target lazuli_tests
  # intercept_tls_get_addr=0: with glibc 2.36, LeakSanitizer's tracking of the dynamic TLS of
  # dlopen'ed libraries (libLLVM, used by the pool's compiling threads) reads a bogus range and
  # crashes at exit; leak checking itself stays on.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$JOBS"
fi

if [ "${LAZULI_SKIP_SANITIZERS:-0}" != "1" ]; then
  stage "Concurrency tests (ThreadSanitizer)"
  # Only the library and the concurrency tests' own binary are built with -fsanitize=thread.
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLAZULI_TSAN=ON \
        -DLAZULI_BUILD_BENCH=OFF >/dev/null
  cmake --build build-tsan --target lazuli_concurrency_tests
  TSAN_BIN=build-tsan/tests/cpp/lazuli_concurrency_tests
  # GCC 12's TSan expects the address-space layout of kernels with vm.mmap_rnd_bits <= 28; with
  # more randomization it stops at start ("unexpected memory mapping"). Then run it unrandomized.
  TSAN_RUN=()
  if ! "$TSAN_BIN" --gtest_list_tests >/dev/null 2>&1; then
    TSAN_RUN=(setarch "$(uname -m)" -R)
    echo "ThreadSanitizer: running with address-space randomization off (setarch -R)"
  fi
  # Any report fails the run (exit code 66), libLLVM, oneDNN and libgomp included
  # (uninstrumented, but their locks are intercepted), except the one tests/cpp/tsan.supp names
  # and explains: a lazily made lock inside libLLVM, published by an atomic TSan cannot see.
  TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1 suppressions=$PWD/tests/cpp/tsan.supp" \
    "${TSAN_RUN[@]}" "$TSAN_BIN"
fi
stage ""
echo "== every stage passed in $((SECONDS - RUN_START)) s =="
