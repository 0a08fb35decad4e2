"""bench/stack.py: what the Python benches share about a running stack.

  parser(doc)        the --url / --key-file [/ --state] every bench takes;
  parse(ap)          parses them, reads the key, and adds args.api
  Api                the API as a client sees it (one keep-alive session)
  held(api, ...)     sandboxes created for a measurement, deleted after
  drivers(args, ...) the drivers asked for that GET /v1/info lists
  shims(state)       {sandbox id: the airlock-shim serving it}, one pass
  parents(), tree()  the process tree, read once for many sandboxes
  vm_pairs(...)      (shim, QEMU) of each vm sandbox
  rollup(), mem_kib(), cpu_ticks()  memory and CPU of one process
  pct(xs, p)         the percentile every bench prints

Which processes belong to a stack (the AIRLOCK_STATE in their
environment) is decided in one place, the integration tests' conftest,
imported from here.
"""
import argparse
import contextlib
import os
import sys
import urllib.parse

import requests

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from conftest import (cgroup_path, cmdline, is_qemu, mem_kib,  # noqa: E402,F401
                      proc_pids)

HZ = os.sysconf("SC_CLK_TCK")


def parser(doc, state=True):
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--key-file", required=True)
    if state:
        ap.add_argument("--state", required=True)
    return ap


def parse(ap):
    args = ap.parse_args()
    u = urllib.parse.urlsplit(args.url)
    args.host, args.port = u.hostname, u.port or 80
    with open(args.key_file) as f:
        args.key = f.read().strip()
    args.api = Api(args.url, args.key)
    return args


class Api:
    """JSON calls on one keep-alive session. A session is not shared
    between threads: give each client thread its own Api."""

    def __init__(self, url, key):
        self.url = url
        self.key = key
        self.s = requests.Session()
        self.s.headers["Authorization"] = f"Bearer {key}"
        self.s.headers["Accept"] = "application/json"

    def request(self, method, path, body=None, timeout=120):
        """The response itself (status, headers, text)."""
        return self.s.request(method, self.url + path, json=body,
                              timeout=timeout)

    def call(self, method, path, body=None, timeout=120):
        """(status, decoded JSON body or None)."""
        r = self.request(method, path, body, timeout)
        try:
            return r.status_code, (r.json() if r.content else None)
        except ValueError:
            return r.status_code, {"raw": r.text[:300]}

    def create(self, tag, driver, timeout):
        st, sb = self.call("POST", "/v1/sandboxes",
                           {"template": "minimal", "driver": driver,
                            "timeout": timeout})
        if st != 201:
            raise SystemExit(f"{tag}: create answered {st}: {sb}")
        return sb

    def exec_true(self, tag, ids):
        """`true` in each sandbox: every one has run a command."""
        for sid in ids:
            st, res = self.call("POST", f"/v1/sandboxes/{sid}/exec",
                                {"cmd": ["true"]})
            if (res or {}).get("exit_code") != 0:
                raise SystemExit(f"{tag}: exec in {sid}: {res}")

    def delete_all(self, tag, ids):
        for sid in ids:
            try:
                self.call("DELETE", f"/v1/sandboxes/{sid}")
            except Exception as e:  # report, keep deleting
                print(f"{tag}: delete {sid}: {e}", file=sys.stderr)


@contextlib.contextmanager
def held(api, tag, count, driver, timeout):
    """COUNT sandboxes of DRIVER, each having run `true`; all deleted
    when the block ends, however it ends."""
    ids = []
    try:
        for _ in range(count):
            ids.append(api.create(tag, driver, timeout)["id"])
        api.exec_true(tag, ids)
        yield ids
    finally:
        api.delete_all(tag, ids)


def drivers(args, tag, order):
    """[(driver, its accelerator or None)] of the drivers in args.driver
    (default order) that GET /v1/info lists; one that is not is skipped,
    saying so."""
    st, info = args.api.call("GET", "/v1/info")
    if st != 200:
        raise SystemExit(f"{tag}: GET /v1/info answered {st}: {info}")
    listed, out = info.get("drivers", []), []
    for d in args.driver or order:
        if d not in listed:
            print(f"\n{tag}: {d} skipped: the stack does not list the {d} "
                  f"driver (GET /v1/info drivers: {listed})")
            continue
        out.append((d, info.get("vm_accel") if d == "vm" else None))
    return out


def shims(state):
    """{sandbox id: pid of the airlock-shim listening on
    run/sbx/<id>.sock}, from one read of /proc/net/unix and of the
    shims' fd tables. Accepted connections carry the listener's path
    too: any inode with the path leads to the shim."""
    sbx = os.path.join(state, "run", "sbx") + "/"
    inode_sid = {}
    with open("/proc/net/unix") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 8 and parts[7].startswith(sbx) and \
                    parts[7].endswith(".sock"):
                sid = parts[7][len(sbx):-len(".sock")]
                inode_sid[f"socket:[{parts[6]}]"] = sid
    out = {}
    for pid in proc_pids(state, "airlock-shim"):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                sid = inode_sid.get(os.readlink(f"/proc/{pid}/fd/{fd}"))
                if sid is not None:
                    out[sid] = pid
                    break
        except OSError:
            continue
    return out


def parents():
    """{pid: ppid} of every process."""
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


def tree(pid, ppids):
    """pid's descendants, from a parents() map."""
    kids = {}
    for c, pp in ppids.items():
        kids.setdefault(pp, []).append(c)
    todo, out = [pid], []
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def vm_pairs(tag, state, ids):
    """[(shim, QEMU)] of each vm sandbox; exits when one has no single
    QEMU under its shim."""
    ppids, by_sid, pairs = parents(), shims(state), []
    for sid in ids:
        shim = by_sid.get(sid)
        q = [p for p in tree(shim, ppids) if is_qemu(p)] \
            if shim is not None else []
        if len(q) != 1:
            raise SystemExit(f"{tag}: no single QEMU for {sid} (shim "
                             f"{shim}, found {q})")
        pairs.append((shim, q[0]))
    return pairs


def rollup(pid):
    """/proc/<pid>/smaps_rollup in KiB: Rss, Pss, Shared_*, Private_*."""
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1])
    return out


def rollup_sum(pids):
    """rollup() of several processes added up (processes that have
    ended meanwhile count nothing)."""
    tot = {}
    for p in pids:
        try:
            r = rollup(p)
        except OSError:
            continue
        for k, v in r.items():
            tot[k] = tot.get(k, 0) + v
    return tot


def mem_available_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def cpu_ticks(pid):
    """utime + stime of a whole process (its ended threads included), in
    clock ticks (HZ a second)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def pct(xs, p):
    """The p-th percentile of xs (nearest rank over n - 1)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def goal(text, figure, ok, issue=9):
    """One goal line: what it asks, what was measured, met or not."""
    print(f"Goal (issue {issue}): {text}: {figure}: "
          f"{'met' if ok else 'NOT met'}")
