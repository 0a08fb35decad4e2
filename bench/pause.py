#!/usr/bin/python3
"""bench/pause.py: pause -> resume through the API, beside the mechanism
alone (issue 25's first benchmark row).

For each driver GET /v1/info lists (vm is skipped, and says so, where it
is not): one sandbox of template minimal with a busy counter inside (a
shell loop writing an ever larger number to /tmp/count, never sleeping)
and IDLE idle `sleep` processes, then ROUNDS rounds of, in turn:

  api   POST /v1/sandboxes/{id}/pause, then .../resume, through nginx
        with the API key on one kept-alive connection: the client's time
        from sending each request to having read its answer (200 with
        the sandbox in state paused, then running: checked every round);
  get   GET /v1/sandboxes/{id} on the same connection: the floor of an
        API call (nginx, fcgi, key check, a database read) that pause
        and resume add their work to;
  shim  the PAUSE and RESUME frames fcgi sends, straight to the shim's
        control socket: the shim, the agent's acknowledgement and the
        freezer or QMP, without HTTP and the database's operation rows;
  peer  the same stop and start without Airlock: ns, FROZEN then THAWED
        written to the sandbox's v1 freezer cgroup (the leaf named after
        its id), each until freezer.state reads it back (read every
        0.1 ms); vm, QEMU's monitor is a socketpair the shim holds, so
        QMP stop/cont cannot be reached from outside: the peer is
        kill -STOP / -CONT of the sandbox's QEMU process, each until
        every QEMU thread shows stopped (T) in /proc, then none.

All four alternate within each round, so the machine's load falls on
them alike. Prints p50/p90/p99 of each, the ratio API/peer, and the
goal (issue 25: <= 10 ms each under TCG, judged on the p50). Then checks
the sandbox still works: the counter advances and an exec answers.

  pause.py --url http://127.0.0.1:8080 --key-file STATE/api-key \\
           --state STATE [--rounds 100] [--idle 50] [--driver ns|vm]
"""
import http.client
import json
import os
import signal
import socket
import struct
import sys
import time

import stack
from stack import cgroup_path

GOAL_MS = 10.0
# Between the peer's looks: short beside the figures, and leaves the CPU
# to what is being stopped (2 cores, one taken by the counter).
POLL_S = 0.0001
COUNTER = "i=0; while :; do i=$((i+1)); echo $i > /tmp/count; done"


class Conn:
    """Calls with no body on one kept-alive connection to nginx: less
    client in the figure than a requests session."""

    def __init__(self, args):
        self.c = http.client.HTTPConnection(args.host, args.port,
                                            timeout=30)
        self.h = {"Authorization": "Bearer " + args.key,
                  "Accept": "application/json", "Content-Length": "0"}

    def call(self, method, path):
        """(ms to the whole answer, status, body)."""
        t = time.monotonic()
        self.c.request(method, path, headers=self.h)
        r = self.c.getresponse()
        body = r.read()
        return (time.monotonic() - t) * 1000.0, r.status, body


def api_step(conn, sid, what, want):
    ms, st, body = conn.call("POST", f"/v1/sandboxes/{sid}/{what}")
    state = None
    if st == 200:
        try:
            state = json.loads(body).get("state")
        except ValueError:
            pass
    if st != 200 or state != want:
        raise SystemExit(f"pause: {what} of {sid} answered {st} after "
                         f"{ms:.1f} ms: {body[:300]!r}")
    return ms


def api_get(conn, sid):
    ms, st, body = conn.call("GET", f"/v1/sandboxes/{sid}")
    if st != 200:
        raise SystemExit(f"pause: GET {sid} answered {st}: {body[:300]!r}")
    return ms


class ShimCtl:
    """PAUSE and RESUME frames straight to the sandbox's shim, as fcgi
    sends them (core/proto/agentproto.h: a connection per request, the
    frame as AL_REQ_ID_CLIENT, read to its RESULT or ERROR), without
    HTTP or the database: what the API adds to the shim's part."""

    HDR = struct.Struct(">IHHII")  # magic, type, flags, id, len
    MAGIC, PAUSE, RESUME, RESULT, ERROR, ID = \
        0x414C4631, 43, 44, 14, 15, 1

    def __init__(self, state, sid):
        self.path = os.path.join(state, "run", "sbx", sid + ".sock")

    def _read(self, c, n):
        b = b""
        while len(b) < n:
            chunk = c.recv(n - len(b))
            if not chunk:
                raise SystemExit(f"pause: {self.path} closed mid-frame")
            b += chunk
        return b

    def call(self, ftype):
        t = time.monotonic()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(30)
            c.connect(self.path)
            c.sendall(self.HDR.pack(self.MAGIC, ftype, 0, self.ID, 2) +
                      b"{}")
            while True:
                _, typ, _, fid, n = self.HDR.unpack(
                    self._read(c, self.HDR.size))
                body = self._read(c, n)
                if fid == self.ID and typ in (self.RESULT, self.ERROR):
                    break
        ms = (time.monotonic() - t) * 1000.0
        if typ != self.RESULT:
            raise SystemExit(f"pause: the shim answered frame {ftype} "
                             f"with {body[:300]!r}")
        return ms


