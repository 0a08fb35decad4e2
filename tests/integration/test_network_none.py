"""Network mode "none" ("network":{"mode":"none"} on create):
loopback only, no slot, no gateway. Inside there is no address but
loopback's and no route; the shim holds no network slot and runs no
gateway. On the stack every test shares."""
import os

import pytest

from conftest import children, cmdline, exec_json, shim_of

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="network slots need root")


def test_none_is_loopback_only(api, stack, sandboxes, driver):
    sb = sandboxes.create(network={"mode": "none"})
    r = exec_json(api, sb["id"], ["/bin/sh", "-c",
                                  "ip -4 addr; echo ==; cat /proc/net/route"])
    assert r["exit_code"] == 0, r
    addrs, route = r["stdout"].split("==\n")
    inets = [l.split()[1] for l in addrs.splitlines()
             if l.strip().startswith("inet ")]
    assert inets == ["127.0.0.1/8"], addrs
    assert route.splitlines()[1:] == [], route
    shim = shim_of(stack, sb["id"])
    net = os.path.join(stack.state, "run", "net")
    held = []
    for fd in os.listdir(f"/proc/{shim}/fd"):
        try:
            held.append(os.readlink(f"/proc/{shim}/fd/{fd}"))
        except OSError:
            pass
    assert not any(h.startswith(net + "/") for h in held), held
    assert not any("gateway" in cmdline(p) for p in children(shim))
