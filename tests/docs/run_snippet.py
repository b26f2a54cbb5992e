"""Runs one documentation snippet: it must exit with 0 and print the output its doc shows.

The expected file holds the doc's ```text block: runs of lines, separated by lines `...` (lines
the doc leaves out). Each run must appear, in order, as consecutive lines of the output (compared
without surrounding spaces); anything may come before, between and after the runs.

Usage: run_snippet.py PROGRAM EXPECTED_FILE
"""
import os
import subprocess
import sys
import tempfile


def runs(expected):
    groups, cur = [], []
    for line in expected:
        if line.strip() == "...":
            groups, cur = groups + [cur] if cur else groups, []
        elif line.strip():
            cur.append(line.strip())
    return groups + [cur] if cur else groups


def main(program, expected_file):
    with open(expected_file) as f:
        groups = runs(f.read().splitlines())
    with tempfile.TemporaryDirectory() as cache:
        # A fresh kernel cache: the snippet compiles its kernels and never writes to ~/.cache.
        env = dict(os.environ, LAZULI_CACHE_DIR=cache)
        run = subprocess.run([program], capture_output=True, text=True, env=env, timeout=120)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        sys.exit(f"{program} exited with {run.returncode}")
    out = [l.strip() for l in run.stdout.splitlines()]
    pos = 0
    for group in groups:
        while pos + len(group) <= len(out) and out[pos:pos + len(group)] != group:
            pos += 1
        if pos + len(group) > len(out):
            sys.exit(f"{program}: its doc shows these lines, not printed (in the doc's order):\n"
                     + "\n".join(group))
        pos += len(group)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