class Freezer:
    """The ns peer: the sandbox's freezer cgroup written and read back
    (v1 freezer.state; cgroup.freeze and cgroup.events on a v2 host)."""

    name = "freezer"
    label = "freezer cgroup written directly, read back until done"

    def __init__(self, sid):
        self.path = cgroup_path("freezer", sid, "freezer.state",
                                "cgroup.freeze")
        self.v2 = self.path.endswith("cgroup.freeze")
        if not os.path.exists(self.path):
            raise SystemExit(f"pause: no freezer cgroup {self.path} for "
                             f"{sid}")
        self.events = os.path.join(os.path.dirname(self.path),
                                   "cgroup.events")
        self.slow = 0  # writes not done at the first read back
        tasks = cgroup_path("freezer", sid, "tasks", "cgroup.procs")
        with open(tasks) as f:
            self.tasks = len(f.read().split())

    def _done(self, frozen):
        if self.v2:
            with open(self.events) as f:
                return f"frozen {int(frozen)}" in f.read()
        with open(self.path) as f:
            return f.read().strip() == ("FROZEN" if frozen else "THAWED")

    def _set(self, frozen):
        val = ("1" if frozen else "0") if self.v2 else \
            ("FROZEN" if frozen else "THAWED")
        t = time.monotonic()
        with open(self.path, "w") as f:
            f.write(val)
        first = True
        while not self._done(frozen):
            if first:
                self.slow += 1
                first = False
            time.sleep(POLL_S)
            if time.monotonic() - t > 2:
                raise SystemExit(f"pause: {self.path} not {val} after 2 s")
        return (time.monotonic() - t) * 1000.0

    def stop(self):
        return self._set(True)

    def cont(self):
        return self._set(False)


class Sigstop:
    """The vm peer: SIGSTOP / SIGCONT of the sandbox's QEMU process, each
    until all its threads are stopped (state T in /proc), then none."""

    name = "SIGSTOP"
    label = ("kill -STOP / -CONT of the sandbox's QEMU (QMP stop/cont "
             "is not reachable from outside: the shim holds the monitor)")

    def __init__(self, state, sid):
        self.pid = stack.vm_pairs("pause", state, [sid])[0][1]
        self.slow = 0  # signals not acted on at the first look
        self.tasks = len(os.listdir(f"/proc/{self.pid}/task"))

    def _stopped(self):
        """How many of QEMU's threads are stopped, of how many."""
        n = stopped = 0
        base = f"/proc/{self.pid}/task"
        for tid in os.listdir(base):
            try:
                with open(f"{base}/{tid}/stat") as f:
                    st = f.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            n += 1
            stopped += st in ("T", "t")
        return stopped, n

    def _signal(self, sig, done):
        t = time.monotonic()
        os.kill(self.pid, sig)
        first = True
        while not done(*self._stopped()):
            if first:
                self.slow += 1
                first = False
            time.sleep(POLL_S)
            if time.monotonic() - t > 2:
                raise SystemExit(f"pause: QEMU {self.pid} did not act on "
                                 f"{sig.name} in 2 s")
        return (time.monotonic() - t) * 1000.0

    def stop(self):
        return self._signal(signal.SIGSTOP, lambda s, n: n > 0 and s == n)

    def cont(self):
        return self._signal(signal.SIGCONT, lambda s, n: s == 0)


def exec_ok(api, sid, cmd, timeout=60):
    st, res = api.call("POST", f"/v1/sandboxes/{sid}/exec",
                       {"cmd": cmd, "timeout": timeout})
    if st != 200 or (res or {}).get("exit_code") != 0:
        raise SystemExit(f"pause: exec {cmd[:2]} in {sid} answered {st}: "
                         f"{res}")
    return res


def counter(api, sid):
    """The counter's value: its loop truncates the file before writing,
    so a read may find it empty; read again then."""
    for _ in range(50):
        out = exec_ok(api, sid, ["cat", "/tmp/count"])["stdout"].strip()
        if out.isdigit():
            return int(out)
        time.sleep(0.05)
    raise SystemExit(f"pause: /tmp/count in {sid} never held a number")


