#!/usr/bin/env python3
"""Checks the two things that keep the repository's shape: file lengths, and clang-format on the
C++ lines changed since a base commit. .ci/run runs it before the build, so a failure shows in
seconds. It needs git and clang-format (Debian's clang-format package, which brings
git-clang-format; scripts/setup.sh installs it), nothing built.

1. File lengths. Every source file git tracks or would add (*.cpp, *.h, *.py, *.sh, *.cmake,
   CMakeLists.txt) gets a warning past WARN_LINES lines and fails the check past FAIL_LINES: a file
   that long holds more than one concept, so split it.

2. clang-format (the repository's .clang-format: Google base, 100 columns) on changed C++ lines.
   Only the lines of *.cpp and *.h files changed since the commit in .ci/format-base (the working
   tree against it: commits, staged and unstaged changes) are judged, so old code is never
   reformatted wholesale; a file git does not track yet is new, so all of it is judged. A
   failure lists the files, prints the diff clang-format would apply, and the command that
   applies it, from the repository root:

       git clang-format -f BASE -- '*.cpp' '*.h'

   (-f: it also edits files with unstaged changes; the formatting is computed from the working
   tree, so nothing is lost. The paths keep it off the other languages git clang-format knows,
   JSON among them.) Where the base is not in the clone's history because the clone is shallow,
   this part is skipped with a warning (`git fetch --unshallow` brings it); a full clone without
   it fails.

   Moving the base forward: once everything changed since it is formatted (this check passes),
   a newer base loses nothing and keeps the diff short:

       git rev-parse HEAD > .ci/format-base     (then commit it)

Exit status: 0 when both pass (warnings allowed), 1 when either fails.
"""
import argparse
import difflib
import fnmatch
import pathlib
import re
import shutil
import subprocess
import sys

WARN_LINES = 600  # a warning per file past this many lines
FAIL_LINES = 1000  # the check fails on a file past this many lines
# git pathspecs: a "*" also matches "/", so "*.py" is every .py file at any depth.
LENGTH_PATTERNS = ("*.cpp", "*.h", "*.py", "*.sh", "*.cmake", "CMakeLists.txt", "*/CMakeLists.txt")
# Third-party or generated sources exempt from the length budget (fnmatch patterns on the path
# from the repository root). None today.
LENGTH_EXEMPT = ()
CPP_PATHSPECS = ("*.cpp", "*.h")
BASE_FILE = ".ci/format-base"
DIFF_LINES = 200  # at most this many lines of the formatting diff are printed

ROOT = pathlib.Path(__file__).resolve().parent.parent


def say(msg):
    print(f"check_style: {msg}", flush=True)


def git(*args, check=True):
    return subprocess.run(["git", "-c", "color.ui=never", *args], cwd=ROOT, capture_output=True,
                          text=True, check=check)


def repo_files(pathspecs, untracked_only=False):
    """The paths (from the root) git tracks, and those it would add (untracked, not ignored), that
    match `pathspecs`; with `untracked_only`, only the latter. Paths deleted from the tree and
    symbolic links are left out."""
    which = ["--others", "--exclude-standard"] if untracked_only else \
        ["--cached", "--others", "--exclude-standard"]
    out = git("ls-files", "-z", *which, "--", *pathspecs).stdout
    paths = sorted({p for p in out.split("\0") if p})
    return [p for p in paths if (ROOT / p).is_file() and not (ROOT / p).is_symlink()]


def line_count(path):
    data = (ROOT / path).read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def check_lengths():
    """Returns whether no file is past FAIL_LINES; prints a line per file past WARN_LINES."""
    over_warn, over_fail = [], []
    for path in repo_files(LENGTH_PATTERNS):
        if any(fnmatch.fnmatch(path, pat) for pat in LENGTH_EXEMPT):
            continue
        n = line_count(path)
        if n > FAIL_LINES:
            over_fail.append((path, n))
        elif n > WARN_LINES:
            over_warn.append((path, n))
    for path, n in sorted(over_warn, key=lambda x: -x[1]):
        say(f"warning: {path}: {n} lines (past {WARN_LINES}; the check fails past {FAIL_LINES})")
    if over_fail:
        say(f"FAILED: file length: {len(over_fail)} file(s) past {FAIL_LINES} lines; split each "
            "(one concept per file, docs/architecture.md, \"Style checks\"):")
        for path, n in sorted(over_fail, key=lambda x: -x[1]):
            say(f"    {path}: {n} lines")
        return False
    say(f"file lengths: none past {FAIL_LINES} lines, {len(over_warn)} past {WARN_LINES} "
        "(warnings above)" if over_warn else f"file lengths: none past {WARN_LINES} lines")
    return True


