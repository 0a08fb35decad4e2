"""Every sandbox's network slot, as a user and an operator see it (issue
10, "Network per sandbox"): inside, eth0 has the slot's address and the
default route goes via the gateway, whose address is the only resolver;
root in an ns sandbox cannot change any of it; a packet with a spoofed
source does not reach the gateway's side of the slot; after delete the
slot's files, namespaces and tap are gone, and the controller's reconcile
removes the slot of a shim that was killed.

The gateway's side is played by the test: a UDP listener in the slot's
namespace on the gateway's address, port 53 (where the gateway's DNS
socket is), on a private stack whose shims find no gateway program
(AIRLOCK_GATEWAY names none: they keep retrying, and the guest has no
egress meanwhile). Every address is inside the slot: nothing leaves the
namespaces the stack made."""
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import TIMEOUT, exec_json, needs_root, private_stack, shim_of

pytestmark = needs_root

stack, api, info = private_stack(
    {"AIRLOCK_GATEWAY": "/nonexistent/airlock-gateway"}, "airlock-it-net-")


def sh(api, sid, script, **kw):
    return exec_json(api, sid, ["/bin/sh", "-c", script], **kw)


def net_dir(stack):
    return os.path.join(stack.state, "run", "net")


def slot_of(stack, sid):
    """The slot index whose lock the sandbox's shim holds."""
    pid = shim_of(stack, sid)
    assert pid is not None, f"no shim for {sid}"
    d = net_dir(stack)
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            t = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        m = re.fullmatch(re.escape(d) + r"/(\d+)\.lock", t)
        if m:
            return int(m.group(1))
    return None


def slot_addrs(i):
    base = (10 << 24) | (200 << 16)
    a = base + 4 * i
    fmt = lambda x: socket.inet_ntoa(x.to_bytes(4, "big"))
    return fmt(a + 1), fmt(a + 2)  # gateway, guest


NSFS_DEV = os.stat("/proc/self/ns/net").st_dev


