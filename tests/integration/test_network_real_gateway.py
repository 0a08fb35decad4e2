"""The real airlock-gateway on the stack every test shares: the shim
starts it on each sandbox's slot and configures it, so from inside the
sandbox a name the (default, empty) allow list does not name gets the
gateway's NXDOMAIN through /etc/resolv.conf, not silence. Only the
slot's addresses are used: nothing leaves the host."""
import os
import signal
import time

import pytest

from conftest import (cgroup_path, cgroup_pids, children, cmdline,
                      exec_json, shim_of)

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="network slots need root")


def test_real_gateway_answers_dns(api, stack, sandboxes):
    sb = sandboxes.create()
    shim = shim_of(stack, sb["id"])
    # The gateway starts on the guest's first use of its sockets.
    r = exec_json(api, sb["id"], ["/bin/sh", "-c",
                                  "timeout 5 nslookup not-allowed.example "
                                  "2>&1; echo rc=$?"], timeout=20)
    out = r["stdout"]
    # busybox nslookup says NXDOMAIN when a server answered so; a
    # timeout (no gateway, or one the rules cannot reach) is rc=143.
    assert "NXDOMAIN" in out, out
    assert any("airlock-gateway" in cmdline(p) for p in children(shim)), \
        "the shim runs no airlock-gateway"


def memory_charged(sid):
    with open(cgroup_path("memory", sid, "memory.usage_in_bytes",
                          "memory.current")) as f:
        return int(f.read())


def gateway_of(stack, sid, other_than=None):
    """The shim's airlock-gateway child (started on the guest's first
    use, restarted 200 ms after a death)."""
    shim = shim_of(stack, sid)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        for p in children(shim):
            if p != other_than and "airlock-gateway" in cmdline(p) and \
                    not exited(p):
                return p
        time.sleep(0.05)
    raise AssertionError(f"sandbox {sid}: no (new) airlock-gateway")


def exited(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def rss_anon_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon")


def test_gateway_is_charged_to_its_sandbox(api, stack, sandboxes):
    """A guest that makes its gateway work pays from its own limits: the
    gateway runs in the sandbox's memory, pids and cpu cgroup (a
    restarted one too), not in its freezer (a paused sandbox's gateway
    still answers the shim), and its memory is charged there."""
    sid = sandboxes.create()["id"]
    # It starts on the guest's first use of its sockets.
    exec_json(api, sid, ["/bin/sh", "-c", "timeout 5 nslookup x.example "
                         ">/dev/null 2>&1; true"], timeout=20)
    gw = gateway_of(stack, sid)
    for ctrl in ("pids", "memory", "cpu"):
        assert gw in cgroup_pids(ctrl, sid), \
            f"gateway {gw} not in the sandbox's {ctrl} cgroup"
    if not os.path.exists(f"/sys/fs/cgroup/airlock/{sid}"):
        assert gw not in cgroup_pids("freezer", sid)
    # Its memory is the sandbox's: when it dies, what it held (anonymous
    # memory is uncharged at exit) leaves the sandbox's usage, before
    # the shim starts the next one.
    anon = rss_anon_bytes(gw)
    assert anon > 1 << 20, anon
    before = memory_charged(sid)
    os.kill(gw, signal.SIGKILL)
    while not exited(gw):
        time.sleep(0.002)
    after = memory_charged(sid)
    assert before - after >= anon // 2, (before, after, anon)
    exec_json(api, sid, ["/bin/sh", "-c", "timeout 5 nslookup y.example "
                         ">/dev/null 2>&1; true"], timeout=20)
    again = gateway_of(stack, sid, other_than=gw)
    for ctrl in ("pids", "memory", "cpu"):
        assert again in cgroup_pids(ctrl, sid), \
            f"restarted gateway {again} not in the {ctrl} cgroup"
