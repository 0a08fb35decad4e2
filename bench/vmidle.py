#!/usr/bin/python3
"""bench/vmidle.py: CPU per idle vm sandbox with COUNT running.

Creates COUNT vm sandboxes, runs `true` in each, lets them settle, then
measures for WINDOW seconds what their QEMUs and shims use: utime+stime
of each process (/proc/<pid>/stat, which keeps the time of threads that
ended), per QEMU thread (/proc/<pid>/task/*/schedstat, nanoseconds) and
the wakeups of those threads (context switches). Afterwards it reads the
guest's /proc/interrupts twice in one sandbox to show what ticks inside.

  vmidle.py --url http://127.0.0.1:8080 --key-file STATE/api-key \
            --state STATE [--count 10] [--settle 10] [--window 30]
"""
import os
import sys
import time

import stack
from stack import HZ, cpu_ticks


def threads(pid):
    """{(tid, name): (ns on CPU, context switches)} for pid's threads.
    QEMU names none of its threads (no -name debug-threads=on): the
    process's own is the main loop, the others run the vCPU, RCU and I/O
    workers."""
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            name = "main loop" if tid == str(pid) else "other threads"
            with open(f"{base}/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
            sw = 0
            with open(f"{base}/{tid}/status") as f:
                for line in f:
                    key, _, val = line.partition(":")
                    if key.endswith("ctxt_switches"):
                        sw += int(val)
        except (OSError, ValueError, IndexError):
            continue
        out[(tid, name)] = (ns, sw)
    return out


def by_name(before, after):
    """Per thread name: (ns, switches) used between the two samples."""
    out = {}
    for key, (ns, sw) in after.items():
        ns0, sw0 = before.get(key, (0, 0))
        name = key[1]
        t = out.setdefault(name, [0, 0])
        t[0] += ns - ns0
        t[1] += sw - sw0
    return out


def interrupts(api, sid):
    st, res = api.call("POST", f"/v1/sandboxes/{sid}/exec",
                       {"cmd": ["cat", "/proc/interrupts"]})
    out = {}
    for line in (res or {}).get("stdout", "").splitlines()[1:]:
        parts = line.split()
        if len(parts) < 2 or not parts[0].endswith(":"):
            continue
        try:
            n = int(parts[1])
        except ValueError:
            continue
        out[parts[0].rstrip(":")] = (n, " ".join(parts[2:]))
    return out


class IdleCpu:
    """What the (shim, QEMU) pairs use over WINDOW seconds, per sandbox
    in % of one core; bench/scale.py measures its idle VMs with it too."""

    def __init__(self, pairs, window):
        t0 = time.monotonic()
        q0 = [cpu_ticks(q) for _, q in pairs]
        s0 = [cpu_ticks(s) for s, _ in pairs]
        th0 = [threads(q) for _, q in pairs]
        time.sleep(window)
        q1 = [cpu_ticks(q) for _, q in pairs]
        s1 = [cpu_ticks(s) for s, _ in pairs]
        th1 = [threads(q) for _, q in pairs]
        self.secs = secs = time.monotonic() - t0
        self.n = n = len(pairs)

        def pct(ticks):
            return 100.0 * ticks / HZ / secs / n

        self.qemu = pct(sum(b - a for a, b in zip(q0, q1)))
        self.shim = pct(sum(b - a for a, b in zip(s0, s1)))
        self.worst = max(100.0 * (b - a) / HZ / secs
                         for a, b in zip(q0, q1))
        # Per QEMU thread name: [ns on CPU, wakeups], all sandboxes.
        self.named = {}
        for a, b in zip(th0, th1):
            for name, (ns, sw) in by_name(a, b).items():
                t = self.named.setdefault(name, [0, 0])
                t[0] += ns
                t[1] += sw


def main():
    ap = stack.parser(__doc__)
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--settle", type=float, default=10)
    ap.add_argument("--window", type=float, default=30)
    ap.add_argument("--irq-window", type=float, default=10)
    args = stack.parse(ap)

    with stack.held(args.api, "vmidle", args.count, "vm", 900) as ids:
        time.sleep(args.settle)
        cpu = IdleCpu(stack.vm_pairs("vmidle", args.state, ids),
                      args.window)
        irq0 = interrupts(args.api, ids[0])
        time.sleep(args.irq_window)
        irq1 = interrupts(args.api, ids[0])

    n, secs, qemu, shim = cpu.n, cpu.secs, cpu.qemu, cpu.shim
    print(f"\nIdle CPU of {n} vm sandboxes over {secs:.0f} s, after "
          f"{args.settle:.0f} s settling (utime+stime, % of one core)")
    print(f"  QEMU per sandbox   {qemu:6.2f} %   (busiest {cpu.worst:.2f} %)")
    print(f"  shim per sandbox   {shim:6.2f} %")
    print(f"  total per sandbox  {qemu + shim:6.2f} %   "
          f"({100.0 / max(qemu + shim, 1e-3):.0f} idle VMs per core)")
    print("  QEMU threads (schedstat), per sandbox:")
    for name, (ns, sw) in sorted(cpu.named.items(), key=lambda x: -x[1][0]):
        print(f"    {name:20} {100.0 * ns / 1e9 / secs / n:6.2f} %  "
              f"{sw / secs / n:8.1f} wakeups/s")
    print(f"  guest interrupts over {args.irq_window:.0f} s in {ids[0]} "
          f"(per second, the two reads' own exec included):")
    for irq, (c1, desc) in irq1.items():
        c0 = irq0.get(irq, (0, ""))[0]
        if c1 != c0:
            print(f"    {irq:>6} {(c1 - c0) / args.irq_window:8.1f}  {desc}")
    print(f"vmidle_qemu_cpu_pct_per_sandbox={qemu:.2f}")
    print(f"vmidle_shim_cpu_pct_per_sandbox={shim:.2f}")
    print(f"vmidle_cpu_pct_per_sandbox={qemu + shim:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