def is_ns(path, ino=None):
    """path is a namespace (of inode ino). By stat: an fd opened through
    a bind mount that is gone reads back as "/"."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_dev == NSFS_DEV and (ino is None or st.st_ino == ino)


def slot_ns(stack, sid, which):
    """A path to the sandbox's "gw" or "guest" network namespace: the
    shim holds both by fd once the sandbox is up (their bind mounts are
    gone, al_netpool_unpin). Told apart by their links."""
    pid = shim_of(stack, sid)
    assert pid is not None, f"no shim for {sid}"
    want = {"gw": "al-guest", "guest": "eth0"}[which]
    for fd in os.listdir(f"/proc/{pid}/fd"):
        path = f"/proc/{pid}/fd/{fd}"
        if not is_ns(path):
            continue
        links = subprocess.run(["nsenter", f"--net={path}", "ip", "-o",
                                "link"], capture_output=True, text=True)
        if re.search(rf"^\d+: {want}[@:]", links.stdout, re.M):
            return path
    raise AssertionError(f"shim {pid} holds no {which} namespace")


def slot_files(stack, i):
    d = net_dir(stack)
    return [n for n in os.listdir(d) if n.startswith(f"{i}.")
            and n != f"{i}.lock"]


def lock_state(stack, i):
    try:
        with open(os.path.join(net_dir(stack), f"{i}.lock")) as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


class GatewaySide:
    """A UDP listener on gateway:53 inside slot i's namespace: what
    reaches the gateway from the guest."""

    def __init__(self, stack, sid, i):
        gw, _ = slot_addrs(i)
        path = slot_ns(stack, sid, "gw")
        code = ("import socket,sys\n"
                "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                # Beside the socket the shim holds for the gateway
                # (which never starts here): the later bind gets the
                # datagrams.
                "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                f"s.bind(('{gw}',53))\n"
                "print('ready',flush=True)\n"
                "while True:\n"
                "  d,a=s.recvfrom(4096)\n"
                "  print(a[0],flush=True)\n")
        self.p = subprocess.Popen(["nsenter", f"--net={path}",
                                   "/usr/bin/python3", "-u", "-c", code],
                                  stdout=subprocess.PIPE)
        self.buf = b""
        self._read_until(b"ready\n", 10)

    def _read_until(self, want, secs):
        fd = self.p.stdout.fileno()
        deadline = time.time() + secs
        while want not in self.buf and time.time() < deadline:
            r, _, _ = select.select([fd], [], [], deadline - time.time())
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                self.buf += chunk
        assert want in self.buf, self.buf

    def sources(self, wait=1.0):
        """Source addresses of the datagrams received so far."""
        fd = self.p.stdout.fileno()
        deadline = time.time() + wait
        while time.time() < deadline:
            r, _, _ = select.select([fd], [], [], deadline - time.time())
            if r:
                self.buf += os.read(fd, 4096)
        return self.buf.decode().split()[1:]

    def close(self):
        self.p.kill()
        self.p.wait()


def test_guest_has_the_slots_address_and_route(api, stack, sandboxes,
                                               driver):
    sb = sandboxes.create()
    i = slot_of(stack, sb["id"])
    assert i is not None, "the sandbox's shim holds no network slot"
    assert lock_state(stack, i).startswith(f"taken {driver}")
    gw, guest = slot_addrs(i)
    r = sh(api, sb["id"], "ip -4 addr show eth0; echo ==; "
           "cat /proc/net/route; echo ==; cat /etc/resolv.conf")
    assert r["exit_code"] == 0, r
    addr, route, resolv = r["stdout"].split("==\n")
    assert f"inet {guest}/30" in addr, addr
    # /proc/net/route: Iface Destination Gateway (little-endian hex).
    le = lambda a: socket.inet_aton(a)[::-1].hex().upper()
    rows = [l.split() for l in route.splitlines()[1:]]
    assert ["eth0", "00000000", le(gw)] in [r[:3] for r in rows], route
    assert resolv.strip() == f"nameserver {gw}", resolv
    # The guest reaches the gateway's side from its own address.
    side = GatewaySide(stack, sb["id"], i)
    try:
        sh(api, sb["id"], f"timeout 2 nslookup example.com {gw} || true",
           timeout=10)
        assert guest in side.sources(), "DNS to the gateway did not arrive"
    finally:
        side.close()


def test_ns_root_cannot_reconfigure_its_network(api, stack, sandboxes,
                                                driver):
    if driver != "ns":
        pytest.skip("a vm's root owns its guest kernel's network; the "
                    "slot's rules are its boundary (test_spoofed_source)")
    sb = sandboxes.create()
    i = slot_of(stack, sb["id"])
    gw, guest = slot_addrs(i)
    for cmd in ("ip addr add 10.200.255.6/30 dev eth0",
                f"ip route add 192.0.2.0/24 via {gw}",
                "ip link set eth0 down",
                "ip link set eth0 address 02:00:00:00:00:01",
                f"arping -c 1 -w 1 -s 10.200.255.6 -I eth0 {gw}"):
        r = sh(api, sb["id"], cmd + " 2>&1")
        assert r["exit_code"] != 0, f"{cmd}: {r}"
    r = sh(api, sb["id"], "ip -4 addr show eth0; ip route")
    assert f"inet {guest}/30" in r["stdout"], r
    assert "192.0.2.0" not in r["stdout"], r


def test_spoofed_source_does_not_reach_the_gateway(api, stack, sandboxes,
                                                   driver):
    sb = sandboxes.create()
    i = slot_of(stack, sb["id"])
    gw, guest = slot_addrs(i)
    side = GatewaySide(stack, sb["id"], i)
    try:
        if driver == "vm":
            # Root of the guest kernel may set any address: the slot's
            # rules let only the sandbox's own through.
            # A static neighbour entry for the gateway (its MAC learnt
            # from a genuine query first), so the spoofed datagram is
            # really sent, not held back by an ARP the rules refuse.
            r = sh(api, sb["id"],
                   f"timeout 2 nslookup example.com {gw} >/dev/null 2>&1; "
                   f"mac=$(awk '$1 == \"{gw}\" {{print $4}}' /proc/net/arp); "
                   f"ip addr del {guest}/30 dev eth0 && "
                   "ip addr add 10.200.255.6/16 dev eth0 && "
                   f"arp -s {gw} $mac && "
                   f"timeout 2 nslookup example.com {gw}; "
                   "echo mac=$mac; "
                   f"ip addr del 10.200.255.6/16 dev eth0; "
                   f"ip addr add {guest}/30 dev eth0", timeout=20)
            assert re.search(r"mac=([0-9a-f]{2}:){5}[0-9a-f]{2}",
                             r["stdout"]), r
        else:
            r = sh(api, sb["id"],
                   f"arping -c 1 -w 1 -s 10.200.255.6 -I eth0 {gw}; "
                   "ip addr add 10.200.255.6/16 dev eth0; "
                   f"timeout 2 nslookup example.com {gw}",
                   timeout=20)
        got = side.sources()
        assert "10.200.255.6" not in got, (got, r)
        # The same from the sandbox's own address arrives: the listener
        # saw nothing because the rules dropped it, not for want of ears.
        sh(api, sb["id"], f"timeout 2 nslookup example.com {gw}; true",
           timeout=20)
        assert guest in side.sources(), side.buf
    finally:
        side.close()


# SO_NETNS_COOKIE (Linux 5.14): a network namespace's 64-bit id, never
# reused, unlike its nsfs inode number, which the next namespace made
# (a warm-pool refill right after a delete) may get again.
SO_NETNS_COOKIE = 71
COOKIE_OF = ("import socket; s = socket.socket(); print(int.from_bytes("
             f"s.getsockopt(socket.SOL_SOCKET, {SO_NETNS_COOKIE}, 8), "
             "'little'))")


def netns_cookie(path):
    """The cookie of the network namespace at path, or None when it
    cannot be entered (gone)."""
    p = subprocess.run(["nsenter", f"--net={path}", sys.executable, "-c",
                        COOKIE_OF], capture_output=True, text=True)
    return int(p.stdout) if p.returncode == 0 else None


def netns_id(path):
    """(inode, cookie): the namespace at path, told apart from a later
    one with its inode number."""
    cookie = netns_cookie(path)
    assert cookie is not None, f"cannot enter {path}"
    return os.stat(path).st_ino, cookie


def ns_holders(ino):
    """Paths through which a process (as its namespace or by fd) or a
    mount of the host's reaches a namespace of inode ino."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if is_ns(f"/proc/{pid}/ns/net", ino):
            yield f"/proc/{pid}/ns/net"
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            if is_ns(f"/proc/{pid}/fd/{fd}", ino):
                yield f"/proc/{pid}/fd/{fd}"
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if f"net:[{ino}]" in fields[3]:
                yield fields[4]


