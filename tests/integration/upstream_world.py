"""An upstream world in a network namespace of the test's own, for the
gateway's tests (test_gateway.py) and the red-team suite
(tests/redteam/test_egress.py): a namespace reached from the host through
a veth, one or more addresses in it each served by gateway_upstream.py
(DNS, HTTP, HTTPS with a leaf of a test CA naming every name, a TCP echo
on 7000), and optionally a sniffer (upstream_sniff.py) that reports every
packet arriving from anywhere but the host's end of the veth. Nothing
here listens outside that namespace."""
import ipaddress
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"


def run(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True,
                          text=True, timeout=60, **kw)


class Lines:
    """JSON lines of a child's stdout, with a timeout."""

    def __init__(self, p):
        self.p, self.buf = p, b""

    def next(self, timeout=30):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.p.stdout], [], [], max(left, 0))
            if not r:
                raise AssertionError("no line from %s" % self.p.args[:3])
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                raise AssertionError("%s exited: %s" % (
                    self.p.args[:3], self.p.stderr.read().decode()))
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def drain(self, wait=0.3):
        """Every line that comes within wait seconds of the last."""
        out = []
        while True:
            try:
                out.append(self.next(wait))
            except AssertionError:
                return out


def egress_policy(policies, ports, tail=""):
    """Write policies/egress.lua (the directory is made): the shipped
    policy with its own `extra_ports = {}` table, left empty there,
    replaced by ports (Lua, e.g. allowed.test's 7000 as TCP pass-through)
    and tail appended."""
    os.makedirs(policies, mode=0o755, exist_ok=True)
    repo = os.path.dirname(os.path.dirname(HERE))
    with open(os.path.join(repo, "policies", "egress.lua")) as f:
        src = f.read()
    start = src.index("extra_ports = {")
    end = src.index("}", start) + 1
    with open(os.path.join(policies, "egress.lua"), "w") as f:
        f.write(src[:start] + ports.strip() + src[end:] + tail)


def make_certs(d, names):
    """A test CA and one leaf with every name as a SAN."""
    ca_key, ca = os.path.join(d, "up-ca.key"), os.path.join(d, "up-ca.crt")
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
        "ec_paramgen_curve:P-256", "-nodes", "-keyout", ca_key, "-out", ca,
        "-days", "2", "-subj", "/CN=airlock test upstream CA")
    key, csr, crt = (os.path.join(d, n) for n in
                     ("up.key", "up.csr", "up.crt"))
    run("openssl", "req", "-newkey", "ec", "-pkeyopt",
        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr,
        "-subj", "/CN=" + names[0])
    ext = os.path.join(d, "up.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\n" % ",".join("DNS:" + n for n in names))
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
        "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
    for p in (ca, crt, key):
        os.chmod(p, 0o644)
    return ca, crt, key


def clear_stale_world(tag, net):
    """A world of an earlier run that was killed before its teardown
    leaves its host end behind: a link with an address in net and a
    route to net that wins over the new one (the servers then seem to
    be down). Such a link of this tag is removed; one of anything else
    is a clash, said at once rather than as every test's timeout."""
    out = subprocess.run(["ip", "-j", "addr", "show"], capture_output=True,
                         text=True, check=True).stdout
    prefix = ipaddress.ip_network(net)
    for link in json.loads(out):
        for a in link.get("addr_info", []):
            try:
                inside = ipaddress.ip_address(a["local"]) in prefix
            except ValueError:
                continue
            if not inside:
                continue
            if link["ifname"].startswith(tag[:4] + "h"):
                subprocess.run(["ip", "link", "del", link["ifname"]],
                               capture_output=True)
            else:
                raise AssertionError(
                    f"the test world's network {net} is already on this "
                    f"host: {link['ifname']} has {a['local']}")


def check_route(host_if, addr):
    """The host reaches addr through the world's link, not another."""
    out = subprocess.run(["ip", "route", "get", addr], capture_output=True,
                         text=True).stdout
    assert f" dev {host_if} " in out, \
        f"the host reaches the test world's {addr} elsewhere: {out}"


def upstream_world(tag, host_addr, net, servers, names, sniff=False,
                   files=None):
    """Generator (for a fixture): the namespace <tag>-up-<pid>, the host's
    end of the veth at host_addr (prefix of net), one gateway_upstream.py
    per address of servers (each answering DNS for names, {name: ip};
    files: a directory of <host>/<path> files they serve, or None).
    Yields {"dir", "ca", "ns", "log": {addr: Lines}, "sniff": Lines}."""
    d = tempfile.mkdtemp(prefix=tag + "-world-")
    os.chmod(d, 0o711)
    pid = os.getpid() % 100000
    ns = "%s-up-%d" % (tag, os.getpid())
    host_if, up_if = "%sh%d" % (tag[:4], pid), "%su%d" % (tag[:4], pid)
    plen = net.split("/")[1]
    procs = []
    try:
        ca, crt, key = make_certs(d, sorted(names))
        clear_stale_world(tag, net)
        run("ip", "netns", "add", ns)
        run("ip", "link", "add", host_if, "type", "veth", "peer", "name",
            up_if, "netns", ns)
        # IPv6 addresses skip duplicate address detection: usable at
        # once, not a second later.
        nodad = ["nodad"] if ":" in host_addr else []
        run("ip", "addr", "add", "%s/%s" % (host_addr, plen), "dev",
            host_if, *nodad)
        run("ip", "link", "set", host_if, "up")
        for a in servers:
            run("ip", "-n", ns, "addr", "add", "%s/%s" % (a, plen), "dev",
                up_if, *nodad)
        run("ip", "-n", ns, "link", "set", up_if, "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        for a in servers:
            check_route(host_if, a)
        logs, sniffer = {}, None
        for a in servers:
            p = subprocess.Popen(
                ["ip", "netns", "exec", ns, PY,
                 os.path.join(HERE, "gateway_upstream.py"), a, crt, key,
                 json.dumps(names)], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(os.environ, UPSTREAM_FILES=files or ""))
            procs.append(p)
            logs[a] = Lines(p)
            assert logs[a].next() == {"ready": True}
        if sniff:
            p = subprocess.Popen(
                ["ip", "netns", "exec", ns, PY,
                 os.path.join(HERE, "upstream_sniff.py"), up_if, host_addr],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            procs.append(p)
            sniffer = Lines(p)
            assert sniffer.next() == {"ready": True}
        yield {"dir": d, "ca": ca, "ns": ns, "log": logs, "sniff": sniffer,
               "host_if": host_if}
    finally:
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)