def setup(api, sid, idle):
    # Detached: both outlive their exec.
    exec_ok(api, sid, ["sh", "-c", f"({COUNTER}) >/dev/null 2>&1 &"])
    exec_ok(api, sid, ["sh", "-c", f"for i in $(seq {idle}); do "
                       "sleep 86400 >/dev/null 2>&1 & done"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st, res = api.call("POST", f"/v1/sandboxes/{sid}/exec",
                           {"cmd": ["cat", "/tmp/count"]})
        if st == 200 and (res or {}).get("exit_code") == 0:
            return
        time.sleep(0.2)
    raise SystemExit(f"pause: the counter in {sid} did not start")


def check(api, sid, tag):
    """The sandbox works after the rounds: running, counter advancing,
    an exec answers."""
    st, sb = api.call("GET", f"/v1/sandboxes/{sid}")
    if st != 200 or sb.get("state") != "running":
        raise SystemExit(f"pause: {tag}: {sid} after the rounds: {st} {sb}")
    a = counter(api, sid)
    time.sleep(1)
    b = counter(api, sid)
    if b <= a:
        raise SystemExit(f"pause: {tag}: the counter stood still after "
                         f"the rounds ({a} then {b}, 1 s apart)")
    exec_ok(api, sid, ["true"])
    return a, b


def row(name, xs):
    p = [stack.pct(xs, q) for q in (50, 90, 99)]
    print(f"  {name:<16} {p[0]:8.2f} {p[1]:8.2f} {p[2]:8.2f}")
    return p


def bench(args, driver, accel):
    api = args.api
    sid = api.create("pause", driver, 1800)["id"]
    try:
        setup(api, sid, args.idle)
        peer = Freezer(sid) if driver == "ns" else Sigstop(args.state, sid)
        conn = Conn(args)
        shim = ShimCtl(args.state, sid)
        res = {k: [] for k in ("api_pause", "api_resume", "api_get",
                               "shim_pause", "shim_resume", "peer_stop",
                               "peer_cont")}
        for _ in range(args.rounds):
            res["api_pause"].append(api_step(conn, sid, "pause", "paused"))
            res["api_resume"].append(api_step(conn, sid, "resume",
                                              "running"))
            res["api_get"].append(api_get(conn, sid))
            res["shim_pause"].append(shim.call(ShimCtl.PAUSE))
            res["shim_resume"].append(shim.call(ShimCtl.RESUME))
            res["peer_stop"].append(peer.stop())
            res["peer_cont"].append(peer.cont())
        conn.c.close()
        a, b = check(api, sid, driver)
    finally:
        api.delete_all("pause", [sid])

    what = "the jail's processes" if driver == "ns" else "QEMU's threads"
    print(f"\nPause and resume, {driver}"
          + (f" (accel {accel})" if driver == "vm" else "")
          + f": {args.rounds} rounds on one sandbox (template minimal, a "
          f"busy counter loop and {args.idle} idle sleeps inside), ms, "
          "client side")
    print(f"  api: POST pause / resume through nginx (api get: GET of the"
          f" sandbox, the floor of a call); shim: the same frames to the "
          f"shim's socket, no HTTP or database; peer: {peer.label} "
          f"({peer.tasks} of {what})")
    print(f"  {'':16} {'p50':>8} {'p90':>8} {'p99':>8}")
    p = {k: row(k.replace("_", " "), v) for k, v in res.items()}
    ratio = {k: p[k][0] / p[j][0] if p[j][0] > 0 else float("inf")
             for k, j in (("api_pause", "peer_stop"),
                          ("api_resume", "peer_cont"))}
    print(f"  api / peer, p50: pause {ratio['api_pause']:.1f}x, resume "
          f"{ratio['api_resume']:.1f}x")
    print(f"  peer not done at its first look: {peer.slow} of "
          f"{2 * args.rounds} steps")
    print(f"  after the rounds: running, counter {a} -> {b} in 1 s, exec "
          "answers")
    key = f"pause_{driver}"
    for k, (p50, p90, p99) in p.items():
        print(f"{key}_{k}_p50_ms={p50:.2f}")
        print(f"{key}_{k}_p90_ms={p90:.2f}")
        print(f"{key}_{k}_p99_ms={p99:.2f}")
    for k, r in ratio.items():
        print(f"{key}_{k}_vs_{peer.name}_p50_ratio={r:.1f}")
    for api_k in ("api_pause", "api_resume"):
        stack.goal(f"{driver} {api_k.split('_')[1]} p50 <= {GOAL_MS:g} ms",
                   f"{p[api_k][0]:.2f} ms", p[api_k][0] <= GOAL_MS,
                   issue=25)


def main():
    ap = stack.parser(__doc__)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--idle", type=int, default=50,
                    help="idle sleep processes beside the counter")
    ap.add_argument("--driver", action="append",
                    help="only this driver (repeatable); default: each "
                    "that GET /v1/info lists")
    args = stack.parse(ap)
    for d, accel in stack.drivers(args, "pause", ["ns", "vm"]):
        bench(args, d, accel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
