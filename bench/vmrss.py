#!/usr/bin/python3
"""bench/vmrss.py: memory per idle vm sandbox with COUNT running.

Creates COUNT vm sandboxes, runs `true` in each, lets them idle, then sums
Rss and Pss over /proc/<pid>/smaps_rollup of their QEMU processes (found
as descendants of the shim serving run/sbx/<id>.sock). Rss counts every
page a QEMU maps, Pss splits shared pages between the processes that map
them: the guest RAM of every clone is a private copy-on-write mapping of
the template's snapshot file, so the pages no guest has written are
shared and Pss per sandbox falls well below Rss.

  vmrss.py --url http://127.0.0.1:8080 --key-file STATE/api-key \
           --state STATE [--count 10] [--idle 5]
"""
import argparse
import json
import os
import sys
import time
import urllib.request


def call(args, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(args.url + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + args.key)
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=120) as r:
        raw = r.read()
        return r.status, (json.loads(raw) if raw else None)


def listener(state, sid):
    path = os.path.join(state, "run", "sbx", f"{sid}.sock")
    # Accepted connections carry the path too: any inode with it will do.
    want = set()
    with open("/proc/net/unix") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 8 and parts[7] == path:
                want.add(f"socket:[{parts[6]}]")
    if not want:
        return None
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{d}/fd"):
                if os.readlink(f"/proc/{d}/fd/{fd}") in want:
                    return int(d)
        except OSError:
            continue
    return None


def parents():
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                out[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return out


def qemu_under(pid, ppids):
    todo, found = [pid], []
    while todo:
        p = todo.pop()
        for c, pp in ppids.items():
            if pp != p:
                continue
            todo.append(c)
            try:
                exe = os.readlink(f"/proc/{c}/exe")
            except OSError:
                continue
            if os.path.basename(exe).startswith("qemu-system"):
                found.append(c)
    return found


def rollup(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--key-file", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--idle", type=float, default=5)
    args = ap.parse_args()
    with open(args.key_file) as f:
        args.key = f.read().strip()

    ids = []
    try:
        for _ in range(args.count):
            st, sb = call(args, "POST", "/v1/sandboxes",
                          {"template": "minimal", "driver": "vm",
                           "timeout": 600})
            ids.append(sb["id"])
        for sid in ids:
            st, res = call(args, "POST", f"/v1/sandboxes/{sid}/exec",
                           {"cmd": ["true"]})
            if res.get("exit_code") != 0:
                print(f"vmrss: exec in {sid}: {res}", file=sys.stderr)
                return 1
        time.sleep(args.idle)
        ppids = parents()
        pids = []
        for sid in ids:
            shim = listener(args.state, sid)
            q = qemu_under(shim, ppids) if shim is not None else []
            if len(q) != 1:
                print(f"vmrss: no single QEMU for {sid} (shim {shim}, "
                      f"found {q})", file=sys.stderr)
                return 1
            pids.append(q[0])
        tot = {}
        for p in pids:
            for k, v in rollup(p).items():
                tot[k] = tot.get(k, 0) + v
    finally:
        for sid in ids:
            try:
                call(args, "DELETE", f"/v1/sandboxes/{sid}")
            except Exception as e:  # report, keep deleting
                print(f"vmrss: delete {sid}: {e}", file=sys.stderr)

    n = len(pids)
    mib = 1024.0
    print(f"\nMemory of {n} idle vm sandboxes (QEMU processes, "
          f"/proc/<pid>/smaps_rollup, guest RAM 256 MiB each)")
    print(f"  {'':24} {'total':>10} {'per sandbox':>12}   (MiB)")
    for k in ("Rss", "Pss", "Shared_Clean", "Shared_Dirty",
              "Private_Clean", "Private_Dirty"):
        v = tot.get(k, 0)
        print(f"  {k:24} {v / mib:10.1f} {v / mib / n:12.1f}")
    rss, pss = tot.get("Rss", 0), tot.get("Pss", 0)
    if pss > 0:
        print(f"  Rss/Pss {rss / pss:.2f}: pages shared copy-on-write "
              f"between the clones are counted once in Pss")
    print(f"vmrss_rss_mib_per_sandbox={rss / mib / n:.1f}")
    print(f"vmrss_pss_mib_per_sandbox={pss / mib / n:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
