#!/usr/bin/env bash
# Sets up everything (system packages, build) and runs the demos: the main one first (training an
# MLP on the handwritten digits, examples/train_digits.py), then the C++ and Python runtime demos,
# and last a PyTorch model (torchvision's resnet18) trained on the lazy Lazuli device.
# Package installation and the build write to log files (scripts/setup.sh prints their paths);
# every stage ends with one line giving its time.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/stage.sh

stage "setup (Debian packages, PyTorch environment, build)"
bash scripts/setup.sh build
stage "examples/train_digits.py (MLP on sklearn's handwritten digits)"
PYTHONPATH=python /usr/bin/python3 examples/train_digits.py
stage "examples/train_mlp.cpp (the same model through the C++ API)"
./build/examples/train_mlp
stage "examples/demo.cpp"
./build/examples/demo
stage "examples/demo.py"
PYTHONPATH=python /usr/bin/python3 examples/demo.py
if [ "${LAZULI_SKIP_TORCH:-0}" != "1" ]; then
  TORCH_SITE=$(bash scripts/torch-venv.sh)
  TORCH_PY=$(cd "$TORCH_SITE/../../.." && pwd)/bin/python
  stage "examples/torch_device_train.py (torchvision's resnet18 on the lazy Lazuli device)"
  PYTHONPATH=python "$TORCH_PY" examples/torch_device_train.py
fi
stage ""