def ns_held(ns):
    """Whether namespace ns (netns_id) is still held by anything."""
    ino, cookie = ns
    return any(netns_cookie(p) == cookie for p in ns_holders(ino))


def gone_or_renewed(stack, i, ns):
    """Slot i's namespace ns (netns_id) is gone (no process, fd or mount
    keeps it) and its lock not taken (the index may already be prepared
    afresh: new namespaces)."""
    return (not lock_state(stack, i).startswith("taken") and
            not ns_held(ns))


def test_a_live_slot_is_out_of_the_mount_table(api, stack, sandboxes,
                                               driver):
    """The shim holds its slot by lock and fds; none of the host's mounts
    is the sandbox's (each would be copied by every later jail)."""
    sb = sandboxes.create()
    i = slot_of(stack, sb["id"])
    assert lock_state(stack, i).startswith("taken"), lock_state(stack, i)
    assert slot_files(stack, i) == [], slot_files(stack, i)
    with open("/proc/self/mountinfo") as f:
        mounts = f.read()
    ino = os.stat(slot_ns(stack, sb["id"], "gw")).st_ino
    assert f"net:[{ino}]" not in mounts
    assert f" {net_dir(stack)}/{i}." not in mounts


def test_delete_removes_the_slot(api, stack, sandboxes, driver):
    sb = sandboxes.create()
    i = slot_of(stack, sb["id"])
    ns = netns_id(slot_ns(stack, sb["id"], "gw"))
    assert ns_held(ns)
    r = api.delete(f"{api.base}/v1/sandboxes/{sb['id']}", timeout=TIMEOUT)
    assert r.status_code in (200, 204), r.text
    deadline = time.time() + 10
    while time.time() < deadline and not gone_or_renewed(stack, i, ns):
        time.sleep(0.1)
    assert gone_or_renewed(stack, i, ns), (lock_state(stack, i),
                                            slot_files(stack, i))


def test_reconcile_removes_a_killed_shims_slot(api, stack, sandboxes,
                                               driver):
    sb = sandboxes.create()
    i = slot_of(stack, sb["id"])
    ns_before = netns_id(slot_ns(stack, sb["id"], "gw"))
    pid = shim_of(stack, sb["id"])
    os.kill(pid, signal.SIGKILL)

    # The controller reconciles every 10 s; it may prepare the index
    # afresh right after (new namespaces, state "ready").
    deadline = time.time() + 40
    while time.time() < deadline and not gone_or_renewed(stack, i,
                                                         ns_before):
        time.sleep(0.5)
    assert gone_or_renewed(stack, i, ns_before), (lock_state(stack, i),
                                                  slot_files(stack, i))


def test_back_to_back_creates_each_get_their_own_slot(api, stack,
                                                      sandboxes, driver):
    n = 6 if driver == "ns" else 3
    sbs = [sandboxes.create() for _ in range(n)]
    slots = [slot_of(stack, sb["id"]) for sb in sbs]
    assert None not in slots, slots
    assert len(set(slots)) == n, slots
    for sb, i in zip(sbs, slots):
        _, guest = slot_addrs(i)
        r = sh(api, sb["id"], "ip -4 addr show eth0")
        assert f"inet {guest}/30" in r["stdout"], r
