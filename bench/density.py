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
import re
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


def pg_connections(state):
    """(client connections, max_connections, how they were counted).
    pg_stat_activity through the stack's socket where PostgreSQL lets
    psql in; at max_connections it does not, and the count is of the
    postmaster's client backends ("postgres: USER DB [local] ...")."""
    p = subprocess.run(
        ["psql", "-h", f"{state}/run/pg", "-U", "airlock", "-d", "airlock",
         "-XtAq", "-F", " ", "-c",
         "SELECT count(*), current_setting('max_connections') FROM "
         "pg_stat_activity WHERE backend_type = 'client backend' AND "
         "pid <> pg_backend_pid()"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=60)
    if p.returncode == 0 and len(p.stdout.split()) == 2:
        n, most = p.stdout.split()
        return int(n), most, "pg_stat_activity"
    with open(f"{state}/pg/postmaster.pid") as f:
        pm = int(f.readline())
    with open(f"/proc/{pm}/cmdline", "rb") as f:
        args = f.read().decode(errors="replace").split("\0")
    most = next((a.split("=", 1)[1] for a in args
                 if a.startswith("max_connections=")), "?")
    n = 0
    for pid, pp in stack.parents().items():
        if pp == pm and re.match(r"postgres: \S+ \S+ \[local\]",
                                 stack.cmdline(pid)):
            n += 1
    why = p.stdout.strip().splitlines()[-1:] or ["?"]
    return n, most, f"client backends; psql was refused: {why[0][:120]}"


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
        pg, pg_max, pg_how = pg_connections(args.state)
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
        print(f"  PostgreSQL client connections: {pg} of max_connections "
              f"{pg_max} ({pg_how})")
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
        print(f"density_{d}_pg_connections={pg}")
        stack.goal(f"idle {d} sandboxes held at once >= {goal['count']}",
                   n, n >= goal["count"])
        if d == "ns":
            stack.goal(f"host memory per idle ns sandbox <= {goal['mib']:g} "
                       f"MiB", f"{host_mib:.2f} MiB", host_mib <= goal["mib"])
            stack.goal(f"PostgreSQL connections at {n} sandboxes <= "
                       f"{goal['pg']}", pg, pg <= goal["pg"])
        else:
            print(f"density_vm_idle_cpu_pct_per_vm={cpu_pct:.2f}")
            stack.goal(f"idle CPU per VM <= {goal['cpu_pct']:g} % of a core",
                       f"{cpu_pct:.2f} %", cpu_pct <= goal["cpu_pct"])
    finally:
        delete_all(args, fill.ids)
    return 0


def delete_all(args, ids):
    """Delete ids, again for those refused (at max_connections even a
    DELETE may get 503), a few passes at most; says what is left."""
    t0, left, first = time.monotonic(), list(ids), None
    for attempt in range(6):
        if attempt:
            time.sleep(2)
        bad = each(args, delete, left)
        first = first or (bad[0] if bad else None)
        left = [b.split(":", 1)[0] for b in bad]
        if not left:
            break
    print(f"  deleted {len(ids) - len(left)} of {len(ids)} in "
          f"{time.monotonic() - t0:.1f} s" +
          (f"; first refusal: {first}" if first else "") +
          (f"; {len(left)} left to the stack's teardown" if left else ""))


if __name__ == "__main__":
    sys.exit(main())
