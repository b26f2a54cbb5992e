#!/usr/bin/env bash
# Makes sure PyTorch/XLA (bench/requirements-torch-xla.txt: torch 2.9.0 + torch-xla 2.9.0, the
# exact pair torch-xla is built for) is installed, once per machine, in a virtual environment
# outside the checkout, and prints that environment's python. Used by bench/torch_bench.py
# --xla; not part of CI or scripts/setup.sh (torch-xla pins an older torch than the project's).
#   ~/.cache/lazuli/torch-xla-venv-<hash of the pins>   (or $LAZULI_TORCH_VENV_ROOT/...)
# A changed pin file gives a new folder; an existing, complete one is reused without touching the
# network. Status lines go to stderr; stdout is only the interpreter's path.
set -euo pipefail
cd "$(dirname "$0")"
PINS=requirements-torch-xla.txt

# The pins alone (comments stripped) name the folder, so editing a comment installs nothing.
HASH=$(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$PINS" | sha256sum | cut -c1-16)
ROOT=${LAZULI_TORCH_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/lazuli}
VENV=$ROOT/torch-xla-venv-$HASH
mkdir -p "$ROOT"
# One install at a time per machine; the stamp is written last, so a folder without it is an
# interrupted install and is made again.
exec 9>"$ROOT/torch-xla-venv.lock"
flock 9
if [ ! -f "$VENV/.lazuli-complete" ]; then
  echo "setup_torch_xla: installing $PINS into $VENV (once per machine; a few GB)" >&2
  start=$(date +%s)
  rm -rf "$VENV"
  # No --system-site-packages: torch 2.9 and torch-xla bring their own numpy; Debian's would mix.
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --no-input -r "$PINS" >&2
  touch "$VENV/.lazuli-complete"
  echo "setup_torch_xla: installed in $(( $(date +%s) - start )) s" >&2
fi
echo "$VENV/bin/python"
