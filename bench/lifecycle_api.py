#!/usr/bin/python3
"""bench/lifecycle_api.py: suspend, resume and fork through the API, each
beside a peer in the same run (issue 25's benchmark table, after pause,
which bench/pause.py measures).

For each driver GET /v1/info lists (vm skipped, and saying so, where it
is not listed). Meant for a stack without a warm pool
(AIRLOCK_WARM_POOL=0, AIRLOCK_WARM_POOL_VM=0: bench/lifecycle_api.sh
starts one), so that the creates it compares with are cold.

  suspend   one sandbox (template minimal), ROUNDS rounds of: the guest
            writes WRITE_MIB MiB (vm: dd of /dev/urandom into a tmpfs,
            guest RAM; ns: into /root, its files), POST suspend (vm with
            its memory; ns {"memory": false}) timed to its 200, then
            POST resume timed to its 200 and on to the answer of a first
            exec (`true`) after it. Checked every round: the file is
            still there, whole (its size). The peer of the resume, in
            the same rounds: POST /v1/sandboxes of the same template
            (cold: no warm pool) to the answer of its first exec.
  footprint after the last suspend: the processes left for the sandbox
            (its shim, QEMU: none expected), and its snapshot's bytes
            (GET /v1/snapshots/{id}, and du of STATE/pool/snapshots/ID)
            beside the pages the guest wrote (the shim's log line for
            the suspend names them).
  fork      a parent with a busy loop inside (it keeps its vCPU thread
            running, so that the stop shows), POST fork {"count": N}
            timed to its 201 (all N running: checked by an exec in
            each). vm: the parent's pause window, seen from the host: a
            thread of its QEMU polled every POLL ms for the longest
            stretch in which it was not runnable (state R) while the
            fork was under way; the thread is the QEMU thread that used
            the most CPU just before (the guest's busy vCPU). The guest
            cannot time it itself: its clock stops with it. Peer: N
            creates of the same template from N clients at once, to
            the last one's first exec answer.
  memory    vm: Pss of the N children's QEMUs (/proc/<pid>/smaps_rollup)
            beside the N created sandboxes' QEMUs, after IDLE s.

Prints p50/p90 (and p99 where there are rounds enough) with key=value
lines, the ratios and the goals of issue 25 (judged on TCG here).

  lifecycle_api.py --url URL --key-file STATE/api-key --state STATE
      [--rounds 5] [--fork 10] [--write-mib 64] [--driver ns|vm]
"""
import concurrent.futures
import os
import re
import subprocess
import sys
import threading
import time

import stack

GOAL = {"suspend_ms": 250.0, "resume_p50_ms": 350.0, "fork_window_ms": 150.0,
        "fork_all_ms": 2500.0}
POLL_S = 0.001
# A busy loop in the fork's parent, shell builtins only, that ends in a
# fork child: each child gets its own hostname, and 10 children spinning
# would starve the 2 cores (and the creates beside them). Its pid is in
# /tmp/busy.pid for the parent's to be stopped after the fork.
BUSY = ("(read h </proc/sys/kernel/hostname; while read n "
        "</proc/sys/kernel/hostname && [ \"$n\" = \"$h\" ]; do :; done) "
        ">/dev/null 2>&1 & echo $! >/tmp/busy.pid")


def ms_since(t):
    return (time.monotonic() - t) * 1000.0


def fail(what, st, body):
    raise SystemExit(f"lifecycle: {what} answered {st}: {str(body)[:400]}")


def exec_sh(api, sid, sh, timeout=120):
    st, res = api.call("POST", f"/v1/sandboxes/{sid}/exec",
                       {"cmd": ["sh", "-c", sh], "timeout": timeout},
                       timeout=timeout + 30)
    if st != 200 or (res or {}).get("exit_code") != 0:
        fail(f"exec {sh[:60]!r} in {sid}", st, res)
    return res.get("stdout", "")


