#!/usr/bin/env python3
"""A burst of creates through nginx: COUNT creates of template minimal
(ns) from CLIENTS clients at once, each on its own keep-alive session;
creates/s over the burst and p50/p90/p99 of one create, what the answers
were (201, or 429/503 with Retry-After), then everything created is
deleted (untimed). Beside it the peer: COUNT runs of bwrap /bin/true in
fresh namespaces over a snapshot of the same template from CLIENTS
parallel workers (the command line of bench/lifecycle.c).

usage: burst.py --url URL --key-file FILE [--peer-root DIR] [--count 200]
                [--clients 32]"""
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests

import stack
from stack import pct

BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--bind", None, "/",
         "--proc", "/proc", "--dev", "/dev", "/bin/true"]


def row(label, xs):
    print(f"  {label:<10} {pct(xs, 50):9.1f} {pct(xs, 90):9.1f} "
          f"{pct(xs, 99):9.1f}")


def burst(url, key, count, clients):
    local = threading.local()

    def one(_):
        if not hasattr(local, "api"):
            local.api = stack.Api(url, key)
        t0 = time.monotonic()
        try:
            r = local.api.request("POST", "/v1/sandboxes",
                                  {"template": "minimal", "driver": "ns"})
        except requests.RequestException as e:
            return ("exception", None, str(e), time.monotonic() - t0)
        ms = (time.monotonic() - t0) * 1000
        sid = r.json().get("id") if r.status_code == 201 else None
        clean = r.status_code == 201 or (
            r.status_code in (429, 503) and
            r.headers.get("Retry-After", "").isdigit() and
            "error" in r.json())
        return (r.status_code if clean else f"unclean {r.status_code}",
                sid, r.text if sid is None else "", ms)

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=clients) as ex:
        res = list(ex.map(one, range(count)))
    return res, time.monotonic() - t0


def delete_all(url, key, ids):
    h = {"Authorization": f"Bearer {key}"}
    with ThreadPoolExecutor(max_workers=8) as ex:
        list(ex.map(lambda i: requests.delete(f"{url}/v1/sandboxes/{i}",
                                              headers=h, timeout=120), ids))


def peer(root, count, clients):
    argv = list(BWRAP)
    argv[4] = root

    def one(_):
        t0 = time.monotonic()
        p = subprocess.run(argv, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise RuntimeError(f"bwrap failed: {p.stderr.decode()}")
        return (time.monotonic() - t0) * 1000

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=clients) as ex:
        ms = list(ex.map(one, range(count)))
    return ms, time.monotonic() - t0


def main():
    ap = stack.parser(__doc__, state=False)
    ap.add_argument("--peer-root")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--clients", type=int, default=32)
    a = stack.parse(ap)
    key = a.key

    res, wall = burst(a.url, key, a.count, a.clients)
    codes = {}
    for code, _, _, _ in res:
        codes[code] = codes.get(code, 0) + 1
    ok = [ms for code, _, _, ms in res if code == 201]
    ids = [sid for _, sid, _, _ in res if sid]
    print(f"\nBurst: {a.count} ns creates from {a.clients} clients through "
          f"nginx")
    print("  answers: " + ", ".join(f"{c}: {n}" for c, n in
                                    sorted(codes.items(), key=str)))
    for code, _, text, _ in res:
        if code != 201:
            print(f"  first refusal: {code} {text.strip()[:200]}")
            break
    rate = len(ok) / wall
    print(f"  {len(ok)} created in {wall:.2f} s: {rate:.1f} creates/s")
    print(f"  {'step':<10} {'p50':>9} {'p90':>9} {'p99':>9}   (ms)")
    if ok:
        row("create", ok)
    delete_all(a.url, key, ids)

    if a.peer_root:
        ms, pwall = peer(a.peer_root, a.count, a.clients)
        print(f"\nPeer: {a.count} runs of bwrap ... /bin/true from "
              f"{a.clients} workers")
        print(f"  {a.count} in {pwall:.2f} s: {a.count / pwall:.1f} runs/s")
        print(f"  {'step':<10} {'p50':>9} {'p90':>9} {'p99':>9}   (ms)")
        row("spawn", ms)
        if ok:
            print(f"\nRatio (Airlock / bwrap, p50): create "
                  f"{pct(ok, 50) / pct(ms, 50):.2f}x; rate "
                  f"{rate / (a.count / pwall):.2f}x")
    clean = all(c in (201, 429, 503) for c in codes)
    stack.goal(">= 100 creates/s and all 201 or clean 429/503",
               f"{rate:.1f}/s, {'clean' if clean else 'NOT clean'}",
               rate >= 100 and clean)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
