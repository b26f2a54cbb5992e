#!/usr/bin/env bash
# The build revision names Lazuli's own source (cmake/write_build_revision.cmake), never the
# commit of a repository that vendors it: run on the checkout, on a copy of it committed inside
# another project's git repository, on two copies with different sources, and on a copy carrying a
# REVISION file. Run by ctest (label `install`).
# Usage: revision_test.sh CMAKE SOURCE_DIR
set -euo pipefail
CMAKE=$1 SOURCE=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "revision_test: $*" >&2; exit 1; }
revision() {  # revision DIR: the revision the script writes for the tree at DIR
  "$CMAKE" -DSOURCE_DIR="$1" -DOUTPUT="$TMP/out.h" -P "$SOURCE/cmake/write_build_revision.cmake"
  sed -n 's/^#define LAZULI_BUILD_REVISION "\(.*\)"$/\1/p' "$TMP/out.h"
  rm -f "$TMP/out.h"
}
copy() {  # copy DEST: Lazuli's sources at DEST (git's tracked files, or the tree's in an sdist)
  mkdir -p "$1"
  if git -C "$SOURCE" ls-files --error-unmatch CMakeLists.txt >/dev/null 2>&1; then
    (cd "$SOURCE" && git ls-files -z src include CMakeLists.txt cmake | xargs -0 cp --parents -t "$1")
  else
    cp -r "$SOURCE/src" "$SOURCE/include" "$SOURCE/cmake" "$SOURCE/CMakeLists.txt" "$1"
  fi
}

if git -C "$SOURCE" rev-parse --show-toplevel >/dev/null 2>&1 &&
   [ "$(cd "$SOURCE" && realpath "$(git rev-parse --show-toplevel)")" = "$(realpath "$SOURCE")" ]; then
  own=$(revision "$SOURCE")
  [ "$own" = "g$(git -C "$SOURCE" rev-parse --short=12 HEAD)" ] || fail "the checkout's revision is $own"
fi

# Vendored inside another project's repository: its commit must not be taken.
mkdir -p "$TMP/app"
git -C "$TMP/app" init -q
copy "$TMP/app/third_party/lazuli"
git -C "$TMP/app" add -A
git -C "$TMP/app" -c user.name=t -c user.email=t@t commit -q -m vendored
app_commit=$(git -C "$TMP/app" rev-parse --short=12 HEAD)
vendored=$(revision "$TMP/app/third_party/lazuli")
[[ "$vendored" == src-* ]] || fail "a vendored copy's revision is '$vendored', not a hash of its sources"
[[ "$vendored" != *"$app_commit"* ]] || fail "a vendored copy took the consumer's commit $app_commit"

# Two copies that differ in one source file differ in revision; the same sources agree.
copy "$TMP/a"
copy "$TMP/b"
[ "$(revision "$TMP/a")" = "$vendored" ] || fail "the same sources gave two revisions"
echo "// changed" >>"$TMP/b/src/backend/backend.cpp"
[ "$(revision "$TMP/b")" != "$vendored" ] || fail "changed sources kept the revision $vendored"

# An exported archive's REVISION file wins.
echo "g0123456789ab" >"$TMP/a/REVISION"
[ "$(revision "$TMP/a")" = "g0123456789ab" ] || fail "the REVISION file was not read"
echo "revision_test: ok (checkout ${own:-not a git checkout}, vendored $vendored)"
