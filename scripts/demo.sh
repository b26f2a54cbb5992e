#!/usr/bin/env bash
# Sets up everything (system packages, build) and runs the demos: C++ and Python.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
echo "== examples/demo.cpp =="
./build/examples/demo
echo "== examples/demo.py =="
PYTHONPATH=python /usr/bin/python3 examples/demo.py