def cold_create(api, driver):
    """ms from POST /v1/sandboxes to the answer of its first exec."""
    t = time.monotonic()
    sid = api.create("lifecycle", driver, 1800)["id"]
    exec_sh(api, sid, "true")
    return ms_since(t), sid


def write_file(api, driver, sid, mib):
    if driver == "vm":
        # tmpfs: the pages are guest RAM, which the suspend saves.
        sh = ("mkdir -p /fill && { grep -q ' /fill ' /proc/mounts || "
              f"mount -t tmpfs -o size={mib + 16}m fill /fill; }} && "
              f"dd if=/dev/urandom of=/fill/a bs=1M count={mib} 2>/dev/null")
    else:
        sh = (f"dd if=/dev/urandom of=/root/a bs=1M count={mib} "
              "2>/dev/null && sync")
    exec_sh(api, sid, sh)
    return "/fill/a" if driver == "vm" else "/root/a"


def suspend(api, driver, sid):
    body = {"memory": False} if driver == "ns" else None
    t = time.monotonic()
    st, res = api.call("POST", f"/v1/sandboxes/{sid}/suspend", body)
    ms = ms_since(t)
    if st != 200 or (res or {}).get("state") != "suspended":
        fail(f"suspend of {sid}", st, res)
    return ms, res


def resume(api, sid):
    """(ms to the resume's 200, ms to the first exec's answer, body)."""
    t = time.monotonic()
    st, res = api.call("POST", f"/v1/sandboxes/{sid}/resume")
    api_ms = ms_since(t)
    if st != 200 or (res or {}).get("state") != "running":
        fail(f"resume of {sid}", st, res)
    exec_sh(api, sid, "true")
    return api_ms, ms_since(t), res


def pcts(xs):
    ps = (50, 90, 99) if len(xs) >= 20 else (50, 90)
    return {p: stack.pct(xs, p) for p in ps}


def row(key, label, xs):
    p = pcts(xs)
    cells = "  ".join(f"p{q} {v:8.1f}" for q, v in p.items())
    print(f"  {label:<44} {cells}   (n={len(xs)})")
    for q, v in p.items():
        print(f"{key}_p{q}_ms={v:.1f}")
    return p


def shim_line(state, snap):
    """The shim's log line of the snapshot snap: (bytes, dirty pages)."""
    pat = re.compile(r"snapshot " + re.escape(snap) +
                     r" \((memory|files only), (\d+) bytes, (\d+) dirty")
    try:
        with open(os.path.join(state, "log", "shim.log"),
                  errors="replace") as f:
            for line in f:
                m = pat.search(line)
                if m:
                    return int(m.group(2)), int(m.group(3))
    except OSError:
        pass
    return None, None


def left_behind(state, sid):
    """What still runs for sid: its shim, and any QEMU or process naming
    it on its command line."""
    out = []
    shim = stack.shims(state).get(sid)
    if shim is not None:
        out.append(f"shim {shim}")
    for d in os.listdir("/proc"):
        if d.isdigit() and sid in stack.cmdline(int(d)):
            out.append(f"pid {d}: {stack.cmdline(int(d))[:80]}")
    # Whatever is still in its cgroup leaf (QEMU runs in one named after
    # the sandbox, the ns jail's processes too).
    for ctrl in ("memory", "pids", "freezer"):
        tasks = stack.cgroup_path(ctrl, sid, "tasks", "cgroup.procs")
        try:
            with open(tasks) as f:
                out += [f"pid {p} in {tasks}" for p in f.read().split()]
        except OSError:
            pass
    return sorted(set(out))


def disk_bytes(path):
    """(allocated, exclusive) bytes of path on the btrfs pool: allocated
    counts extents shared with the template (its RAM file, the root's
    unchanged blocks) too; exclusive, those that are the snapshot's
    alone, what keeping it costs."""
    r = subprocess.run(["btrfs", "filesystem", "du", "-s", "--raw", path],
                       capture_output=True, text=True)
    try:
        total, excl = r.stdout.splitlines()[-1].split()[:2]
        return int(total), int(excl)
    except (IndexError, ValueError):
        return None, None


