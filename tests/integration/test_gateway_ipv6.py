"""The egress gateway dials IPv6 upstreams: an upstream world of its own
that has no IPv4 at all (namespace gw6-up-<pid>, behind a veth in the ULA
fd00:a1:84::/64, the one range the gateway may dial here: its resolver,
HTTPS and HTTP servers speak IPv6 only). From the slot's guest namespace
(IPv4 only, as every guest) a name with only an AAAA record works; names
whose AAAA is loopback, IPv4-mapped, NAT64 or a ULA outside the operator's
range are refused after the lookup and logged; the guest itself still
gets no IPv6 answer. Only namespaces made here carry traffic."""
import pytest

from conftest import needs_root
from test_gateway import curl, egress, gateway, guest
from upstream_world import upstream_world

NET, HOST, UP = "fd00:a1:84::/64", "fd00:a1:84::1", "fd00:a1:84::2"
NAMES = {"v6.test": UP,
         "loop6.test": "::1",
         "mapped6.test": "::ffff:127.0.0.1",
         "nat64.test": "64:ff9b::7f00:1",
         "ula6.test": "fd00:a1:85::2"}

pytestmark = needs_root


@pytest.fixture(scope="module")
def world6():
    yield from upstream_world("gw6", HOST, NET, [UP], NAMES)


@pytest.fixture(scope="module")
def gw6(world6):
    yield from gateway(world6, "[%s]:53" % UP, NET, sorted(NAMES))


def test_an_ipv6_only_upstream_is_dialled(gw6, world6):
    r = curl(gw6, "https://v6.test/echo")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello v6.test /echo\n"
    r = curl(gw6, "http://v6.test/plain")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello v6.test /plain\n"
    seen = world6["log"][UP].drain()
    assert {"http": "v6.test", "path": "/echo", "tls": True,
            "method": "GET"}.items() <= next(
        e for e in seen if e.get("path") == "/echo").items(), seen
    assert egress(gw6, {"allow": True, "protocol": "https",
                        "name": "v6.test", "path": "/echo"})


@pytest.mark.parametrize("name,reason", [
    ("loop6.test", "loopback"),
    ("mapped6.test", "mapped"),
    ("nat64.test", "nat64"),
    ("ula6.test", "unique local"),
])
def test_inward_ipv6_upstreams_are_refused(gw6, world6, name, reason):
    r = curl(gw6, "-o", "/dev/null", "-w", "%{http_code}",
             "https://%s/x" % name)
    assert r.stdout == "502", (r.stdout, r.stderr)
    recs = egress(gw6, {"allow": False, "name": name})
    assert recs and reason in recs[0]["reason"], recs
    assert not [e for e in world6["log"][UP].drain()
                if e.get("http") == name], "reached the upstream"


def test_the_guest_gets_no_ipv6(gw6):
    """The gateway's own DNS gives the guest no AAAA (its IPv4 answer
    still works), and curl asked for IPv6 has nothing to connect to."""
    r = guest(gw6, "getent", "ahostsv6", "v6.test")
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout)
    r = guest(gw6, "getent", "ahostsv4", "v6.test")
    assert r.returncode == 0 and "198.18." in r.stdout, r.stdout
    r = curl(gw6, "-6", "-o", "/dev/null", "https://v6.test/echo")
    assert r.returncode != 0, r.stdout
