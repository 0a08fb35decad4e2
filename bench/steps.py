#!/usr/bin/env python3
"""Where a start's time goes, from the shims' step timings in shim.log:
the median of each step over the starts of each kind (cold sandbox,
warm-pool standby) per driver. The shim logs one line per start:

  ... sandbox ID running (driver ns, init pid N) in T ms: db A,
  snapshot B, driver C (uid range x ms, user namespace y ms, ...),
  agent D, record E

Usage: steps.py SHIM_LOG"""
import re
import statistics
import sys

LINE = re.compile(r" (sandbox|standby) \S+ running \(driver (\w+), init pid "
                  r"\d+\) in (\d+) ms: (.*)$")
STEP = re.compile(r"([a-z][a-z ]*?) ([0-9.]+)(?: ms)?$")


def steps(text):
    """[(name, ms)] of "db 5, snapshot 1, driver 20 (a 0.1 ms, b 2 ms), ..."
    with the driver's own steps as "driver: a"."""
    out = []
    for m in re.finditer(r"([a-z]+) (\d+)(?: \(([^)]*)\))?", text):
        out.append((m.group(1), float(m.group(2))))
        for sub in (m.group(3) or "").split(", "):
            s = STEP.match(sub.strip())
            if s:
                out.append((f"  {s.group(1)}", float(s.group(2))))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    series = {}
    with open(sys.argv[1], errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if not m:
                continue
            kind = "cold start" if m.group(1) == "sandbox" else "standby boot"
            key = (m.group(2), kind)
            s = series.setdefault(key, {"total": [], "steps": {}})
            s["total"].append(float(m.group(3)))
            for name, ms in steps(m.group(4)):
                s["steps"].setdefault(name, []).append(ms)
    for (driver, kind), s in sorted(series.items()):
        n = len(s["total"])
        print(f"{driver} {kind}: median of {n} starts, "
              f"{statistics.median(s['total']):.0f} ms")
        for name, v in s["steps"].items():
            print(f"  {name:<20} {statistics.median(v):8.2f} ms")


if __name__ == "__main__":
    main()
