#!/usr/bin/env python3
"""Bursts of creates through nginx: BURSTS times (3), PAUSE s (10)
apart, COUNT creates of template minimal (ns) from CLIENTS clients at
once, each on its own keep-alive session; per burst creates/s, the
host's busy CPU per create (every core, the client included) and
p50/p90/p99 of one create, what the answers were (201, or 429/503 with
Retry-After), then everything created is deleted (untimed). Beside each
burst, right after it, the peer: COUNT runs of bwrap /bin/true in fresh
namespaces over a snapshot of the same template from CLIENTS parallel
workers (the command line of bench/lifecycle.c).

The first burst is printed apart from the later ones: on a stack just
started (bench/burst.sh) it is what a user's first burst after
`make run` meets, before the stack has seen any create; the later ones
find what the earlier bursts taught it. The goal (>= 100 creates/s,
all 201 or clean 429/503) is checked on the first burst and on the
later ones separately.

--shim-log: the stack's log/shim.log; after each burst, the medians of
its starts' steps (bench/steps.py), where the time went.

usage: burst.py --url URL --key-file FILE [--peer-root DIR] [--count 200]
                [--clients 32] [--bursts 3] [--pause 10] [--shim-log F]"""
import os
import statistics
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


def busy_ms():
    """CPU time the whole host has spent busy (every core, this client
    included), in ms: what bounds a burst's rate on a host that has
    nothing to spare, and a figure the host's noise moves less than a
    rate."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * 1000 / hz


def lines(path):
    with open(path, errors="replace") as f:
        return sum(1 for _ in f)


def steps(path, since):
    subprocess.run([sys.executable,
                    os.path.join(os.path.dirname(__file__), "steps.py"),
                    path, "--driver", "ns", "--since", str(since)])


def one_round(a, n):
    """One burst and its peer; (rate, clean, peer rate or None)."""
    seen = lines(a.shim_log) if a.shim_log else 0
    cpu0 = busy_ms()
    res, wall = burst(a.url, a.key, a.count, a.clients)
    cpu = busy_ms() - cpu0
    codes = {}
    for code, _, _, _ in res:
        codes[code] = codes.get(code, 0) + 1
    ok = [ms for code, _, _, ms in res if code == 201]
    ids = [sid for _, sid, _, _ in res if sid]
    print(f"\nBurst {n}: {a.count} ns creates from {a.clients} clients "
          f"through nginx")
    print("  answers: " + ", ".join(f"{c}: {n}" for c, n in
                                    sorted(codes.items(), key=str)))
    for code, _, text, _ in res:
        if code != 201:
            print(f"  first refusal: {code} {text.strip()[:200]}")
            break
    rate = len(ok) / wall
    print(f"  {len(ok)} created in {wall:.2f} s: {rate:.1f} creates/s; "
          f"host CPU {cpu / max(len(ok), 1):.1f} ms per create")
    print(f"  {'step':<10} {'p50':>9} {'p90':>9} {'p99':>9}   (ms)")
    if ok:
        row("create", ok)
    if a.shim_log:
        print("  the starts' steps (shim.log):")
        steps(a.shim_log, seen)
    delete_all(a.url, a.key, ids)
    prate = None
    if a.peer_root:
        pcpu0 = busy_ms()
        ms, pwall = peer(a.peer_root, a.count, a.clients)
        pcpu = busy_ms() - pcpu0
        prate = a.count / pwall
        print(f"  peer: {a.count} runs of bwrap ... /bin/true from "
              f"{a.clients} workers right after, {pwall:.2f} s: "
              f"{prate:.1f} runs/s; host CPU {pcpu / a.count:.1f} ms "
              f"per run")
        row("spawn", ms)
        if ok:
            print(f"  ratio (Airlock / bwrap): rate {rate / prate:.2f}x; "
                  f"p50 {pct(ok, 50) / pct(ms, 50):.2f}x; CPU per "
                  f"create {cpu / len(ok) / (pcpu / a.count):.2f}x")
    clean = all(c in (201, 429, 503) for c in codes)
    return rate, clean, prate


def summary(label, rounds):
    rates = [r for r, _, _ in rounds]
    peers = [p for _, _, p in rounds if p]
    line = f"  {label:<14} " + ", ".join(f"{r:.1f}" for r in rates) + \
        " creates/s"
    if peers:
        line += (" | bwrap " + ", ".join(f"{p:.1f}" for p in peers) +
                 f" runs/s | ratio {statistics.median(rates) / statistics.median(peers):.2f}x")
    print(line)


def main():
    ap = stack.parser(__doc__, state=False)
    ap.add_argument("--peer-root")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--bursts", type=int, default=3)
    ap.add_argument("--pause", type=float, default=10)
    ap.add_argument("--shim-log")
    a = stack.parse(ap)

    rounds = []
    for n in range(1, a.bursts + 1):
        if n > 1:
            time.sleep(a.pause)
        rounds.append(one_round(a, n))

    print(f"\nBursts of {a.count} from {a.clients} clients, {a.pause:g} s "
          f"apart (bwrap right after each):")
    summary("first burst", rounds[:1])
    if len(rounds) > 1:
        summary("later bursts", rounds[1:])
    clean = all(c for _, c, _ in rounds)
    first = rounds[0][0]
    stack.goal("first burst: >= 100 creates/s, all 201 or clean 429/503",
               f"{first:.1f}/s, {'clean' if rounds[0][1] else 'NOT clean'}",
               first >= 100 and rounds[0][1])
    if len(rounds) > 1:
        later = min(r for r, _, _ in rounds[1:])
        stack.goal("later bursts: >= 100 creates/s each, all clean",
                   f"lowest {later:.1f}/s, "
                   f"{'clean' if clean else 'NOT clean'}",
                   later >= 100 and clean)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
