#!/usr/bin/env python3
"""Where a start's time goes, from the shims' step timings in shim.log:
the median of each step over the starts of each kind (cold sandbox,
warm-pool standby) per driver. The shim logs one line per start:

  ... sandbox ID running (driver ns, init pid N) in T ms: spec A,
  snapshot B (qgroup q), driver C (uid range x ms, user namespace y ms,
  ...), agent D, disk grow G, listen E

Usage: steps.py SHIM_LOG [--driver ns|vm] [--since N]

--since: only lines after the first N lines (a series' own starts)."""
import re
import statistics
import sys

LINE = re.compile(r" (sandbox|standby) \S+ running \(driver (\w+), init pid "
                  r"\d+\) in (\d+) ms: (.*)$")
STEP = re.compile(r"([a-z][a-z ]*?) ([0-9.]+)(?: ms)?$")


def steps(text):
    """[(name, ms)] of "spec 0, snapshot 1 (qgroup 0.02), driver 20 (a 0.1 ms,
    b 2 ms), ..." with a step's own sub-steps indented under it."""
    out = []
    for m in re.finditer(r"([a-z]+) (\d+)(?: \(([^)]*)\))?", text):
        out.append((m.group(1), float(m.group(2))))
        for sub in (m.group(3) or "").split(", "):
            s = STEP.match(sub.strip())
            if s:
                out.append((f"  {s.group(1)}", float(s.group(2))))
    return out


def main(argv):
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__)
    path, driver, since = argv[0], None, 0
    rest = argv[1:]
    while rest:
        if rest[0] == "--driver" and len(rest) > 1:
            driver, rest = rest[1], rest[2:]
        elif rest[0] == "--since" and len(rest) > 1:
            since, rest = int(rest[1]), rest[2:]
        else:
            sys.exit(__doc__)
    series = {}
    with open(path, errors="replace") as f:
        for i, line in enumerate(f):
            m = LINE.search(line) if i >= since else None
            if m is None or (driver and m.group(2) != driver):
                continue
            kind = "cold start" if m.group(1) == "sandbox" else "standby boot"
            # Network mode "none": no slot, told apart from the rest.
            if "(no network)" in m.group(4):
                kind += ", no network"
            s = series.setdefault((m.group(2), kind),
                                  {"total": [], "steps": {}})
            s["total"].append(float(m.group(3)))
            for name, ms in steps(m.group(4)):
                s["steps"].setdefault(name, []).append(ms)
    if not series:
        print("steps: no start lines in", path)
    for (drv, kind), s in sorted(series.items()):
        n = len(s["total"])
        print(f"{drv} {kind}: median of {n} starts, "
              f"{statistics.median(s['total']):.0f} ms")
        for name, v in s["steps"].items():
            print(f"  {name:<20} {statistics.median(v):8.3f} ms")
    # The shim's own share of issue 10's "create with a network beside
    # without" (goal +<= 3 ms p50): the same kind of start, both ways.
    for (drv, kind), s in sorted(series.items()):
        none = series.get((drv, kind + ", no network"))
        if kind.endswith("no network") or none is None:
            continue
        d = statistics.median(s["total"]) - statistics.median(none["total"])
        print(f"{drv} {kind}: with a network {d:+.1f} ms (median) over "
              f"none, in the shim")


if __name__ == "__main__":
    main(sys.argv[1:])
