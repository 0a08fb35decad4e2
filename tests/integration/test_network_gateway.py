"""The shim launches, configures and supervises each sandbox's gateway
(issue 10; the process contract of RULES.md). A private stack whose
shims start tests/integration/fake_gateway.py as the gateway
(AIRLOCK_GATEWAY): it answers DNS, on the descriptors the shim gave it,
only once it got a GW_CONFIG for its sandbox. From inside a sandbox,
`nslookup` through /etc/resolv.conf then gets its answer. The gateway
starts on the guest's first use of its sockets, not with the create;
after it is killed the shim starts another; mode "none" has no gateway
and no network; after delete, nothing of the gateway is left."""
import os
import signal
import time

from conftest import (TIMEOUT, children, cmdline, exec_json, needs_root,
                      private_stack, shim_of)

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_gateway.py")
ANSWER = "198.18.0.77"
GW_UID_BASE = 1900065536

pytestmark = needs_root

stack, api, info = private_stack({"AIRLOCK_GATEWAY": FAKE}, "airlock-it-gw-")


def gateway_of(stack, sid):
    """The pid of the sandbox's gateway: the shim's child running the
    fake gateway, or None."""
    shim = shim_of(stack, sid)
    for pid in children(shim) if shim is not None else []:
        if "fake_gateway.py" in cmdline(pid):
            return pid
    return None


def wait_gateway(stack, sid, not_pid=None, secs=10):
    deadline = time.time() + secs
    while time.time() < deadline:
        pid = gateway_of(stack, sid)
        if pid is not None and pid != not_pid:
            return pid
        time.sleep(0.1)
    return None


def lookup(api, sid):
    r = exec_json(api, sid, ["/bin/sh", "-c",
                             "timeout 3 nslookup example.com 2>&1; true"],
                  timeout=20)
    return r["stdout"]


def started_gateway(api, stack, sid):
    """The guest's first lookup starts the gateway and is answered by
    it; the gateway's pid."""
    assert ANSWER in lookup(api, sid)
    return wait_gateway(stack, sid)


def test_gateway_answers_the_sandbox_through_its_slot(api, stack,
                                                      sandboxes):
    sb = sandboxes.create()
    # Nothing in the guest has used the network yet: no gateway runs.
    time.sleep(0.5)
    assert gateway_of(stack, sb["id"]) is None, \
        "a gateway started before the guest used its network"
    # The first query waits in the gateway's socket for the gateway the
    # shim starts for it, and is answered.
    pid = started_gateway(api, stack, sb["id"])
    assert pid is not None, "the shim started no gateway"
    # Its own uid, from the gateway range; no capabilities.
    with open(f"/proc/{pid}/status") as f:
        status = dict(l.split(":", 1) for l in f.read().splitlines()
                      if ":" in l)
    uid = int(status["Uid"].split()[0])
    assert GW_UID_BASE <= uid < GW_UID_BASE + 65536, status["Uid"]
    assert int(status["CapEff"], 16) == 0, status["CapEff"]
    assert int(status["NoNewPrivs"]) == 1
    assert ANSWER in lookup(api, sb["id"])
    assert wait_gateway(stack, sb["id"]) == pid, "one gateway, kept"


def test_a_dead_gateway_is_restarted(api, stack, sandboxes):
    sb = sandboxes.create()
    pid = started_gateway(api, stack, sb["id"])
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    new = wait_gateway(stack, sb["id"], not_pid=pid)
    assert new is not None, "no new gateway after the first was killed"
    assert ANSWER in lookup(api, sb["id"])


def test_delete_ends_the_gateway(api, stack, sandboxes):
    sb = sandboxes.create()
    pid = started_gateway(api, stack, sb["id"])
    assert pid is not None
    r = api.delete(f"{api.base}/v1/sandboxes/{sb['id']}", timeout=TIMEOUT)
    assert r.status_code in (200, 204), r.text
    deadline = time.time() + 10
    while time.time() < deadline and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}"), "the gateway outlived it"
