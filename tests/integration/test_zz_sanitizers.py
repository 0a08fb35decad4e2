"""Runs last: the daemons of the sanitizer build reported nothing."""
import glob
import os
import re

PATTERNS = re.compile(rb"(ERROR: AddressSanitizer|ERROR: LeakSanitizer|"
                      rb"runtime error: |SUMMARY: UndefinedBehaviorSanitizer)")


def test_no_sanitizer_reports(stack):
    found = []
    for f in sorted(glob.glob(os.path.join(stack.state, "log", "**"),
                              recursive=True)):
        if not os.path.isfile(f):
            continue
        with open(f, "rb") as fh:
            data = fh.read()
        for m in PATTERNS.finditer(data):
            start = data.rfind(b"\n", 0, max(0, m.start() - 1))
            found.append(f"{f}: {data[start + 1:m.start() + 400].decode(errors='replace')}")
    assert not found, "\n\n".join(found[:5])