def bench_suspend(args, driver):
    api = args.api
    k = f"lc_{driver}"
    sus, res_api, res_exec, cold, made = [], [], [], [], []
    sid = api.create("lifecycle", driver, 1800)["id"]
    made.append(sid)
    try:
        exec_sh(api, sid, "true")
        last = None
        for _ in range(args.rounds):
            path = write_file(api, driver, sid, args.write_mib)
            ms, last = suspend(api, driver, sid)
            sus.append(ms)
            a, e, body = resume(api, sid)
            res_api.append(a)
            res_exec.append(e)
            got = exec_sh(api, sid, f"wc -c <{path}").strip()
            if got != str(args.write_mib << 20):
                raise SystemExit(f"lifecycle: {path} in {sid} after the "
                                 f"resume has {got} bytes")
            if driver == "vm" and body.get("resumed_cold"):
                print(f"lifecycle: vm resume of {sid} came back cold "
                      f"(resumed_cold): {body}")
            c, cid = cold_create(api, driver)
            cold.append(c)
            api.delete_all("lifecycle", [cid])
        # The footprint of a suspended sandbox: suspended once more.
        write_file(api, driver, sid, args.write_mib)
        _, last = suspend(api, driver, sid)
        snap = last.get("snapshot")
        time.sleep(1)  # the shim's exit after its answer
        procs = left_behind(args.state, sid)
        st, sn = api.call("GET", f"/v1/snapshots/{snap}")
        if st != 200:
            fail(f"GET /v1/snapshots/{snap}", st, sn)
        disk, excl = disk_bytes(os.path.join(args.state, "pool",
                                             "snapshots", snap))
        _, dirty = shim_line(args.state, snap)
        # Its writable subvolume, which a suspend releases.
        own = os.path.join(args.state, "pool", "sandboxes", sid)
        own_kept = os.path.exists(own)
    finally:
        api.delete_all("lifecycle", made)

    what = ("its memory (capture) and a read-only snapshot of its root"
            if driver == "vm" else "files only (memory: false)")
    print(f"\nSuspend and resume, {driver}"
          + (f" (accel {args.accel})" if driver == "vm" else "")
          + f": {args.rounds} rounds on one sandbox of template minimal, "
          f"the guest writing {args.write_mib} MiB before each suspend "
          f"({what}); ms, client side")
    p_sus = row(f"{k}_suspend", "suspend, POST to 200", sus)
    row(f"{k}_resume_api", "resume, POST to 200", res_api)
    p_res = row(f"{k}_resume_exec", "resume, POST to first exec answer",
                res_exec)
    p_cold = row(f"{k}_cold_create_exec",
                 "peer: cold create to first exec answer", cold)
    ratio = p_cold[50] / p_res[50] if p_res[50] > 0 else float("inf")
    print(f"  cold create / resume, p50: {ratio:.2f}x")
    print(f"{k}_cold_create_vs_resume_p50_ratio={ratio:.2f}")
    print(f"\nSuspended {driver} sandbox {sid}: processes left: "
          f"{len(procs)} {procs if procs else ''}")
    print(f"  snapshot {snap}: {sn.get('bytes')} bytes by the API; on the "
          f"pool (btrfs filesystem du of pool/snapshots/{snap}): {disk} "
          f"allocated, {excl} exclusive"
          + (f"; the guest's written pages (shim.log): {dirty} = "
             f"{dirty * 4096} bytes" if dirty else ""))
    print(f"  its writable subvolume pool/sandboxes/{sid}: "
          f"{'still there' if own_kept else 'released'}")
    print(f"{k}_suspended_processes={len(procs)}")
    print(f"{k}_suspended_subvolume_kept={int(own_kept)}")
    print(f"{k}_snapshot_api_bytes={sn.get('bytes')}")
    print(f"{k}_snapshot_allocated_bytes={disk}")
    print(f"{k}_snapshot_exclusive_bytes={excl}")
    if dirty is not None:
        print(f"{k}_snapshot_dirty_pages={dirty}")
    stack.goal(f"suspended {driver} sandbox holds 0 processes",
               f"{len(procs)}", not procs, issue=25)
    if driver == "vm":
        stack.goal(f"vm suspend, guest wrote {args.write_mib} MiB, p50 <= "
                   f"{GOAL['suspend_ms']:g} ms", f"{p_sus[50]:.1f} ms",
                   p_sus[50] <= GOAL["suspend_ms"], issue=25)
        stack.goal(f"vm resume to first exec p50 <= "
                   f"{GOAL['resume_p50_ms']:g} ms", f"{p_res[50]:.1f} ms",
                   p_res[50] <= GOAL["resume_p50_ms"], issue=25)
        if dirty:
            written = dirty * 4096
            stack.goal("suspended vm: the snapshot's own disk ~ the "
                       "written pages (exclusive <= 1.25x + 8 MiB)",
                       f"{excl} bytes vs {written}",
                       excl is not None and
                       excl <= written * 1.25 + (8 << 20), issue=25)


