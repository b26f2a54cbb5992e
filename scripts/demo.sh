#!/usr/bin/env bash
# Sets up everything (system packages, build) and runs the demos: the main one first (training an
# MLP on the handwritten digits, examples/train_digits.py), then the C++ and Python runtime demos,
# and last a PyTorch model (torchvision's resnet18) trained on the lazy Lazuli device.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
echo "== examples/train_digits.py (MLP on sklearn's handwritten digits) =="
PYTHONPATH=python /usr/bin/python3 examples/train_digits.py
echo "== examples/train_mlp.cpp (the same model through the C++ API) =="
./build/examples/train_mlp
echo "== examples/demo.cpp =="
./build/examples/demo
echo "== examples/demo.py =="
PYTHONPATH=python /usr/bin/python3 examples/demo.py
if [ "${LAZULI_SKIP_TORCH:-0}" != "1" ]; then
  TORCH_SITE=$(bash scripts/torch-venv.sh)
  TORCH_PY=$(cd "$TORCH_SITE/../../.." && pwd)/bin/python
  echo "== examples/torch_device_train.py (torchvision's resnet18 on the lazy Lazuli device) =="
  PYTHONPATH=python "$TORCH_PY" examples/torch_device_train.py
fi
