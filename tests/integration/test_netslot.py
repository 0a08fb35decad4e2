"""core/net: network slots, their rules and their pool, driven through
build/netslot-tool (tests/integration/netslot_tool.c), which leases a slot
and plays its gateway side: it listens in the slot, as the gateway will,
on UDP and TCP 53 of the gateway's address and on the transparent port
every other TCP connection is sent to, and prints what reaches it.

Probes (netslot_probe.py) run inside the slot's namespaces, as host root
and as root of a new user namespace (what the ns jail's root is), and try
what a hostile sandbox would. Every address used is one of the
namespaces made here, or a TEST-NET / documentation address that nothing
routes: no packet leaves the namespaces this test makes."""
import fcntl
import json
import os
import select
import subprocess
import tempfile
import time

import pytest

from conftest import NETSLOT_TOOL as TOOL, needs_root

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = os.path.join(HERE, "netslot_probe.py")
PY = "/usr/bin/python3"
HOST_ADDR = None  # filled from the host's first global address

pytestmark = needs_root


def host_ipv4():
    out = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True,
                         text=True, check=True).stdout
    for link in json.loads(out):
        for a in link.get("addr_info", []):
            if a.get("scope") == "global":
                return a["local"]
    return None


@pytest.fixture
def state():
    d = tempfile.mkdtemp(prefix="airlock-netslot-")
    os.chmod(d, 0o700)
    yield d
    subprocess.run([TOOL, d, "drain", "ns"], check=False)
    subprocess.run([TOOL, d, "drain", "vm"], check=False)
    subprocess.run([TOOL, d, "reconcile"], check=False)
    subprocess.run(["rm", "-rf", d], check=False)


