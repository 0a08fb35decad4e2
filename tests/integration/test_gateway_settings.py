"""What the operator sets for the gateways reaches the gateways a stack's
shims start (core/net/gwlaunch: al_gateway_env_fill of the shim's
checked configuration), and a bad value stops the programs at start.

A private stack (ns only) whose network slots take their addresses from
a moved pool, AIRLOCK_NET_POOL=198.51.100.0/24 (TEST-NET-2: never routed
anywhere, so a gateway that dialled into it would reach nothing), with
short gateway timeouts, behind an upstream world of its own
(upstream_world.py: namespace gws-up-<pid>, 10.251.79.0/24, the range
the gateways may dial): a resolver answering allowed.test with the
world's address and sibling.test with 198.51.100.6, the guest address of
the pool's slot 1; HTTP, HTTPS and a TCP echo on 7000.

sibling.test is allowed by the sandbox's network and is no private
address, so only the slot pool rule keeps a gateway from dialling it: a
gateway that kept the default pool (10.200.0.0/16) would dial it. Only
loopback, the slots and the world's namespace carry traffic."""
import os
import re
import subprocess
import time

import pytest

from conftest import (BUILD, REPO, Sandboxes, api_session,
                      assert_refused_at_start, children, cmdline,
                      exec_json, needs_root, running_stack,
                      shim_of, TIMEOUT)
from upstream_world import egress_policy, upstream_world

NET, HOST, UP = "10.251.79.0/24", "10.251.79.1", "10.251.79.2"
POOL = "198.51.100.0/24"
SIBLING = "198.51.100.6"  # slot 1's guest
HEAD_MS, IDLE_MS = 2000, 5000
POLICY_PORTS = 'extra_ports = {\n  ["allowed.test"] = { 7000 },\n}'

pytestmark = needs_root


@pytest.fixture(scope="module")
def world():
    yield from upstream_world("gws", HOST, NET, [UP],
                              {"allowed.test": UP, "sibling.test": SIBLING})


@pytest.fixture(scope="module")
def stack(world):
    policies = os.path.join(world["dir"], "policies")
    egress_policy(policies, POLICY_PORTS)
    yield from running_stack(env={
        "AIRLOCK_DRIVERS": "ns",
        "AIRLOCK_NET_POOL": POOL,
        "AIRLOCK_GW_HEAD_TIMEOUT_MS": str(HEAD_MS),
        "AIRLOCK_GW_IDLE_TIMEOUT_MS": str(IDLE_MS),
        "AIRLOCK_POLICIES": policies,
        "AIRLOCK_UPSTREAM_DNS": UP + ":53",
        "AIRLOCK_UPSTREAM_CA": world["ca"],
        "AIRLOCK_UPSTREAM_ALLOW_CIDRS": NET,
        "AIRLOCK_UPSTREAM_HOSTS": ""}, prefix="airlock-it-gws-")


@pytest.fixture(scope="module")
def api(stack):
    return api_session(stack)


@pytest.fixture(scope="module")
def box(api):
    """One ns sandbox allowed both names, its gateway started."""
    made = Sandboxes(api, "ns")
    try:
        sb = made.create(network={"mode": "allowlist",
                                  "allow": ["allowed.test",
                                            "sibling.test"]})
        # The gateway starts on the guest's first use of its sockets.
        sh(api, sb["id"], "timeout 10 nslookup allowed.test >/dev/null "
                          "2>&1; true")
        yield sb["id"]
    finally:
        made.cleanup()


def sh(api, sid, script, timeout=60):
    r = exec_json(api, sid, ["/bin/sh", "-c", script], timeout=timeout)
    return r["stdout"] + r["stderr"]


