"""What a sandbox can make PostgreSQL hold through its gateway's egress
log: root in a sandbox of each driver asks for denied names and denied
connections as fast as it can (tests/redteam/probe.c flood) for eight
seconds. The log keeps at most AIRLOCK_EGRESS_LOG_BURST +
AIRLOCK_EGRESS_LOG_RATE x seconds of its decisions, says how many it did
not log (entries with reason "over the log rate" and a "dropped" count),
and every one of them is still denied. The thousands of connections
leave no conntrack entries (the host's table is shared by every
namespace) in the sandbox's namespaces. Each driver's flood is one row
of the table; it fails when the log grew past the bound, lost decisions
without counting them, anything got through, or conntrack filled.

The traffic goes to the gateway in the sandbox's own slot: DNS to its
address, TCP to a TEST-NET-3 address, which the slot's rules hand to the
gateway (it never dials an address the guest chose, and denies): nothing
leaves the test's namespaces."""
import os
import re
import subprocess
import time

import pytest

from conftest import it

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="network slots need root")

# core/base/config.h's defaults: the suite's stack sets neither setting.
RATE, BURST = 50, 500
FLOOD_S = 8  # long enough to outrun the bound on a loaded TCG host too
PROBE = "/tmp/probe"
TCP_TO = "203.0.113.10"  # public-looking: the slot's rules pass it on
# The slots use none; a few would not matter, a flood's worth would.
CONNTRACK_MAX = 64
RATE_REASON = "over the log rate"  # core/net/egress.h AL_EGRESS_REASON_RATE
FLOOD = re.compile(r"flood: dns sent (\d+) answered (\d+) addressed (\d+); "
                   r"tcp tried (\d+) connected (\d+) data (\d+)")


def egress_log(api, sid):
    """Every entry of sid's egress log (all pages) and its counts."""
    entries, before = [], None
    while True:
        params = {"limit": 1000}
        if before:
            params["before"] = before
        r = api.get(f"{api.base}/v1/sandboxes/{sid}/egress", params=params,
                    timeout=it.TIMEOUT)
        assert r.status_code == 200, r.text
        body = r.json()
        entries += body["egress"]
        before = body["next"]
        if not before:
            return entries, body["counts"]


def settled_log(api, sid, timeout=30):
    """The log once the gateway's last files are in (its counts the same
    over two reads a second apart)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        time.sleep(1)
        entries, counts = egress_log(api, sid)
        if counts == last or time.monotonic() > deadline:
            return entries, counts
        last = counts


def world_saw(world, marker):
    """What of the upstream world's logs and sniffer carries marker."""
    events = []
    for lines in world["log"].values():
        events += lines.drain(0.05)
    events += world["sniff"].drain(0.05)
    return [e for e in events if marker in repr(e)]