def tool(state, *args):
    p = subprocess.run([TOOL, state, *args], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


class Held:
    """A leased slot and its gateway side (netslot-tool hold)."""

    def __init__(self, state, kind="ns", mac=None):
        args = [TOOL, state, "hold", kind] + ([mac] if mac else [])
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.buf = b""
        try:
            self.info = json.loads(self._line(30))
            assert json.loads(self._line(10)) == {"listening": True}
        except BaseException:
            self.p.kill()
            self.p.wait()
            raise

    def _line(self, timeout):
        """One line of the tool's stdout, or None after timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.p.stdout], [], [], max(left, 0))
            if not r:
                return None
            chunk = os.read(self.p.stdout.fileno(), 4096)
            assert chunk, "netslot-tool exited: " + self.p.stderr.read().decode()
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def events(self, wait=0.3):
        """What reached the gateway side since the last call."""
        out = []
        while True:
            line = self._line(wait)
            if line is None:
                return out
            out.append(json.loads(line))
            wait = 0.05

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        assert self.p.returncode == 0, self.p.stderr.read().decode()


@pytest.fixture
def held(state):
    slots = []

    def make(kind="ns", mac=None):
        h = Held(state, kind, mac)
        slots.append(h)
        return h
    yield make
    for h in slots:
        h.close()


def probe(ns_path, mode, checks):
    p = subprocess.run(["nsenter", "--net=" + ns_path, PY, PROBE, mode,
                        json.dumps(checks)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def gw_mac(h):
    out = subprocess.run(["nsenter", "--net=" + h.info["gw_ns"], "ip", "-j",
                          "link", "show", h.info["link"]],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)[0]["address"]


def nft_ruleset(ns_path):
    return subprocess.run(["nsenter", "--net=" + ns_path, "nft", "list",
                           "ruleset"], capture_output=True, text=True,
                          check=True).stdout


def test_slot_is_made_by_the_host(state, held):
    h = held("ns")
    info = h.info
    assert info["gateway"].startswith("10.200.") and info["guest"].startswith("10.200.")
    # Both namespaces belong to the host's user namespace (NS_GET_USERNS).
    host_userns = os.stat("/proc/self/ns/user").st_ino
    for path in (info["gw_ns"], info["guest_ns"]):
        fd = os.open(path, os.O_RDONLY)
        try:
            owner = fcntl.ioctl(fd, 0xB701)
            assert os.fstat(owner).st_ino == host_userns
            os.close(owner)
        finally:
            os.close(fd)
    out = subprocess.run(["nsenter", "--net=" + info["guest_ns"], "ip", "-j",
                          "addr", "show", "eth0"], capture_output=True,
                         text=True, check=True).stdout
    link = json.loads(out)[0]
    assert link["address"] == info["guest_mac"]
    assert [a["local"] for a in link["addr_info"]] == [info["guest"]]
    rules = nft_ruleset(info["gw_ns"])
    assert "tproxy ip to %s:%d" % (info["gateway"], info["tproxy_port"]) in rules
    assert "policy drop" in rules
    v6 = subprocess.run(["nsenter", "--net=" + info["guest_ns"], "cat",
                         "/proc/sys/net/ipv6/conf/all/disable_ipv6"],
                        capture_output=True, text=True, check=True).stdout
    assert v6.strip() == "1"


@pytest.mark.parametrize("mode", ["root", "userns"])
def test_what_a_sandbox_can_reach(state, held, mode):
    a = held("ns")
    b = held("ns")  # another sandbox
    gw, guest = a.info["gateway"], a.info["guest"]
    host = host_ipv4()
    checks = [
        ["dns_udp", "udp", gw, 53, "q-udp"],
        ["dns_tcp", "tcp", gw, 53],
        ["public_tcp", "tcp", "198.51.100.7", 443],
        ["synthetic_tcp", "tcp", "198.18.0.5", 80],
        ["odd_port_tcp", "tcp", "203.0.113.9", 6667],
        ["gateway_other_port", "tcp", gw, 22],
        ["dns_elsewhere_udp", "udp", "198.51.100.53", 53, "q-out"],
        ["dns_elsewhere_tcp", "tcp", "198.51.100.53", 53],
        ["dns_private_tcp", "tcp", "10.0.0.53", 53],
        ["quic", "udp", "198.51.100.7", 443, "q-quic"],
        ["metadata", "tcp", "169.254.169.254", 80],
        ["private", "tcp", "192.168.1.1", 443],
        ["other_sandbox", "tcp", b.info["guest"], 22],
        ["other_gateway_dns", "udp", b.info["gateway"], 53, "q-b"],
        ["icmp_gw", "icmp", gw],
        ["icmp_public", "icmp", "198.51.100.7"],
        ["ipv6", "udp6", "2001:db8::1", 53],
        ["spoof_src", "raw_udp", "10.200.0.250", gw, 53, "spoofed"],
    ]
    if host is not None:
        checks.append(["host", "tcp", host, 22])
    r = probe(a.info["guest_ns"], mode, checks)
    ev = a.events()
    assert b.events() == [], "another sandbox's gateway side saw traffic"

    assert r["dns_udp"] == "ok"
    assert r["dns_tcp"] == "gw"
    # Caught by the gateway side, which sees the original destination.
    assert r["public_tcp"] == "gw" and r["synthetic_tcp"] == "gw"
    assert r["odd_port_tcp"] == "gw"
    locals_ = {e["local"] for e in ev if "tcp" in e}
    assert {"198.51.100.7:443", "198.18.0.5:80", "203.0.113.9:6667",
            "%s:53" % gw} <= locals_
    assert all(e.get("tcp", guest + ":").startswith(guest + ":") for e in ev)
    udp_seen = [e["data"] for e in ev if "udp" in e]
    assert udp_seen == ["q-udp"], ev

    # Dropped (a timeout, not a refusal: nothing answered at all).
    for name in ("gateway_other_port", "dns_elsewhere_udp",
                 "dns_elsewhere_tcp", "dns_private_tcp", "quic", "metadata", "private",
                 "other_sandbox", "other_gateway_dns") + (("host",) if host else ()):
        assert r[name] == "timeout", (name, r[name])
    # No IPv6 at all in the sandbox's namespace.
    assert r["ipv6"] in ("ENETUNREACH", "EADDRNOTAVAIL", "EAFNOSUPPORT"), r["ipv6"]
    if mode == "root":
        # Host root inside can make raw packets: the rules still drop them.
        assert r["icmp_gw"] == "timeout" and r["icmp_public"] == "timeout"
        assert r["spoof_src"] == "sent"
    else:
        # Root of a child user namespace has no CAP_NET_RAW over the
        # host's namespace: no raw socket at all.
        assert r["icmp_gw"] == "EPERM" and r["icmp_public"] == "EPERM"
        assert r["spoof_src"] == "EPERM"
    assert "spoofed" not in udp_seen


def test_spoofed_mac_and_source_are_dropped(state, held):
    """Host root in the sandbox's namespace writes whole frames: only the
    slot's own MAC with its own address gets through."""
    a = held("ns")
    gw, guest, mac = a.info["gateway"], a.info["guest"], a.info["guest_mac"]
    dst = gw_mac(a)
    r = probe(a.info["guest_ns"], "root", [
        ["good", "udp_frame", "eth0", mac, dst, guest, gw, 53, "frame-ok"],
        ["bad_mac", "udp_frame", "eth0", "02:00:00:00:00:99", dst, guest, gw,
         53, "frame-badmac"],
        ["bad_src", "udp_frame", "eth0", mac, dst, "10.200.0.66", gw, 53,
         "frame-badsrc"],
    ])
    assert set(r.values()) == {"sent"}, r
    seen = [e["data"] for e in a.events() if "udp" in e]
    assert seen == ["frame-ok"], seen
    rules = nft_ruleset(a.info["gw_ns"])
    # The MAC rule counted the spoofed frame.
    mac_rule = [l for l in rules.splitlines() if "@guest_mac counter" in l][0]
    assert "packets 0 " not in mac_rule, mac_rule


def test_userns_root_cannot_change_the_network(state, held):
    """The jail's root, even inside the namespace that holds the rules."""
    a = held("ns")
    guest = a.info["guest_ns"]
    r = probe(guest, "userns", [
        ["link_down", "run", ["ip", "link", "set", "eth0", "down"]],
        ["addr_add", "run", ["ip", "addr", "add", "10.200.0.9/30", "dev", "eth0"]],
        ["mac", "run", ["ip", "link", "set", "eth0", "address", "02:00:00:00:00:01"]],
        ["ipv6_on", "sysctl", "net/ipv6/conf/all/disable_ipv6", "0"],
    ])
    assert r["link_down"] == "EPERM" and r["addr_add"] == "EPERM", r
    assert r["mac"] == "EPERM", r
    assert r["ipv6_on"] in ("EACCES", "EPERM"), r
    before = nft_ruleset(a.info["gw_ns"])
    r = probe(a.info["gw_ns"], "userns", [
        ["flush", "run", ["nft", "flush", "ruleset"]],
        ["gw_down", "run", ["ip", "link", "set", a.info["link"], "down"]],
        ["gw_addr", "run", ["ip", "addr", "add", "10.200.0.9/30", "dev",
                            a.info["link"]]],
        ["route", "run", ["ip", "route", "add", "default", "dev", a.info["link"]]],
    ])
    assert set(r.values()) == {"EPERM"}, r
    assert nft_ruleset(a.info["gw_ns"]) == before
    # And it all still works afterwards.
    r = probe(guest, "userns", [["dns", "udp", a.info["gateway"], 53, "after"]])
    assert r["dns"] == "ok"


def tap_frames(h, frames):
    """Write frames into the slot's tap as QEMU's NIC would."""
    code = (
        "import fcntl,struct,sys,os\n"
        "fd=os.open('/dev/net/tun',os.O_RDWR)\n"
        "fcntl.ioctl(fd,0x400454ca,struct.pack('16sH',b'%s',0x1002))\n"
        "for f in sys.argv[1:]: os.write(fd,bytes.fromhex(f))\n" % h.info["link"])
    subprocess.run(["nsenter", "--net=" + h.info["gw_ns"], PY, "-c", code,
                    *frames], check=True, timeout=30)


def eth_udp(src_mac, dst_mac, src, dst, data):
    import importlib.util
    spec = importlib.util.spec_from_file_location("probe", PROBE)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return (dst_mac.replace(":", "") + src_mac.replace(":", "") + "0800" +
            m.udp_packet(src, dst, 53, data.encode()).hex())


def test_vm_slot_tap_and_mac(state, held):
    """vm: a tap QEMU attaches to by fd; the rules accept only the MAC the
    sandbox was given at take (none before)."""
    vm_mac = "02:5e:11:22:33:44"
    a = held("vm", vm_mac)
    b = held("vm")  # taken, MAC never set: everything is dropped
    assert a.info["guest_ns"] == ""
    for h, mac, expect in ((a, vm_mac, ["vm-ok"]), (b, vm_mac, [])):
        dst = gw_mac(h)
        tap_frames(h, [
            eth_udp(mac, dst, h.info["guest"], h.info["gateway"], "vm-ok"),
            eth_udp("02:00:00:00:00:99", dst, h.info["guest"],
                    h.info["gateway"], "vm-badmac"),
            eth_udp(mac, dst, "10.200.0.77", h.info["gateway"], "vm-badsrc"),
        ])
        seen = [e["data"] for e in h.events() if "udp" in e]
        assert seen == expect, (h.info, seen)


def test_pool_prepare_take_release_reconcile(state):
    assert tool(state, "prepare", "ns", "2").split() == ["0", "1"]
    assert tool(state, "prepare", "vm", "1").split() == ["2"]
    assert tool(state, "ready", "ns").strip() == "2"
    assert tool(state, "ready", "vm").strip() == "1"
    netdir = os.path.join(state, "run", "net")
    # A lease takes a prepared slot: no new index is made.
    h = Held(state, "ns")
    assert h.info["index"] in (0, 1)
    assert tool(state, "ready", "ns").strip() == "1"
    # Its lock is held: reconcile leaves it, and a prepare skips it.
    assert tool(state, "reconcile").strip() == "0"
    assert tool(state, "prepare", "ns", "1").split() == ["3"]
    idx = h.info["index"]
    h.close()
    # Released: its namespaces are gone and the index is free again.
    assert not os.path.exists(os.path.join(netdir, "%d.gw" % idx))
    # Recycled: the next prepare (its search starts at 0) reuses it.
    assert tool(state, "prepare", "ns", "1").split() == [str(idx)]
    # A holder that dies without releasing leaves a slot reconcile cleans.
    h = Held(state, "vm")
    leaked = h.info["index"]
    h.p.kill()
    h.p.wait()
    assert os.path.exists(os.path.join(netdir, "%d.gw" % leaked))
    assert tool(state, "reconcile").strip() == "1"
    assert not os.path.exists(os.path.join(netdir, "%d.gw" % leaked))
    assert tool(state, "ready", "vm").strip() == "0"


def test_pool_refuses_overlap_with_host_routes(state):
    host = host_ipv4()
    if host is None:
        pytest.skip("the host has no global IPv4 address to overlap")
    env = dict(os.environ, AIRLOCK_NET_POOL=host.rsplit(".", 1)[0] + ".0/24")
    p = subprocess.run([TOOL, state, "ready", "ns"], capture_output=True,
                       text=True, env=env)
    assert p.returncode == 111
    assert "overlaps the host's" in p.stderr
    env["AIRLOCK_NET_POOL"] = "198.18.0.0/16"
    p = subprocess.run([TOOL, state, "ready", "ns"], capture_output=True,
                       text=True, env=env)
    assert p.returncode == 111 and "198.18.0.0/15" in p.stderr
    env["AIRLOCK_NET_POOL"] = "10.200.0.1/16"
    p = subprocess.run([TOOL, state, "ready", "ns"], capture_output=True,
                       text=True, env=env)
    assert p.returncode == 111 and "host bits" in p.stderr


def test_pool_refuses_a_writable_directory(state):
    """Whoever could write run/net could hand one slot to two sandboxes."""
    netdir = os.path.join(state, "run", "net")
    os.makedirs(netdir)
    os.chmod(netdir, 0o777)
    p = subprocess.run([TOOL, state, "prepare", "ns"], capture_output=True,
                       text=True)
    assert p.returncode == 111
    assert "must be a directory owned by root, mode 0700" in p.stderr
    assert os.listdir(netdir) == []
