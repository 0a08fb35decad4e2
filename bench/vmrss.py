#!/usr/bin/python3
"""bench/vmrss.py: memory per idle vm sandbox with COUNT running.

Creates COUNT vm sandboxes, runs `true` in each, lets them idle, then sums
Rss and Pss over /proc/<pid>/smaps_rollup of their QEMU processes (found
as descendants of the shim serving run/sbx/<id>.sock). Rss counts every
page a QEMU maps, Pss splits shared pages between the processes that map
them: the guest RAM of every clone is a private copy-on-write mapping of
the template's snapshot file, so the pages no guest has written are
shared and Pss per sandbox falls well below Rss.

  vmrss.py --url http://127.0.0.1:8080 --key-file STATE/api-key \\
           --state STATE [--count 10] [--idle 5]
"""
import sys
import time

import stack

MIB = 1024.0
KEYS = ("Rss", "Pss", "Shared_Clean", "Shared_Dirty", "Private_Clean",
        "Private_Dirty")


def report(n, tot):
    """The table of the QEMUs' memory; bench/scale.py prints it too."""
    print(f"\nMemory of {n} idle vm sandboxes (QEMU processes, "
          f"/proc/<pid>/smaps_rollup, guest RAM 256 MiB each)")
    print(f"  {'':24} {'total':>10} {'per sandbox':>12}   (MiB)")
    for k in KEYS:
        v = tot.get(k, 0)
        print(f"  {k:24} {v / MIB:10.1f} {v / MIB / n:12.1f}")
    rss, pss = tot.get("Rss", 0), tot.get("Pss", 0)
    if pss > 0:
        print(f"  Rss/Pss {rss / pss:.2f}: pages shared copy-on-write "
              f"between the clones are counted once in Pss")
    return rss, pss


def main():
    ap = stack.parser(__doc__)
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--idle", type=float, default=5)
    args = stack.parse(ap)

    with stack.held(args.api, "vmrss", args.count, "vm", 600) as ids:
        time.sleep(args.idle)
        pids = [q for _, q in stack.vm_pairs("vmrss", args.state, ids)]
        tot = stack.rollup_sum(pids)

    n = len(pids)
    rss, pss = report(n, tot)
    print(f"vmrss_rss_mib_per_sandbox={rss / MIB / n:.1f}")
    print(f"vmrss_pss_mib_per_sandbox={pss / MIB / n:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
