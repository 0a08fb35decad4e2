#!/usr/bin/python3
"""bench/density.py: how many idle sandboxes of one driver a host holds
at once, and what each costs (issue 9's density rows).

Creates up to COUNT sandboxes of DRIVER from CLIENTS clients and keeps
them all; the first refusal (any answer but 201, or no answer) stops
every client, and its status, Retry-After and error body are printed:
that is what limits the count. Each sandbox then runs `true`, and after
SETTLE seconds the bench prints, per sandbox held:

  host memory   the fall of MemAvailable since SETTLE seconds before the
                first create, divided by the count (other work on the
                host moves it too: on a shared machine it is noisy)
  Pss           of the processes serving the sandboxes: each shim and
                its descendants (ns: jail init and agent; vm: QEMU and
                its log copier), from /proc/<pid>/smaps_rollup
  ns            PostgreSQL's client connections (pg_stat_activity,
                through the stack's own socket) against max_connections
  vm            the QEMUs' memory table of bench/vmrss.py and the CPU
                the idle VMs use over WINDOW seconds (bench/vmidle.py)

then each figure beside its goal, met / NOT met, and deletes everything
(CLIENTS at a time).

  density.py --url URL --key-file STATE/api-key --state STATE \\
             --driver ns|vm [--count 1000] [--clients 4] [--settle 5]
             [--window 10]
"""
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import stack
import vmidle
import vmrss

MIB = 1024.0
GOALS = {  # issue 9: sandboxes held at once, MiB or % of a core each
    "ns": {"count": 1000, "mib": 4.0, "pg": 100},
    "vm": {"count": 100, "cpu_pct": 0.5},
}


class Fill:
    """Creates up to count sandboxes from several clients; the first
    refusal stops them all."""

    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.started = 0
        self.ids = []
        self.refusal = None

    def _next(self):
        with self.lock:
            if self.refusal is not None or self.started >= self.args.count:
                return False
            self.started += 1
            return True

    def _refused(self, what):
        with self.lock:
            if self.refusal is None:
                self.refusal = what

    def client(self, _):
        a = self.args
        api = stack.Api(a.url, a.key)
        while self._next():
            body = {"template": "minimal", "driver": a.driver,
                    "timeout": a.timeout}
            try:
                r = api.request("POST", "/v1/sandboxes", body, timeout=300)
            except Exception as e:  # no answer: as much a limit
                self._refused(f"no answer ({e})")
                return
            if r.status_code != 201:
                self._refused(f"{r.status_code} (Retry-After: "
                              f"{r.headers.get('Retry-After', 'none')}) "
                              f"{r.text.strip()[:400]}")
                return
            with self.lock:
                self.ids.append(r.json()["id"])

    def run(self):
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=self.args.clients) as ex:
            list(ex.map(self.client, range(self.args.clients)))
        return time.monotonic() - t0


def each(args, fn, ids):
    """fn(api, sid) for every id from CLIENTS clients; the failures."""
    local = threading.local()

    def one(sid):
        if not hasattr(local, "api"):
            local.api = stack.Api(args.url, args.key)
        try:
            return fn(local.api, sid)
        except Exception as e:  # report, carry on
            return f"{sid}: {e}"

    with ThreadPoolExecutor(max_workers=args.clients) as ex:
        return [f for f in ex.map(one, ids) if f]


def run_true(api, sid):
    st, res = api.call("POST", f"/v1/sandboxes/{sid}/exec",
                       {"cmd": ["true"]})
    return None if (res or {}).get("exit_code") == 0 else f"{sid}: {res}"


def delete(api, sid):
    st, _ = api.call("DELETE", f"/v1/sandboxes/{sid}")
    return None if st in (204, 404) else f"{sid}: DELETE answered {st}"


def psql(state, sql):
    """One value from the stack's PostgreSQL, as text, or why not."""
    p = subprocess.run(["psql", "-h", f"{state}/run/pg", "-U", "airlock",
                        "-d", "airlock", "-XtAq", "-c", sql],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=60)
    out = p.stdout.strip()
    return out if p.returncode == 0 else f"(psql failed: {out[:200]})"


def pg_connections(state):
    """(client connections but this one, max_connections)."""
    n = psql(state, "SELECT count(*) FROM pg_stat_activity WHERE "
             "backend_type = 'client backend' AND pid <> pg_backend_pid()")
    return n, psql(state, "SHOW max_connections")


