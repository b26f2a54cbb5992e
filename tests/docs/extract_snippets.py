"""Writes every ```cpp block of the given Markdown files as a program to compile and run.

Each block becomes <out>/<file stem>_<n>.cpp (n counts the file's cpp blocks from 1), starting
with a #line directive so compiler errors point at the Markdown line. A ```text block that is the
next block after a cpp block, in the same section (prose between is allowed, a heading is not), is
the output it prints: it becomes <name>.expected, checked by run_snippet.py. <out>/snippets.txt lists the names, one a line. Files are rewritten only
when their content changes, so reconfiguring rebuilds nothing that did not change.

Usage: extract_snippets.py OUT_DIR FILE.md...
"""
import pathlib
import re
import sys


def blocks(lines):
    """Yields (language, first line number of the code, code lines) for each fenced block."""
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start = i + 1
        j = start
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        yield m.group(1), start + 1, lines[start:j], j
        i = j + 1


def write_if_changed(path, text):
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def main(out_dir, files):
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for md in map(pathlib.Path, files):
        lines = md.read_text().splitlines()
        found = list(blocks(lines))
        n = 0
        for k, (lang, first, code, end) in enumerate(found):
            if lang not in ("cpp", "c++"):
                continue
            n += 1
            name = re.sub(r"[^A-Za-z0-9_]", "_", f"{md.stem}_{n}")
            body = "\n".join(code) + "\n"
            if not re.search(r"\bint\s+main\s*\(", body):
                # Fails the build at the block, instead of a link error about main.
                body = f'#error "a ```cpp block in the docs must be a complete program (int main)"\n'
            write_if_changed(out / f"{name}.cpp", f'#line {first} "{md.resolve()}"\n{body}')
            expected = ""
            nxt = found[k + 1] if k + 1 < len(found) else None
            if nxt and nxt[0] == "text" and not any(l.startswith("#") for l in lines[end + 1:nxt[1] - 2]):
                expected = "\n".join(nxt[2]) + "\n"
            write_if_changed(out / f"{name}.expected", expected)
            names.append(name)
    write_if_changed(out / "snippets.txt", "".join(f"{n}\n" for n in names))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
