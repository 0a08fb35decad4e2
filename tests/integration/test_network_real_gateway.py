"""The real airlock-gateway on the stack every test shares: the shim
starts it on each sandbox's slot and configures it, so from inside the
sandbox a name the (default, empty) allow list does not name gets the
gateway's NXDOMAIN through /etc/resolv.conf, not silence. Only the
slot's addresses are used: nothing leaves the host."""
import os

import pytest

from conftest import children, cmdline, exec_json, shim_of

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
