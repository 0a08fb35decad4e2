#!/usr/bin/python3
"""bench/streams.py: many open exec event streams, and the API beside
them (issue 9's streams row).

Creates SANDBOXES ns sandboxes and opens PER event streams in each
(POST /v1/sandboxes/{id}/exec, Accept: text/event-stream, `sleep` with
a timeout past the measurement), all at once from one asyncio loop over
raw HTTP/1.1 connections to nginx. A stream counts as open once its
`start` event has arrived; streams not open after OPEN_WAIT seconds are
counted by what they got (an answer other than 200, a closed
connection, or nothing yet), and so are the streams that end before the
bench closes them. With the streams open it times, as a client sees
them, PROBES GET /v1/health and PROBES create + DELETE of an ns
sandbox, one after another, each bounded by PROBE_TIMEOUT seconds (a
request that gets no answer in that time counts as that long; every
refusal or timeout is reported and fails the goal), all within BUDGET
seconds (what the budget cuts is left out
and said). Then it prints the airlock-fcgi processes and threads,
closes the streams (which kills their `sleep`s) and deletes the
sandboxes.

  streams.py --url URL --key-file STATE/api-key --state STATE \\
             [--sandboxes 50] [--per 40] [--open-wait 60] [--probes 20]
             [--probe-timeout 10] [--budget 90]
"""
import asyncio
import json
import os
import resource
import sys
import time

import stack

GOAL_STREAMS = 2000
GOAL_P99_MS = 100.0


class Stream:
    def __init__(self):
        self._state = "nothing yet"
        self.writer = None
        self.settled = asyncio.Event()  # open, or known not to be

    @property
    def state(self):
        return self._state

    @state.setter
    def state(self, v):
        self._state = v
        self.settled.set()


async def until(r, seen, marker):
    """Read r until marker has arrived (the bytes' tail), or None at the
    end of the stream. nginx relays each event the server flushes at
    once as one chunk, so the chunked framing does not cut a marker."""
    while marker not in seen:
        chunk = await r.read(4096)
        if not chunk:
            return None
        seen = seen[-64:] + chunk
    return seen