def served_by(state, ids):
    """{sandbox id: [shim, its descendants...]} of the ids found."""
    ppids, by_sid = stack.parents(), stack.shims(state)
    return {sid: [by_sid[sid]] + stack.tree(by_sid[sid], ppids)
            for sid in ids if sid in by_sid}


def main():
    ap = stack.parser(__doc__)
    ap.add_argument("--driver", choices=("ns", "vm"), required=True)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--settle", type=float, default=5)
    ap.add_argument("--window", type=float, default=10)
    ap.add_argument("--timeout", type=int, default=3600,
                    help="the sandboxes' lifetime, s")
    args = stack.parse(ap)
    d, goal = args.driver, GOALS[args.driver]

    # What an earlier row freed is still coming back for a moment.
    time.sleep(args.settle)
    avail0 = stack.mem_available_kib()
    fill = Fill(args)
    try:
        wall = fill.run()
        ids = fill.ids
        n = len(ids)
        print(f"\nDensity, {d}: {n} idle sandboxes held at once (asked for "
              f"{args.count}, {args.clients} clients, {wall:.1f} s to "
              f"create, {n / wall:.1f} creates/s)")
        if fill.refusal is not None:
            print(f"  stopped at the first refusal, create #{n + 1}: "
                  f"{fill.refusal}")
        pg_at_refusal = pg_connections(args.state)
        if n == 0:
            return 1
        bad = each(args, run_true, ids)
        if bad:
            print(f"  `true` failed in {len(bad)} sandboxes, first: "
                  f"{bad[0]}")
        time.sleep(args.settle)
        avail1 = stack.mem_available_kib()
        procs = served_by(args.state, ids)
        tot = stack.rollup_sum(p for ps in procs.values() for p in ps)
        shims = stack.rollup_sum(ps[0] for ps in procs.values())
        host_mib = (avail0 - avail1) / MIB / n
        pss_mib = tot.get("Pss", 0) / MIB / n
        print(f"  host memory per sandbox  {host_mib:8.2f} MiB   "
              f"(MemAvailable {avail0 / MIB:.0f} -> {avail1 / MIB:.0f} "
              f"MiB; noisy on a shared host)")
        print(f"  Pss per sandbox          {pss_mib:8.2f} MiB   "
              f"(shim {shims.get('Pss', 0) / MIB / n:.2f}, the rest "
              f"{(tot.get('Pss', 0) - shims.get('Pss', 0)) / MIB / n:.2f}; "
              f"{sum(map(len, procs.values()))} processes of "
              f"{len(procs)} sandboxes)")
        print(f"  PostgreSQL client connections: {pg_at_refusal[0]} "
              f"(max_connections {pg_at_refusal[1]})")
        if d == "vm":
            pairs = stack.vm_pairs("density", args.state, ids)
            vmrss.report(n, stack.rollup_sum(q for _, q in pairs))
            cpu = vmidle.IdleCpu(pairs, args.window)
            cpu_pct = cpu.qemu + cpu.shim
            print(f"  idle CPU per VM over {cpu.secs:.0f} s: QEMU "
                  f"{cpu.qemu:.2f} % + shim {cpu.shim:.2f} % of a core "
                  f"(busiest QEMU {cpu.worst:.2f} %)")
        print(f"density_{d}_held={n}")
        print(f"density_{d}_host_mib_per_sandbox={host_mib:.2f}")
        print(f"density_{d}_pss_mib_per_sandbox={pss_mib:.2f}")
        print(f"density_{d}_pg_connections={pg_at_refusal[0]}")
        stack.goal(f"idle {d} sandboxes held at once >= {goal['count']}",
                   n, n >= goal["count"])
        if d == "ns":
            stack.goal(f"host memory per idle ns sandbox <= {goal['mib']:g} "
                       f"MiB", f"{host_mib:.2f} MiB", host_mib <= goal["mib"])
            pg = pg_at_refusal[0]
            stack.goal(f"PostgreSQL connections at {n} sandboxes <= "
                       f"{goal['pg']}", pg,
                       pg.isdigit() and int(pg) <= goal["pg"])
        else:
            print(f"density_vm_idle_cpu_pct_per_vm={cpu_pct:.2f}")
            stack.goal(f"idle CPU per VM <= {goal['cpu_pct']:g} % of a core",
                       f"{cpu_pct:.2f} %", cpu_pct <= goal["cpu_pct"])
    finally:
        t0 = time.monotonic()
        bad = each(args, delete, fill.ids)
        print(f"  deleted {len(fill.ids) - len(bad)} of {len(fill.ids)} in "
              f"{time.monotonic() - t0:.1f} s" +
              (f"; first failure: {bad[0]}" if bad else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