class Stall:
    """The longest stretch in which one thread of a QEMU was not
    runnable, polled every POLL_S from start() to stop()."""

    def __init__(self, pid):
        self.pid = pid
        self.tid = self._busiest()
        self.longest = 0.0
        self.samples = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _ticks(self):
        out = {}
        for tid in os.listdir(f"/proc/{self.pid}/task"):
            try:
                with open(f"/proc/{self.pid}/task/{tid}/stat") as f:
                    x = f.read().rsplit(")", 1)[1].split()
                out[tid] = int(x[11]) + int(x[12])
            except (OSError, IndexError, ValueError):
                pass
        return out

    def _busiest(self):
        a = self._ticks()
        time.sleep(1.0)
        b = self._ticks()
        return max(b, key=lambda t: b[t] - a.get(t, 0))

    def _state(self):
        try:
            with open(f"/proc/{self.pid}/task/{self.tid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return "?"

    def _run(self):
        since = None
        while not self._stop.is_set():
            now = time.monotonic()
            self.samples += 1
            if self._state() != "R":
                since = now if since is None else since
                self.longest = max(self.longest, (now - since) * 1000.0)
            else:
                since = None
            time.sleep(POLL_S)

    def start(self):
        self._t.start()

    def stop(self):
        self._stop.set()
        self._t.join()


def creates_at_once(args, driver, n):
    """N creates from N clients at once: ms to the last first-exec
    answer, and the ids."""
    def one(_):
        api = stack.Api(args.url, args.key)
        return cold_create(api, driver)[1]
    t = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        ids = list(ex.map(one, range(n)))
    return ms_since(t), ids


def bench_fork(args, driver):
    api, n, k = args.api, args.fork, f"lc_{driver}"
    made = []
    try:
        parent = api.create("lifecycle", driver, 1800)["id"]
        made.append(parent)
        written = 0
        if driver == "vm":
            write_file(api, driver, parent, args.write_mib)
            written = args.write_mib
        exec_sh(api, parent, BUSY)
        stall = None
        if driver == "vm":
            qemu = stack.vm_pairs("lifecycle", args.state, [parent])[0][1]
            stall = Stall(qemu)
            stall.start()
        t = time.monotonic()
        st, res = api.call("POST", f"/v1/sandboxes/{parent}/fork",
                           {"count": n}, timeout=600)
        fork_ms = ms_since(t)
        if stall is not None:
            stall.stop()
        kids = [c.get("id") for c in (res or {}).get("sandboxes", [])
                if isinstance(c, dict)]
        made += [c for c in kids if c]
        if st != 201 or len(kids) != n or not all(
                c.get("state") == "running" for c in res["sandboxes"]):
            fail(f"fork of {parent} x{n}", st, res)
        api.exec_true("lifecycle", kids)
        # The parent spun through the fork; the creates run without it.
        exec_sh(api, parent, "kill $(cat /tmp/busy.pid)")
        peer_ms, ids = creates_at_once(args, driver, n)
        made += ids
        mem = None
        if driver == "vm":
            time.sleep(args.idle)
            kid_pids = [q for _, q in stack.vm_pairs("lifecycle", args.state,
                                                     kids)]
            own_pids = [q for _, q in stack.vm_pairs("lifecycle", args.state,
                                                     ids)]
            mem = (stack.rollup_sum(kid_pids), stack.rollup_sum(own_pids))
        snap = res.get("snapshot")
        _, dirty = shim_line(args.state, snap) if snap else (None, None)
    finally:
        api.delete_all("lifecycle", made)

    print(f"\nFork x{n}, {driver}"
          + (f" (accel {args.accel}), the parent having written "
             f"{written} MiB" if driver == "vm" else "")
          + ", a busy loop running in it (not in the children: it ends on "
          "their new hostname); ms, client side")
    print(f"  fork, POST to 201 (all {n} running)         {fork_ms:9.1f}")
    print(f"  peer: {n} cold creates from {n} clients at once, to the "
          f"last first exec answer {peer_ms:9.1f}")
    ratio = peer_ms / fork_ms if fork_ms > 0 else float("inf")
    print(f"  creates / fork: {ratio:.2f}x")
    print(f"{k}_fork{n}_ms={fork_ms:.1f}")
    print(f"{k}_create{n}_at_once_ms={peer_ms:.1f}")
    print(f"{k}_create{n}_vs_fork{n}_ratio={ratio:.2f}")
    if stall is not None:
        print(f"  parent's pause window: {stall.longest:.1f} ms, the "
              f"longest stretch its busy QEMU thread {stall.tid} was not "
              f"runnable ({stall.samples} looks, every {POLL_S * 1000:g} ms,"
              " during the fork)")
        print(f"{k}_fork_parent_paused_ms={stall.longest:.1f}")
        stack.goal(f"vm fork: parent paused <= {GOAL['fork_window_ms']:g}"
                   " ms", f"{stall.longest:.1f} ms",
                   stall.longest <= GOAL["fork_window_ms"], issue=25)
    stack.goal(f"{driver} fork x{n}: all running <= "
               f"{GOAL['fork_all_ms']:g} ms", f"{fork_ms:.1f} ms",
               fork_ms <= GOAL["fork_all_ms"], issue=25)
    if mem is not None:
        kid, own = mem
        mib = 1024.0
        print(f"\nMemory of the {n} fork children beside {n} created "
              "sandboxes (QEMU processes, smaps_rollup, MiB per sandbox, "
              f"after {args.idle:g} s idle)")
        print(f"  {'':16} {'children':>10} {'created':>10}")
        for key in ("Rss", "Pss", "Private_Dirty"):
            print(f"  {key:16} {kid.get(key, 0) / mib / n:10.1f} "
                  f"{own.get(key, 0) / mib / n:10.1f}")
        kp, op = kid.get("Pss", 0) / mib / n, own.get("Pss", 0) / mib / n
        print(f"{k}_fork_child_pss_mib={kp:.1f}")
        print(f"{k}_created_pss_mib={op:.1f}")
        d_mib = dirty * 4096 / 1048576 if dirty else written
        print(f"  the parent's captured pages: {d_mib:.1f} MiB")
        stack.goal("fork child Pss <= a created sandbox's + the parent's "
                   "written pages", f"{kp:.1f} vs {op:.1f} + {d_mib:.1f} "
                   "MiB", kp <= op + d_mib, issue=25)


def main():
    ap = stack.parser(__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--fork", type=int, default=10)
    ap.add_argument("--write-mib", type=int, default=64)
    ap.add_argument("--idle", type=float, default=5)
    ap.add_argument("--driver", action="append",
                    help="only this driver (repeatable); default: each "
                    "that GET /v1/info lists")
    args = stack.parse(ap)
    for d, accel in stack.drivers(args, "lifecycle", ["vm", "ns"]):
        args.accel = accel
        bench_suspend(args, d)
        bench_fork(args, d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
