"""PUT /v1/sandboxes/{id}/network against the real airlock-gateway the
shim runs for a sandbox, and the gateway's decisions in its egress log:
the change is acknowledged by the gateway ("gateway": true) and applies
to the next DNS query, and each decision shows up in GET .../egress.
Only names the setting denies are looked up (the gateway answers those
itself): nothing leaves the host."""
import os
import time

import pytest

from conftest import TIMEOUT, children, cmdline, exec_json, shim_of

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="network slots need root")


def lookup(api, sid, name):
    r = exec_json(api, sid, ["/bin/sh", "-c",
                             f"timeout 5 nslookup {name} 2>&1; echo rc=$?"],
                  timeout=20)
    return r["stdout"]


def decision(api, sid, name, timeout=15):
    """The newest logged decision about name (waits for the ingest)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = api.get(f"{api.base}/v1/sandboxes/{sid}/egress",
                    params={"limit": 1000}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        for e in r.json()["egress"]:
            if e["name"] == name:
                return e
        time.sleep(0.2)
    pytest.fail(f"no egress decision about {name} within {timeout}s")


def put(api, sid, network):
    return api.put(f"{api.base}/v1/sandboxes/{sid}/network", json=network,
                   timeout=TIMEOUT)


def test_put_network_reaches_the_gateway(stack, api, sandboxes):
    if not os.path.exists(os.path.join(stack.build, "airlock-gateway")):
        pytest.skip("this build has no airlock-gateway")
    sb = sandboxes.create()
    sid = sb["id"]
    assert sb["network"] == {"mode": "allowlist", "allow": [], "deny": []}
    shim = shim_of(stack, sid)
    # Default: nothing allowed, and the decision is logged (the first
    # query starts the gateway).
    assert "NXDOMAIN" in lookup(api, sid, "first.example")
    assert any("airlock-gateway" in cmdline(p) for p in children(shim)), \
        "the shim runs no gateway"
    e = decision(api, sid, "first.example")
    assert e["allow"] is False and e["protocol"] == "dns", e
    # open, but this name denied: the gateway takes the new setting.
    r = put(api, sid, {"mode": "open", "deny": ["*.Denied.example"]})
    assert r.status_code == 200, r.text
    assert r.json() == {"network": {"mode": "open", "allow": [],
                                    "deny": ["*.denied.example"]},
                        "gateway": True}
    g = api.get(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT).json()
    assert g["network"]["mode"] == "open"
    assert "NXDOMAIN" in lookup(api, sid, "a.denied.example")
    e2 = decision(api, sid, "a.denied.example")
    assert e2["allow"] is False and e2["reason"] != e["reason"], (e, e2)
    # none: everything denied, the gateway still acknowledges; and back.
    r = put(api, sid, {"mode": "none"})
    assert r.status_code == 200 and r.json()["gateway"] is True, r.text
    assert "NXDOMAIN" in lookup(api, sid, "third.example")
    e3 = decision(api, sid, "third.example")
    assert e3["allow"] is False, e3
    r = put(api, sid, {"mode": "allowlist", "allow": ["pypi.org"]})
    assert r.status_code == 200 and r.json()["gateway"] is True, r.text
    counts = api.get(f"{api.base}/v1/sandboxes/{sid}/egress",
                     timeout=TIMEOUT).json()["counts"]
    assert counts["denied"] >= 3, counts
    print(f"\nreasons: default={e['reason']!r} deny-list={e2['reason']!r} "
          f"none={e3['reason']!r}")


def test_put_network_before_the_gateway_started(stack, api, sandboxes):
    """A change right after the create, before the guest used its
    network (no gateway runs yet): the shim starts the gateway with the
    change as its first config, and the gateway acknowledges it."""
    if not os.path.exists(os.path.join(stack.build, "airlock-gateway")):
        pytest.skip("this build has no airlock-gateway")
    sb = sandboxes.create()
    sid = sb["id"]
    shim = shim_of(stack, sid)
    assert not any("airlock-gateway" in cmdline(p) for p in children(shim))
    r = put(api, sid, {"mode": "open", "deny": ["*.denied.example"]})
    assert r.status_code == 200, r.text
    assert r.json()["gateway"] is True, r.text
    assert any("airlock-gateway" in cmdline(p) for p in children(shim))
    assert "NXDOMAIN" in lookup(api, sid, "b.denied.example")
    e = decision(api, sid, "b.denied.example")
    assert e["allow"] is False, e
