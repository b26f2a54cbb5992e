#!/usr/bin/env bash
# Uses the checkout as a subproject of the consumer in consumer/: configures it through
# FetchContent, then builds it through add_subdirectory (the library is compiled again, without
# optimization, into a temporary directory) and runs the consumer, whose kernel compile must find
# the code generator built beside liblazuli.so. Run by ctest (label `install`).
# Usage: subproject_test.sh CMAKE SOURCE_DIR GENERATOR CXX
set -euo pipefail
CMAKE=$1 SOURCE=$2 GENERATOR=$3 CXX=$4
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "subproject_test: $*" >&2; exit 1; }

same_dirs() {  # library_dirs.txt: liblazuli.so's directory, then liblazuli_jit.so's
  [ "$(sed -n 1p "$1")" = "$(sed -n 2p "$1")" ] ||
    fail "liblazuli.so and liblazuli_jit.so are built into different directories: $(cat "$1")"
}

for route in fetchcontent subdirectory; do
  echo "== $route =="
  "$CMAKE" -S "$HERE/consumer" -B "$TMP/$route" -G "$GENERATOR" -DCMAKE_CXX_COMPILER="$CXX" \
           -DLAZULI_ROUTE=$route -DLAZULI_SOURCE_DIR="$SOURCE" >"$TMP/$route.log" 2>&1 ||
    fail "configuring with $route failed: $(cat "$TMP/$route.log")"
  same_dirs "$TMP/$route/library_dirs.txt"
done
# Only the library and the consumer: the subproject builds no tests, examples or benchmarks.
"$CMAKE" --build "$TMP/subdirectory" --target consumer >"$TMP/build.log" 2>&1 ||
  fail "building with add_subdirectory failed: $(tail -50 "$TMP/build.log")"
out=$(LAZULI_CACHE_DIR="$TMP/cache" "$TMP/subdirectory/consumer") || fail "the consumer failed: $out"
echo "$out"
grep -qF "liblazuli_jit.so: $TMP/subdirectory/lazuli/liblazuli_jit.so" <<<"$out" ||
  fail "the consumer did not load the jit built beside liblazuli.so"