async def open_stream(args, sid, secs, s):
    body = json.dumps({"cmd": ["sleep", str(secs)],
                       "timeout": secs}).encode()
    head = (f"POST /v1/sandboxes/{sid}/exec HTTP/1.1\r\n"
            f"Host: {args.host}:{args.port}\r\n"
            f"Authorization: Bearer {args.key}\r\n"
            "Accept: text/event-stream\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    try:
        r, s.writer = await asyncio.open_connection(args.host, args.port)
        s.writer.write(head + body)
        await s.writer.drain()
        resp = await r.readuntil(b"\r\n\r\n")
        status = resp.split(b" ", 2)[1].decode()
        if status != "200":
            s.state = f"answered {status}"
            return
        seen = await until(r, b"", b"event: start")
        if seen is None:
            s.state = "closed before its start event"
            return
        s.state = "open"
        # Open until the server ends it (or the bench closes it).
        s.state = ("ended early: connection closed"
                   if await until(r, seen, b"event: exit") is None
                   else "ended early: exit event")
    except (OSError, asyncio.IncompleteReadError, IndexError) as e:
        s.state = f"failed: {type(e).__name__}"


def timed(fn, into, end):
    """Time fn() into into = (ms, errors): the time to its answer, or to
    its timeout; a refusal or a timeout is also kept as an error (the
    goal wants none). Nothing is done after END (time.monotonic())."""
    t0 = time.monotonic()
    if t0 > end:
        return
    try:
        why = fn()
    except Exception as e:  # a timeout: no answer within the bound
        why = f"{type(e).__name__}: {str(e)[:120]}"
    into[0].append((time.monotonic() - t0) * 1000.0)
    if why:
        into[1].append(why)


def probes(args):
    """{request: (ms, errors)}: PROBES health checks, then PROBES
    creates each followed by its DELETE."""
    api = stack.Api(args.url, args.key)
    t = args.probe_timeout
    out = {k: ([], []) for k in ("health", "create", "delete")}
    created = []
    end = time.monotonic() + args.budget

    def health():
        r = api.request("GET", "/v1/health", timeout=t)
        return None if r.status_code == 200 else f"health {r.status_code}"

    def create():
        r = api.request("POST", "/v1/sandboxes",
                        {"template": "minimal", "driver": "ns"}, timeout=t)
        if r.status_code != 201:
            return f"create {r.status_code} {r.text.strip()[:200]}"
        created.append(r.json()["id"])
        return None

    def delete():
        r = api.request("DELETE", f"/v1/sandboxes/{created.pop()}",
                        timeout=t)
        return None if r.status_code == 204 else f"delete {r.status_code}"

    for _ in range(args.probes):
        timed(health, out["health"], end - args.budget / 2)
    for _ in range(args.probes):
        timed(create, out["create"], end)
        if created:
            timed(delete, out["delete"], end)
    # A create that timed out here may still have made its sandbox: the
    # sandboxes' own lifetime (the stack's default) ends those.
    api.delete_all("streams", created)
    return out


def fcgi_threads(state):
    procs = stack.proc_pids(state, "airlock-fcgi")
    threads = 0
    for p in procs:
        try:
            threads += len(os.listdir(f"/proc/{p}/task"))
        except OSError:
            pass
    return len(procs), threads


async def run(args, ids):
    secs = int(args.open_wait + args.budget + 120)
    streams = [Stream() for _ in range(len(ids) * args.per)]
    tasks = [asyncio.create_task(open_stream(args, ids[i // args.per], secs,
                                             s))
             for i, s in enumerate(streams)]
    t0 = time.monotonic()
    try:
        await asyncio.wait_for(asyncio.gather(
            *(s.settled.wait() for s in streams)), args.open_wait)
    except asyncio.TimeoutError:
        pass
    opened = sum(s.state == "open" for s in streams)
    took = time.monotonic() - t0
    try:
        res = await asyncio.to_thread(probes, args)
        nproc, nthreads = fcgi_threads(args.state)
        # Before closing them: closed, they all end.
        states = {}
        for s in streams:
            states[s.state] = states.get(s.state, 0) + 1
        still = states.get("open", 0)
    finally:
        for t in tasks:
            t.cancel()
        for s in streams:
            if s.writer is not None:
                s.writer.close()
        await asyncio.gather(*tasks, return_exceptions=True)
    return opened, still, took, states, res, nproc, nthreads


def main():
    ap = stack.parser(__doc__)
    ap.add_argument("--sandboxes", type=int, default=50)
    ap.add_argument("--per", type=int, default=40)
    ap.add_argument("--open-wait", type=float, default=60)
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--probe-timeout", type=float, default=10)
    ap.add_argument("--budget", type=float, default=90)
    args = stack.parse(ap)
    want = args.sandboxes * args.per
    # A socket per stream, and the probes' own.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (min(hard, want + 256), hard))

    ids = []
    try:
        for _ in range(args.sandboxes):
            ids.append(args.api.create("streams", "ns", 3600)["id"])
        opened, still, took, states, res, nproc, nthreads = asyncio.run(
            run(args, ids))
    finally:
        args.api.delete_all("streams", ids)

    print(f"\nStreams: {want} `sleep` exec event streams asked for "
          f"({args.sandboxes} ns sandboxes x {args.per}), from one client "
          f"through nginx")
    print(f"  open after {took:.1f} s: {opened}; still open after the "
          f"probes: {still}")
    print("  streams by state before the bench closed them: " + ", ".join(
        f"{k}: {v}" for k, v in sorted(states.items())))
    print(f"  airlock-fcgi: {nproc} processes, {nthreads} threads")
    print(f"  with the streams open, up to {args.probes} each, one at a "
          f"time, within {args.budget:g} s (ms to the answer or to the "
          f"{args.probe_timeout:g} s timeout; failed: refused or "
          f"unanswered):")
    print(f"  {'request':<10} {'n':>4} {'p50':>9} {'p90':>9} {'p99':>9}  "
          f"failed")
    inf = float("inf")
    for name, (ms, err) in res.items():
        p = [stack.pct(ms, q) if ms else inf for q in (50, 90, 99)]
        print(f"  {name:<10} {len(ms):4} {p[0]:9.1f} {p[1]:9.1f} "
              f"{p[2]:9.1f}  {len(err)}"
              + (f" (first: {err[0]})" if err else ""))
    p99 = {k: stack.pct(ms, 99) if ms else inf
           for k, (ms, _) in res.items()}
    print(f"streams_open={opened}")
    for k, v in p99.items():
        print(f"streams_{k}_p99_ms={v:.1f}")
    ok = {k: not res[k][1] and p99[k] <= GOAL_P99_MS for k in p99}
    stack.goal(f">= {GOAL_STREAMS} streams open while health and create "
               f"p99 <= {GOAL_P99_MS:g} ms",
               f"{opened} open, health p99 {p99['health']:.1f} ms "
               f"({len(res['health'][1])} failed), create p99 "
               f"{p99['create']:.1f} ms ({len(res['create'][1])} failed)",
               opened >= GOAL_STREAMS and ok["health"] and ok["create"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