def read_base():
    """The base commit from BASE_FILE, or None after printing why it cannot be read."""
    try:
        base = (ROOT / BASE_FILE).read_text().strip()
    except FileNotFoundError:
        say(f"FAILED: clang-format: {BASE_FILE} is missing; it holds the commit whose later C++ "
            f"changes are judged: git rev-parse HEAD > {BASE_FILE}")
        return None
    if not re.fullmatch(r"[0-9a-f]{40}", base):
        say(f"FAILED: clang-format: {BASE_FILE} must hold one 40-hex commit id, not {base[:80]!r}")
        return None
    return base


def untracked_diffs():
    """[(path, unified diff lines)] for each C++ file git does not track yet whose whole text
    clang-format would change (git clang-format judges only tracked files)."""
    result = []
    for path in repo_files(CPP_PATHSPECS, untracked_only=True):
        text = (ROOT / path).read_text(errors="replace")
        formatted = subprocess.run(["clang-format", "--style=file", path], cwd=ROOT,
                                   capture_output=True, text=True, check=True).stdout
        if formatted != text:
            result.append((path, list(difflib.unified_diff(
                text.splitlines(), formatted.splitlines(), f"a/{path}", f"b/{path}",
                lineterm=""))))
    return result


def check_format():
    """Returns whether the C++ lines changed since the base are formatted (True when skipped)."""
    base = read_base()
    if base is None:
        return False
    missing = [t for t in ("clang-format", "git-clang-format") if shutil.which(t) is None]
    if missing:
        say(f"FAILED: clang-format: {' and '.join(missing)} not found; install Debian's "
            "clang-format package (apt-get install clang-format; scripts/setup.sh does)")
        return False
    if git("cat-file", "-e", f"{base}^{{commit}}", check=False).returncode != 0:
        if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
            say(f"warning: clang-format: skipped: the base {base[:12]} ({BASE_FILE}) is not in "
                "this shallow clone's history (git fetch --unshallow brings it)")
            return True
        say(f"FAILED: clang-format: the base {base[:12]} ({BASE_FILE}) is not in this "
            "repository's history (and it is not a shallow clone): was it rewritten? Name a "
            f"commit that is: git rev-parse HEAD > {BASE_FILE}, once the changes are formatted")
        return False
    cmd = ["clang-format", "--diff", base, "--", *CPP_PATHSPECS]
    run = git(*cmd, check=False)
    if run.returncode != 0:
        say(f"FAILED: clang-format: `git {' '.join(cmd)}` exited with {run.returncode}:\n"
            f"{run.stdout}{run.stderr}")
        return False
    # git-clang-format 14 exits with 0 whether or not it prints a diff; a diff is what says.
    out = run.stdout.splitlines()
    tracked_diff = out[next((i for i, s in enumerate(out) if s.startswith("diff --git ")),
                            len(out)):]
    tracked = [m.group(1) for m in map(re.compile(r"^diff --git a/(.*) b/").match, tracked_diff)
               if m]
    untracked = untracked_diffs()
    if not tracked and not untracked:
        say(f"clang-format: the C++ lines changed since {base[:12]} ({BASE_FILE}) are formatted")
        return True
    say(f"FAILED: clang-format: C++ lines changed since {base[:12]} ({BASE_FILE}) are not "
        "formatted as .clang-format asks, in:")
    for path in tracked + [p for p, _ in untracked]:
        say(f"    {path}")
    diff = tracked_diff + [line for _, d in untracked for line in d]
    say(f"the changes clang-format would make (first {DIFF_LINES} lines of {len(diff)}):"
        if len(diff) > DIFF_LINES else "the changes clang-format would make:")
    print("\n".join(diff[:DIFF_LINES]), flush=True)
    quoted = " ".join(f"'{p}'" for p in CPP_PATHSPECS)
    if len(diff) > DIFF_LINES:
        say(f"... {len(diff) - DIFF_LINES} more lines: git clang-format --diff {base[:12]} -- "
            f"{quoted} prints them all")
    if tracked:
        say(f"to fix, from the repository root: git clang-format -f {base} -- {quoted}")
    if untracked:
        say("to fix the files git does not track yet: clang-format -i "
            + " ".join(p for p, _ in untracked))
    return False


def main():
    argparse.ArgumentParser(description=__doc__,
                            epilog=f"WARN_LINES = {WARN_LINES}, FAIL_LINES = {FAIL_LINES}, base: "
                            f"{BASE_FILE}",
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    ok = check_lengths()
    ok = check_format() and ok
    say("passed" if ok else "FAILED (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