def denied(api, sid, name, timeout=10):
    """The egress log's denies about name (waiting for the ingest)."""
    deadline = time.monotonic() + timeout
    while True:
        r = api.get(f"{api.base}/v1/sandboxes/{sid}/egress",
                    params={"limit": 1000}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        found = [e for e in r.json()["egress"]
                 if e["name"] == name and not e["allow"]]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def gateway_environ(stack, sid):
    """The environment of the sandbox's airlock-gateway (the shim's
    child), as {name: value}."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        for pid in children(shim_of(stack, sid)):
            if "airlock-gateway" in cmdline(pid):
                with open(f"/proc/{pid}/environ", "rb") as f:
                    items = f.read().decode().split("\0")
                return dict(i.split("=", 1) for i in items if "=" in i)
        time.sleep(0.1)
    raise AssertionError(f"sandbox {sid}: no airlock-gateway")


def test_the_gateway_never_dials_into_the_moved_pool(api, stack, box):
    # The slots really come from the moved pool.
    out = sh(api, box, "ip -4 addr show dev eth0")
    m = re.search(r"inet (198\.51\.100\.\d+)/30", out)
    assert m, out
    # What the gateway may dial works...
    out = sh(api, box, "wget -q -O- http://allowed.test/echo 2>&1")
    assert "hello allowed.test /echo" in out, out
    # ...and an allowed name that resolves into the pool does not: the
    # gateway refuses it (502) and logs why.
    out = sh(api, box, "wget -q -O- http://sibling.test/x 2>&1; "
                       "echo rc=$?")
    assert "rc=0" not in out, out
    recs = denied(api, box, "sibling.test")
    assert recs, "no deny logged for sibling.test"
    assert any("airlock slot pool" in e["reason"] for e in recs), recs
    # Because the shim started it with the pool (al_gateway_env_fill).
    env = gateway_environ(stack, box)
    assert env.get("AIRLOCK_NET_POOL") == POOL, env


def timed(api, sid, feed, port):
    """Connect to allowed.test:port through the gateway, send what the
    shell commands feed print, then keep the connection open and quiet
    for up to 12 s: (seconds until the gateway closed it, what came
    back)."""
    script = ('a=$(cut -d" " -f1 /proc/uptime); '
              f'({feed}; sleep 12) | {{ timeout 20 nc allowed.test {port};'
              ' echo "rc=$?"; b=$(cut -d" " -f1 /proc/uptime); '
              'echo "took $a $b"; }')
    out = sh(api, sid, script, timeout=90)
    m = re.search(r"rc=(\d+)\ntook ([\d.]+) ([\d.]+)", out)
    assert m, out
    assert m.group(1) == "0", f"nc did not end by itself: {out}"
    return float(m.group(3)) - float(m.group(2)), out[:m.start()]


def test_the_gateway_has_the_configured_timeouts(api, stack, box):
    head, idle = HEAD_MS / 1000, IDLE_MS / 1000
    # A pass-through connection (the policy's port 7000, an echo) is
    # closed once it has been idle that long, not after the default 120 s.
    took, got = timed(api, box, "echo ping", 7000)
    assert got.strip() == "ping", got
    assert idle - 0.5 <= took <= idle + 3, (took, got)
    # A request head that does not complete in time gets 408, not the
    # default 30 s later.
    took, got = timed(api, box, r"printf 'GET /echo HTTP/1.1\r\nHost: allo'",
                      80)
    assert got.startswith("HTTP/1.1 408"), got
    assert head - 0.5 <= took <= head + 3, (took, got)
    env = gateway_environ(stack, box)
    assert env.get("AIRLOCK_GW_HEAD_TIMEOUT_MS") == str(HEAD_MS), env
    assert env.get("AIRLOCK_GW_IDLE_TIMEOUT_MS") == str(IDLE_MS), env


def test_bad_gateway_settings_stop_the_programs(stack, tmp_path):
    assert_refused_at_start(stack, tmp_path,
                            {"AIRLOCK_NET_POOL": "198.51.100.1/24"},
                            "AIRLOCK_NET_POOL")
    assert_refused_at_start(stack, tmp_path,
                            {"AIRLOCK_NET_POOL": "198.18.0.0/16"},
                            "overlaps 198.18.0.0/15")
    assert_refused_at_start(stack, tmp_path,
                            {"AIRLOCK_GW_IDLE_TIMEOUT_MS": "0"},
                            "AIRLOCK_GW_IDLE_TIMEOUT_MS must be between 1 "
                            "and 86400000")
    assert_refused_at_start(stack, tmp_path,
                            {"AIRLOCK_GW_HEAD_TIMEOUT_MS": "30s"},
                            "AIRLOCK_GW_HEAD_TIMEOUT_MS must be a decimal "
                            "number")


def test_a_gateway_without_a_valid_pool_does_not_start(tmp_path):
    """Fail closed: no pool is no start, never the default one."""
    gateway = os.path.join(BUILD, "airlock-gateway")
    base = {"AIRLOCK_STATE": str(tmp_path),
            "AIRLOCK_POLICIES": os.path.join(REPO, "policies")}
    for extra, says in (({}, "AIRLOCK_NET_POOL is needed"),
                        ({"AIRLOCK_NET_POOL": "198.51.100.1/24"},
                         "host bits"),
                        ({"AIRLOCK_NET_POOL": POOL,
                          "AIRLOCK_GW_IDLE_TIMEOUT_MS": "0"},
                         "AIRLOCK_GW_IDLE_TIMEOUT_MS must be between")):
        p = subprocess.run([gateway, "--sandbox", "sbx-settings"],
                           env=dict(base, **extra), capture_output=True,
                           text=True, timeout=30)
        assert p.returncode == 111, (extra, p.returncode, p.stderr)
        assert says in p.stderr, (extra, p.stderr)
