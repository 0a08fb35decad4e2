#!/usr/bin/python3
"""bench/files.py: a big file into a sandbox and back out, per driver.

Uploads SIZE MiB of random bytes with PUT /v1/sandboxes/{id}/files and
downloads it again (checked by sha256), timing each, beside the peer: a
`cat` of the same source file into the sandbox's disk from the host
(followed by `sync` of the file, as the agent fsyncs an upload before it
renames it into place) and a `cat` of it back to /dev/null. For ns the
peer writes into the sandbox's root itself; a vm's disk is an image the
guest has mounted, so the peer writes beside that image, on the same
filesystem of the pool. Prints the memory of the sandbox's shim and of
every airlock-fcgi worker: VmRSS before, VmHWM after (it must not grow
with the file).

  files.py --url http://127.0.0.1:8080 --key-file STATE/api-key \\
           --state STATE --driver ns [--size 200]
"""
import hashlib
import http.client
import os
import subprocess
import sys
import time
import urllib.parse

import stack
from stack import mem_kib

MIB = 1 << 20


def upload(args, sid, src, size):
    c = http.client.HTTPConnection(args.host, args.port, timeout=600,
                                   blocksize=MIB)
    q = urllib.parse.urlencode({"path": "/root/bench.bin"})
    t = time.monotonic()
    with open(src, "rb") as f:
        c.request("PUT", f"/v1/sandboxes/{sid}/files?{q}", body=f,
                  headers={"Authorization": "Bearer " + args.key,
                           "Content-Length": str(size)})
        r = c.getresponse()
        raw = r.read()
    dt = time.monotonic() - t
    c.close()
    if r.status != 201:
        raise SystemExit(f"files: upload answered {r.status}: {raw[:300]}")
    return dt


def download(args, sid, size):
    c = http.client.HTTPConnection(args.host, args.port, timeout=600)
    q = urllib.parse.urlencode({"path": "/root/bench.bin"})
    h, n = hashlib.sha256(), 0
    t = time.monotonic()
    c.request("GET", f"/v1/sandboxes/{sid}/files?{q}",
              headers={"Authorization": "Bearer " + args.key})
    r = c.getresponse()
    if r.status != 200:
        raise SystemExit(f"files: download answered {r.status}: "
                         f"{r.read()[:300]}")
    while (b := r.read(MIB)):
        h.update(b)
        n += len(b)
    dt = time.monotonic() - t
    c.close()
    if n != size:
        raise SystemExit(f"files: download gave {n} of {size} bytes")
    return dt, h.hexdigest()


def peer(src, dst_dir):
    dst = os.path.join(dst_dir, ".bench-peer.bin")
    try:
        t = time.monotonic()
        subprocess.run(["sh", "-c", 'cat "$1" > "$2" && sync "$2"', "sh",
                        src, dst], check=True)
        up = time.monotonic() - t
        t = time.monotonic()
        subprocess.run(["sh", "-c", 'cat "$1" > /dev/null', "sh", dst],
                       check=True)
        return up, time.monotonic() - t
    finally:
        if os.path.exists(dst):
            os.unlink(dst)


def main():
    ap = stack.parser(__doc__)
    ap.add_argument("--driver", required=True)
    ap.add_argument("--size", type=int, default=200, help="MiB")
    args = stack.parse(ap)
    size = args.size * MIB

    src = os.path.join(args.state, "bench-files.src")
    h = hashlib.sha256()
    with open("/dev/urandom", "rb") as r, open(src, "wb") as w:
        for _ in range(args.size):
            b = r.read(MIB)
            h.update(b)
            w.write(b)
    want = h.hexdigest()

    sid = None
    try:
        sid = args.api.create("files", args.driver, 900)["id"]
        shim = stack.shims(args.state).get(sid)
        fcgi = stack.proc_pids(args.state, "airlock-fcgi")
        if shim is None or not fcgi:
            raise SystemExit(f"files: shim {shim}, fcgi {fcgi} not found")
        before = {p: mem_kib(p) for p in [shim] + fcgi}

        up = upload(args, sid, src, size)
        down, got = download(args, sid, size)
        if got != want:
            raise SystemExit("files: the download differs from the upload")
        after = {p: mem_kib(p) for p in before}

        root = os.path.join(args.state, "pool", "sandboxes", sid)
        if args.driver == "ns":
            root = os.path.join(root, "root")
        peer_up, peer_down = peer(src, root)
    finally:
        os.unlink(src)
        if sid is not None:
            args.api.call("DELETE", f"/v1/sandboxes/{sid}")

    d = args.driver
    print(f"\nFiles, {d}: {args.size} MiB through nginx, fcgi, shim and "
          f"agent (sha256 checked), beside a host `cat` into the "
          f"sandbox's {'root' if d == 'ns' else 'pool directory'}")
    print(f"  {'':10} {'airlock MB/s':>13} {'cat MB/s':>10}")
    for what, ours, theirs in (("upload", up, peer_up),
                               ("download", down, peer_down)):
        print(f"  {what:10} {size / ours / 1e6:13.1f} "
              f"{size / theirs / 1e6:10.1f}")
    print("  memory (KiB): VmRSS before -> VmHWM after")
    grew = 0
    for p in before:
        kind = "shim" if p == shim else "fcgi"
        g = after[p]["VmHWM"] - before[p]["VmRSS"]
        grew = max(grew, g) if kind == "fcgi" else grew
        print(f"  {kind} {p:>8} {before[p]['VmRSS']:8} -> "
              f"{after[p]['VmHWM']:8}  (+{g})")
    shim_g = after[shim]["VmHWM"] - before[shim]["VmRSS"]
    print(f"files_{d}_upload_mbps={size / up / 1e6:.1f}")
    print(f"files_{d}_download_mbps={size / down / 1e6:.1f}")
    print(f"files_{d}_peer_upload_mbps={size / peer_up / 1e6:.1f}")
    print(f"files_{d}_peer_download_mbps={size / peer_down / 1e6:.1f}")
    print(f"files_{d}_shim_growth_kib={shim_g}")
    print(f"files_{d}_fcgi_growth_kib={grew}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
