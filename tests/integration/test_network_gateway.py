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

import pytest
import requests

from conftest import (TIMEOUT, Sandboxes, children, cmdline, exec_json,
                      running_stack, shim_of, usable_drivers)

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_gateway.py")
ANSWER = "198.18.0.77"
GW_UID_BASE = 1900065536

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="network slots need root")


@pytest.fixture(scope="module")
def gstack():
    yield from running_stack(env={"AIRLOCK_GATEWAY": FAKE},
                             prefix="airlock-it-gw-")


@pytest.fixture(scope="module")
def gapi(gstack):
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {gstack.key}"
    s.base = gstack.base
    return s


@pytest.fixture(scope="module", params=("ns", "vm"))
def gdriver(request, gapi):
    r = gapi.get(gapi.base + "/v1/info", timeout=TIMEOUT)
    info = r.json() if r.status_code == 200 else None
    if request.param not in usable_drivers(info):
        pytest.skip(f"driver {request.param!r} is not usable here: {info}")
    return request.param


@pytest.fixture
def gsandboxes(gapi, gdriver):
    s = Sandboxes(gapi, gdriver)
    yield s
    s.cleanup()


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


def test_gateway_answers_the_sandbox_through_its_slot(gapi, gstack,
                                                      gsandboxes):
    sb = gsandboxes.create()
    # Nothing in the guest has used the network yet: no gateway runs.
    time.sleep(0.5)
    assert gateway_of(gstack, sb["id"]) is None, \
        "a gateway started before the guest used its network"
    # The first query waits in the gateway's socket for the gateway the
    # shim starts for it, and is answered.
    pid = started_gateway(gapi, gstack, sb["id"])
    assert pid is not None, "the shim started no gateway"
    # Its own uid, from the gateway range; no capabilities.
    with open(f"/proc/{pid}/status") as f:
        status = dict(l.split(":", 1) for l in f.read().splitlines()
                      if ":" in l)
    uid = int(status["Uid"].split()[0])
    assert GW_UID_BASE <= uid < GW_UID_BASE + 65536, status["Uid"]
    assert int(status["CapEff"], 16) == 0, status["CapEff"]
    assert int(status["NoNewPrivs"]) == 1
    assert ANSWER in lookup(gapi, sb["id"])
    assert wait_gateway(gstack, sb["id"]) == pid, "one gateway, kept"


def test_a_dead_gateway_is_restarted(gapi, gstack, gsandboxes):
    sb = gsandboxes.create()
    pid = started_gateway(gapi, gstack, sb["id"])
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    new = wait_gateway(gstack, sb["id"], not_pid=pid)
    assert new is not None, "no new gateway after the first was killed"
    assert ANSWER in lookup(gapi, sb["id"])


def test_delete_ends_the_gateway(gapi, gstack, gsandboxes):
    sb = gsandboxes.create()
    pid = started_gateway(gapi, gstack, sb["id"])
    assert pid is not None
    r = gapi.delete(f"{gapi.base}/v1/sandboxes/{sb['id']}", timeout=TIMEOUT)
    assert r.status_code in (200, 204), r.text
    deadline = time.time() + 10
    while time.time() < deadline and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}"), "the gateway outlived it"
