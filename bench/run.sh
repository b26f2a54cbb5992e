#!/usr/bin/env bash
# Builds the benchmarks (Release, build-bench/) and runs each with 5 repetitions, printing the
# aggregates (mean, median, stddev, cv). RESULTS.md quotes the medians.
# Extra arguments go to every benchmark binary (e.g. --benchmark_filter=Record).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAZULI_BUILD_TESTS=OFF >/dev/null
ninja -C build-bench -j1 record_bench graph_bench
echo "machine: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), revision $(git rev-parse --short=12 HEAD)"
for b in record_bench graph_bench; do
  echo "== $b"
  "./build-bench/bench/$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true "$@"
done
