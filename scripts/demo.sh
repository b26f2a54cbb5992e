#!/usr/bin/env bash
# Sets up everything (system packages, build) and runs the main demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
./build/examples/demo
