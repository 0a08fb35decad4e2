"""docs/operations.md's configuration table against the code, so that the
two cannot drift: a setting the code reads without a row, or a row nothing
reads any more, fails here, naming it. No stack is started.

What counts as a setting, the rule this test applies:
  - an AIRLOCK_* name the programs read: in their C sources (every .c
    and .h of the checkout outside tests/ and bench/), a string literal
    that is exactly the name, outside comments. That is how the code
    reads one: getenv("AIRLOCK_X"), core/base/config.c's lookup tables, a
    #define handed to getenv, a FastCGI parameter name. A name inside a
    longer string (an error message) is not a read;
  - an AIRLOCK_* name the operator's scripts read: in scripts/*.sh, an
    expansion ($AIRLOCK_X, ${AIRLOCK_X...}) outside comment lines.
    Assigning one (export AIRLOCK_DB=...) is not a read.
Not settings:
  - AIRLOCK_TEST_*: hooks of the test suites, named in tests/;
  - what tests/ and bench/ read: tools, not the product;
  - names the code writes for others: AIRLOCK_CRED_<NAME> in a sandbox's
    environment (its literal is the prefix "AIRLOCK_CRED_", no name).

The table is the first one under "## Configuration" in docs/operations.md:
one row per variable, its first cell the name in backquotes, then a
default, who reads it and a meaning, none empty."""
import os
import re
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DOC = os.path.join(REPO, "docs", "operations.md")
HEADING = "## Configuration"
NAME = r"AIRLOCK_[A-Z0-9_]*[A-Z0-9]"
TEST_HOOK = "AIRLOCK_TEST_"
NOT_PRODUCT = ("tests/", "bench/")


def checkout_files():
    """Tracked files and new ones not ignored (build output is); without
    git, a walk that skips what .gitignore names."""
    try:
        out = subprocess.run(
            ["git", "-C", REPO, "ls-files", "-co", "--exclude-standard"],
            check=True, capture_output=True, text=True).stdout
        return [f for f in out.splitlines()
                if os.path.isfile(os.path.join(REPO, f))]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for root, dirs, files in os.walk(REPO):
            rel = os.path.relpath(root, REPO)
            if rel == ".":
                dirs[:] = [d for d in dirs if not d.startswith(
                    (".", "build", "var", "node_modules"))]
            found += [os.path.normpath(os.path.join(rel, f))
                      for f in files]
        return found


def without_c_comments(src):
    """src with /* */ and // comments blanked; string and character
    literals are kept whole (a "//" inside one starts no comment)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * src.count("\n", i, j))
            i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def read_settings():
    """{name: [where it is read, "file:line", ...]} by the rule above."""
    reads = {}

    def add(name, path, text, pos):
        if name.startswith(TEST_HOOK):
            return
        line = text.count("\n", 0, pos) + 1
        reads.setdefault(name, []).append(f"{path}:{line}")

    for path in checkout_files():
        if path.startswith(NOT_PRODUCT):
            continue
        full = os.path.join(REPO, path)
        if path.endswith((".c", ".h")):
            with open(full, encoding="utf-8", errors="replace") as f:
                text = without_c_comments(f.read())
            for m in re.finditer('"(' + NAME + ')"', text):
                add(m.group(1), path, text, m.start())
        elif path.startswith("scripts/") and path.endswith(".sh"):
            with open(full, encoding="utf-8", errors="replace") as f:
                text = "".join(
                    "\n" if line.lstrip().startswith("#") else line
                    for line in f)
            for m in re.finditer(r"\$\{?(" + NAME + r")\b", text):
                add(m.group(1), path, text, m.start())
    return reads


def table_rows():
    """[(line number, cells)] of the configuration table."""
    with open(DOC, encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert HEADING in lines, f"{DOC} has no '{HEADING}' section"
    i = lines.index(HEADING) + 1
    while i < len(lines) and not lines[i].startswith("|"):
        assert not lines[i].startswith("#"), \
            f"'{HEADING}' in {DOC} has no table before the next heading"
        i += 1
    header = [c.strip() for c in lines[i].strip().strip("|").split("|")]
    assert header == ["variable", "default", "read by", "meaning"], header
    rows = []
    i += 2  # the header and its |---| line
    while i < len(lines) and lines[i].startswith("|"):
        rows.append((i + 1, [c.strip() for c in
                             lines[i].strip().strip("|").split("|")]))
        i += 1
    return rows


def documented():
    """{name: line} of the table's rows."""
    names = {}
    for line, cells in table_rows():
        m = re.fullmatch("`(" + NAME + ")`", cells[0])
        assert m, f"operations.md:{line}: the first cell must be one " \
                  f"`AIRLOCK_*` name, not {cells[0]!r}"
        names[m.group(1)] = line
    return names


def test_the_scan_sees_the_code():
    # A scan that found nothing would pass the checks below vacuously.
    reads = read_settings()
    state = reads.get("AIRLOCK_STATE", [])
    assert any(w.split(":")[0].endswith((".c", ".h")) for w in state), \
        f"no C source reads AIRLOCK_STATE: the scan is broken ({state})"
    assert any(w.startswith("scripts/") for w in state), \
        f"no script reads AIRLOCK_STATE: the scan is broken ({state})"
    assert len(reads) >= 40, sorted(reads)


def test_every_row_is_complete_and_once():
    seen = {}
    for line, cells in table_rows():
        assert len(cells) == 4, \
            f"operations.md:{line}: {len(cells)} cells, want 4 " \
            f"(variable, default, read by, meaning): {cells}"
        for what, cell in zip(("variable", "default", "read by",
                               "meaning"), cells):
            assert cell, f"operations.md:{line}: empty {what}"
        assert cells[0] not in seen, \
            f"operations.md:{line}: {cells[0]} is also the row of " \
            f"line {seen[cells[0]]}"
        seen[cells[0]] = line


def assert_none(drift, why):
    """drift: {name: where}; fails listing each with why."""
    assert not drift, why + ":\n" + "\n".join(
        f"  {n}  ({where})" for n, where in sorted(drift.items()))


def test_every_setting_read_is_documented():
    reads, doc = read_settings(), documented()
    assert_none({n: "read at " + ", ".join(w[:3])
                 for n, w in reads.items() if n not in doc},
                "read by the code but without a row in docs/operations.md's "
                "configuration table (add one: default, who reads it, "
                "meaning)")


def test_every_documented_setting_is_read():
    reads, doc = read_settings(), documented()
    assert_none({n: f"operations.md:{line}"
                 for n, line in doc.items() if n not in reads},
                "rows of docs/operations.md's configuration table that "
                "nothing reads any more (remove them, or read them as this "
                "test's docstring says)")
