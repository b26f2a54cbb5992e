#!/usr/bin/env bash
# Installs every system package Lazuli needs (Debian 12), then configures and builds.
# Usage: scripts/setup.sh [build-dir]   (default: build)
#        scripts/setup.sh --packages-only   (the Debian packages only: .ci/run runs it first)
# Why each package is here: see docs/dependencies.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES_ONLY=0
if [ "${1:-}" = "--packages-only" ]; then
  PACKAGES_ONLY=1
  shift
fi
BUILD_DIR=${1:-build}
# What apt-get and the build print goes to log files (their paths printed; a failing step shows
# its log in full); each step prints one line with its time.
LOG_DIR=${LAZULI_LOG_DIR:-$BUILD_DIR/logs}
mkdir -p "$LOG_DIR"
LOG_DIR=$(cd "$LOG_DIR" && pwd)
logged() {  # logged LOG COMMAND...: runs COMMAND, appending to LOG; on failure prints LOG and fails
  if ! "${@:2}" >>"$1" 2>&1; then
    echo "setup: failed: ${*:2}; its log ($1):" >&2
    cat "$1" >&2
    return 1
  fi
}

PACKAGES=(
  build-essential cmake ninja-build pkg-config   # toolchain: C++20 compiler, CMake + Ninja
  ccache                                           # rebuilds of unchanged sources (the sdist's wheel in CI)
  clang-format                                     # tools/check_style.py: clang-format on changed C++ lines
  libgtest-dev libgmock-dev                        # C++ tests (GoogleTest under ctest)
  libbenchmark-dev                                 # bench/ (Google Benchmark)
  libxxhash-dev                                    # 128-bit XXH3 hashes of IR nodes and graphs
  nlohmann-json3-dev                               # JSON headers of safetensors files (lz::save / lz::load)
  libdnnl-dev                                      # oneDNN sgemm: the cpu backend's matrix products
  libssl-dev                                       # HMAC-SHA256 of the persistent kernel cache's entries
  llvm-14-dev                                      # the cpu backend's code generator (IRBuilder + ORC LLJIT)
  libopenmpi-dev openmpi-bin                       # collectives across processes (lazuli.distributed, mpirun)
  python3-dev                                      # the Python extension lazuli._C (pybind11: py-tools.sh)
  python3-numpy python3-pytest python3-venv python3-pip  # numpy interop; Python tests; pip install .
  python3-pytest-xdist                             # the PyTorch front end's tests, a process per core
  python3-sklearn python3-tqdm                     # examples/train_digits.py: digits data set, progress bar
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  start=$SECONDS
  echo "setup: installing ${#missing[@]} Debian package(s) with apt-get: ${missing[*]} (log: $LOG_DIR/apt.log)"
  : >"$LOG_DIR/apt.log"
  logged "$LOG_DIR/apt.log" $SUDO apt-get update -q
  logged "$LOG_DIR/apt.log" $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "${missing[@]}"
  echo "setup: Debian packages installed in $((SECONDS - start)) s"
fi
if [ "$PACKAGES_ONLY" = 1 ]; then
  exit 0
fi

# PyTorch for the torch.compile bridge, the lazy PyTorch device and their tests
# (requirements-torch.txt), installed once per machine outside the checkout and reused
# (scripts/torch-venv.sh); the device (python/device/) is built against it. LAZULI_SKIP_TORCH=1
# skips both.
TORCH_SITE=""
if [ "${LAZULI_SKIP_TORCH:-0}" != "1" ]; then
  TORCH_SITE=$(bash scripts/torch-venv.sh)
fi

# pybind11 from PyPI (Debian's 2.10 predates numpy 2) and the numpy 2 test environment:
# requirements-build.txt, fetched once per machine by scripts/py-tools.sh.
PY_TOOLS=$(bash scripts/py-tools.sh)
PYBIND11_DIR=$("$PY_TOOLS/venv/bin/python" -c 'import pybind11; print(pybind11.get_cmake_dir())')

BUILD_TYPE=${LAZULI_BUILD_TYPE:-Release}
start=$SECONDS
echo "setup: building ($BUILD_TYPE) into $BUILD_DIR/ (log: $LOG_DIR/build.log)"
: >"$LOG_DIR/build.log"
logged "$LOG_DIR/build.log" cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
  -DLAZULI_BUILD_PYTHON=ON -DLAZULI_TORCH_SITE="$TORCH_SITE" -Dpybind11_DIR="$PYBIND11_DIR"
logged "$LOG_DIR/build.log" cmake --build "$BUILD_DIR"
echo "setup: built in $((SECONDS - start)) s"
