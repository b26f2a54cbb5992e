#!/usr/bin/env bash
# Installs the built tree into a temporary prefix (`cmake --install`, no rebuild), then builds the
# consumer in consumer/ outside the source tree twice, with find_package(lazuli) and with
# pkg-config, and runs both: each must compile a kernel with the installed liblazuli_jit.so.
# Also checks that no private dependency (oneDNN, xxhash, OpenMP, LLVM) or build-tree path
# reaches a consumer. Run by ctest (label `install`).
# Usage: install_test.sh CMAKE BUILD_DIR GENERATOR CXX PKG_CONFIG
set -euo pipefail
CMAKE=$1 BUILD=$2 GENERATOR=$3 CXX=$4 PKG_CONFIG=$5
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PREFIX=$TMP/prefix
fail() { echo "install_test: $*" >&2; exit 1; }

"$CMAKE" --install "$BUILD" --prefix "$PREFIX" >/dev/null
for f in include/lazuli/lazuli.h lib/liblazuli.so lib/liblazuli_jit.so lib/pkgconfig/lazuli.pc \
         lib/cmake/lazuli/lazuliConfig.cmake lib/cmake/lazuli/lazuliConfigVersion.cmake \
         lib/cmake/lazuli/lazuliTargets.cmake; do
  [ -e "$PREFIX/$f" ] || fail "cmake --install did not install $f"
done
# The library is versioned: liblazuli.so -> liblazuli.so.MAJOR.MINOR (its SONAME) -> the file.
soname=$(readelf -d "$PREFIX/lib/liblazuli.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[[ "$soname" =~ ^liblazuli\.so\.[0-9]+\.[0-9]+$ ]] || fail "liblazuli.so's SONAME is '$soname'"
[ -e "$PREFIX/lib/$soname" ] || fail "the SONAME's link $soname is not installed"
# The installed libraries must not look into the build tree for anything.
for lib in "$PREFIX"/lib/liblazuli*.so; do
  if readelf -d "$lib" | grep -E 'R(UN)?PATH' | grep -qF "$BUILD"; then
    fail "$lib keeps a run path into the build tree: $(readelf -d "$lib" | grep -E 'R(UN)?PATH')"
  fi
done
PRIVATE_DEPS='dnnl|xxhash|openmp|gomp|llvm'
grep -qiE "$PRIVATE_DEPS" "$PREFIX/lib/cmake/lazuli/lazuliTargets.cmake" &&
  fail "lazuli::lazuli exports a private dependency: $(grep -iE "$PRIVATE_DEPS" "$PREFIX/lib/cmake/lazuli/lazuliTargets.cmake")"

# Runs a consumer with a fresh kernel cache (so its kernel compiles) and checks it used the
# installed libraries.
run_consumer() {
  local out
  out=$(LAZULI_CACHE_DIR="$TMP/cache-$2" "$1") || fail "$1 failed: $out"
  echo "$out"
  grep -qF "liblazuli.so: $PREFIX/lib/liblazuli.so" <<<"$out" || fail "$1 did not load the installed liblazuli.so"
  grep -qF "liblazuli_jit.so: $PREFIX/lib/liblazuli_jit.so" <<<"$out" ||
    fail "$1 did not load the installed liblazuli_jit.so"
}

echo "== find_package(lazuli) =="
"$CMAKE" -S "$HERE/consumer" -B "$TMP/pkg" -G "$GENERATOR" -DCMAKE_CXX_COMPILER="$CXX" \
         -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DLAZULI_ROUTE=package >/dev/null
"$CMAKE" --build "$TMP/pkg" >/dev/null
grep -qiE "$PRIVATE_DEPS|$BUILD" "$TMP/pkg/compile_commands.json" &&
  fail "a private dependency or the build tree is on the consumer's compile line: $(cat "$TMP/pkg/compile_commands.json")"
run_consumer "$TMP/pkg/consumer" pkg

echo "== pkg-config lazuli =="
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
"$PKG_CONFIG" --exists lazuli || fail "pkg-config --exists lazuli failed"
FLAGS=$("$PKG_CONFIG" --cflags --libs lazuli)
grep -qiE "$PRIVATE_DEPS" <<<"$FLAGS" && fail "pkg-config lists a private dependency: $FLAGS"
LIBDIR=$("$PKG_CONFIG" --variable=libdir lazuli)
# shellcheck disable=SC2086  # FLAGS is a list of flags
"$CXX" -std=c++20 "$HERE/consumer/main.cpp" -o "$TMP/pc_consumer" $FLAGS -Wl,-rpath,"$LIBDIR"
run_consumer "$TMP/pc_consumer" pc
