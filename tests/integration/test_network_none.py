"""Network mode "none": loopback only, no slot, no gateway. A private
stack whose sandboxes default to it (AIRLOCK_NET_DEFAULT=none, until the
API's "network" field names the mode per sandbox): inside there is no
address but loopback's and no route; the shim holds no network slot and
starts no gateway; the stack prepares no slot for it either way."""
import os

import pytest
import requests

from conftest import (TIMEOUT, Sandboxes, children, cmdline, exec_json,
                      running_stack, shim_of, usable_drivers)

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="network slots need root")


@pytest.fixture(scope="module")
def nstack():
    yield from running_stack(env={"AIRLOCK_NET_DEFAULT": "none"},
                             prefix="airlock-it-none-")


@pytest.fixture(scope="module")
def napi(nstack):
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {nstack.key}"
    s.base = nstack.base
    return s


@pytest.fixture(scope="module", params=("ns", "vm"))
def ndriver(request, napi):
    r = napi.get(napi.base + "/v1/info", timeout=TIMEOUT)
    info = r.json() if r.status_code == 200 else None
    if request.param not in usable_drivers(info):
        pytest.skip(f"driver {request.param!r} is not usable here: {info}")
    return request.param


def test_none_is_loopback_only(napi, nstack, ndriver):
    sbs = Sandboxes(napi, ndriver)
    try:
        sb = sbs.create()
        r = exec_json(napi, sb["id"], ["/bin/sh", "-c",
                                       "ip -4 addr; echo ==; "
                                       "cat /proc/net/route"])
        assert r["exit_code"] == 0, r
        addrs, route = r["stdout"].split("==\n")
        inets = [l.split()[1] for l in addrs.splitlines()
                 if l.strip().startswith("inet ")]
        assert inets == ["127.0.0.1/8"], addrs
        assert route.splitlines()[1:] == [], route
        shim = shim_of(nstack, sb["id"])
        net = os.path.join(nstack.state, "run", "net")
        held = [os.readlink(f"/proc/{shim}/fd/{fd}")
                for fd in os.listdir(f"/proc/{shim}/fd")]
        assert not any(h.startswith(net + "/") for h in held), held
        assert not any("gateway" in cmdline(p) for p in children(shim))
    finally:
        sbs.cleanup()