def conntrack_entries(stack, sid):
    """Conntrack entries in each network namespace of sid other than the
    host's: its slot (and the ns guest's), which the shim holds by nsfs
    descriptors whose mounts are gone (they read as "/"), and its
    children's (the agent's, QEMU's): {namespace inode: count}. A
    namespace without a conntrack table counts 0."""
    pid = it.shim_of(stack, sid)
    assert pid is not None, f"no shim for {sid}"
    host = os.stat("/proc/self/ns/net").st_ino
    paths = [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
    paths += [f"/proc/{c}/ns/net" for c in it.children(pid)]
    seen = {}
    for path in paths:
        try:
            link, ino = os.readlink(path), os.stat(path).st_ino
        except OSError:
            continue
        if link != "/" and not link.startswith("net:[") or ino == host or \
                ino in seen:
            continue
        r = subprocess.run(["nsenter", f"--net={path}", "sh", "-c",
                            "cat /proc/sys/net/netfilter/nf_conntrack_count"
                            " 2>/dev/null || echo 0"],
                           capture_output=True, text=True)
        if r.returncode == 0:  # else not a network namespace
            seen[ino] = int(r.stdout)
    return seen


@pytest.mark.parametrize("drv", it.DRIVERS)
def test_egress_log_flood(rt, api, info, stack, world, probe, drv):
    if drv not in it.usable_drivers(info):
        pytest.skip(f"driver {drv!r} is not usable on this host: {info!r}")
    boxes = it.Sandboxes(api, drv)
    try:
        sid = boxes.create(network={"mode": "allowlist",
                                    "allow": ["allowed.test"]},
                           timeout=1800)["id"]
        rt.put(sid, PROBE, probe)
        _, conf = rt.sh(sid, "cat /etc/resolv.conf")
        gateway = re.search(r"nameserver (\S+)", conf).group(1)
        mark = "rtflood%d%s" % (os.getpid(), drv)
        world_saw(world, mark)  # drain what came before

        t0 = time.monotonic()
        r = it.exec_json(api, sid, [PROBE, "flood", gateway, TCP_TO,
                                    str(FLOOD_S), mark], timeout=120)
        elapsed = time.monotonic() - t0
        # Thousands of connections, and the slot keeps no state of them
        # (tproxy without conntrack: docs/architecture.md, Rules).
        ct = conntrack_entries(stack, sid)
        # The slot and the guest's side (ns) or QEMU's (vm).
        assert len(ct) >= 2, ct
        out = (r["stdout"] + r["stderr"]).strip()
        m = FLOOD.search(out)
        assert m is not None, out
        sent, answered, addressed, tried, connected, data = map(
            int, m.groups())
        decided = answered + connected  # each seen decided by the guest
        bound = BURST + RATE * (elapsed + 1)
        # The row proves nothing unless the flood outran the bound, with
        # both kinds of decision.
        assert decided > 2 * bound and answered > 0 and connected > 0, out

        entries, counts = settled_log(api, sid)
        logged = [e for e in entries if "dropped" not in e]
        over = sum(e["dropped"] for e in entries
                   if e.get("dropped") and e["reason"] == RATE_REASON)
        count_rows = sum(1 for e in entries if "dropped" in e)
        unlogged = sum(e.get("dropped", 0) for e in entries)
        allowed = [e for e in logged if e["allow"] and
                   (mark in e["name"] or e["name"] == TCP_TO)]
        leaked = world_saw(world, mark)

        # Tokens come back: a decision after the flood is logged again.
        time.sleep(1)
        after = f"{mark}-after.forbidden.test"
        rt.sh(sid, f"{PROBE} dns {gateway} 53 udp {after}")
        deadline = time.monotonic() + 10
        seen_after = []
        while not seen_after and time.monotonic() < deadline:
            time.sleep(0.5)
            seen_after = [e for e in egress_log(api, sid)[0]
                          if e["name"] == after and not e["allow"]]

        result = (f"{sent} lookups ({answered} answered, {addressed} with "
                  f"an address), {connected} connections ({data} got "
                  f"bytes) in {elapsed:.1f} s; {len(logged)} decisions "
                  f"logged (bound {bound:.0f}), {over} counted over the "
                  f"rate in {count_rows} rows; counts {counts}; world saw "
                  f"{len(leaked)}; logged again after: {bool(seen_after)}; "
                  f"conntrack entries {sorted(ct.values())}")
        print(result)
        escaped = (len(logged) > bound or over == 0 or
                   count_rows > 4 * (elapsed + 2) + 2 or
                   len(logged) + unlogged < decided or
                   counts["dropped"] < over or
                   addressed > 0 or data > 0 or allowed or leaked or
                   not seen_after or r["exit_code"] != 0 or
                   max(ct.values()) > CONNTRACK_MAX)
        assert not rt.record(
            f"flood the egress log: denied lookups and connections for "
            f"{FLOOD_S} s", drv,
            f"<= {BURST} + {RATE}/s logged, rest counted, all denied",
            result, escaped), result
    finally:
        boxes.cleanup()
