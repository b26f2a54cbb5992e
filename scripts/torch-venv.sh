#!/usr/bin/env bash
# Makes sure the pinned PyTorch (requirements-torch.txt) is installed, once per machine, in a
# virtual environment outside the checkout, and prints that environment's site-packages folder.
#   ~/.cache/lazuli/torch-venv-<hash of requirements-torch.txt>   (or $LAZULI_TORCH_VENV_ROOT/...)
# A changed pin file gives a new folder; an existing, complete one is reused without touching the
# network. $LAZULI_TORCH_VENV names an existing environment to use as it is (nothing installed).
# Status lines go to stderr; stdout is only the path, for scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PINS=requirements-torch.txt

if [ -n "${LAZULI_TORCH_VENV:-}" ]; then
  VENV=$LAZULI_TORCH_VENV
else
  # The pins alone (comments stripped) name the folder, so editing a comment installs nothing.
  HASH=$(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$PINS" | sha256sum | cut -c1-16)
  ROOT=${LAZULI_TORCH_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/lazuli}
  VENV=$ROOT/torch-venv-$HASH
  mkdir -p "$ROOT"
  # One install at a time per machine (two scripts starting at once wait for each other); the
  # stamp is written last: a venv without it is an interrupted install, made again.
  exec 9>"$ROOT/torch-venv.lock"
  flock 9
  if [ ! -f "$VENV/.lazuli-complete" ]; then
    echo "torch-venv: installing $PINS into $VENV (once per machine; a few GB)" >&2
    start=$(date +%s)
    rm -rf "$VENV"
    # --system-site-packages: numpy, pytest and the rest come from Debian (scripts/setup.sh).
    /usr/bin/python3 -m venv --system-site-packages "$VENV"
    "$VENV/bin/pip" install --quiet --no-input -r "$PINS" >&2
    touch "$VENV/.lazuli-complete"
    echo "torch-venv: installed in $(( $(date +%s) - start )) s" >&2
  fi
fi
"$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
