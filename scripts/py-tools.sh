#!/usr/bin/env bash
# Makes sure the PyPI packages of requirements-build.txt are on this machine, once, outside the
# checkout, and prints the folder that holds them:
#   ~/.cache/lazuli/py-tools-<hash of the pins>/wheels   the wheels (pip install . --find-links)
#   ~/.cache/lazuli/py-tools-<hash of the pins>/venv     a venv with them alone (no Debian package:
#                                                        the numpy 2 test environment)
# An existing, complete folder is reused without touching the network. Status lines go to stderr;
# stdout is only the folder.
set -euo pipefail
cd "$(dirname "$0")/.."
PINS=requirements-build.txt
HASH=$(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$PINS" | sha256sum | cut -c1-16)
ROOT=${LAZULI_TORCH_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/lazuli}
DIR=$ROOT/py-tools-$HASH
mkdir -p "$ROOT"
exec 9>"$ROOT/py-tools.lock"
flock 9
if [ ! -f "$DIR/.lazuli-complete" ]; then
  echo "py-tools: downloading $PINS into $DIR (once per machine)" >&2
  rm -rf "$DIR"
  /usr/bin/python3 -m pip download --quiet --no-input --only-binary=:all: -d "$DIR/wheels" -r "$PINS" >&2
  /usr/bin/python3 -m venv "$DIR/venv"
  "$DIR/venv/bin/pip" install --quiet --no-input --no-index --find-links "$DIR/wheels" -r "$PINS" >&2
  touch "$DIR/.lazuli-complete"
fi
echo "$DIR"
