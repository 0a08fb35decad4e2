#!/usr/bin/env python3
"""Medians of the start steps the shims log ("sandbox <id> running
(driver D, ...) in T ms: db 4, snapshot 3 (qgroup 0.045), driver 9, ..."),
per driver, from a shim log: what each step of a create costs.

    bench/steps.py LOG [--driver ns|vm] [--since N]

--since: only lines after the first N lines (a series' own creates)."""
import re
import statistics
import sys

LINE = re.compile(r"sandbox \S+ running \(driver (\w+),.*\) in (\d+) ms: (.*)$")
STEP = re.compile(r"([a-z]+) ([0-9.]+)")


def main(argv):
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 100
    path, driver, since = argv[0], None, 0
    rest = argv[1:]
    while rest:
        if rest[0] == "--driver" and len(rest) > 1:
            driver, rest = rest[1], rest[2:]
        elif rest[0] == "--since" and len(rest) > 1:
            since, rest = int(rest[1]), rest[2:]
        else:
            print(__doc__, file=sys.stderr)
            return 100
    steps = {}
    with open(path, errors="replace") as f:
        for i, line in enumerate(f):
            m = LINE.search(line) if i >= since else None
            if m is None or (driver and m.group(1) != driver):
                continue
            steps.setdefault((m.group(1), "total"), []).append(
                float(m.group(2)))
            for name, v in STEP.findall(m.group(3)):
                steps.setdefault((m.group(1), name), []).append(float(v))
    if not steps:
        print("steps: no sandbox start lines in", path)
        return 0
    for d in sorted({k[0] for k in steps}):
        n = len(steps[(d, "total")])
        parts = [f"{name} {statistics.median(v):.3g}"
                 for (dd, name), v in steps.items() if dd == d]
        print(f"{d} start steps, median of {n} (ms): " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
