"""The egress gateway (airlock-gateway) standing alone, against an upstream
world in a network namespace this test makes.

The world (gateway_upstream.py in namespace gwp-up-<pid>, reached from the
host through a veth in 10.251.77.0/24, the one private range the gateway
is allowed to dial, AIRLOCK_UPSTREAM_ALLOW_CIDRS): a resolver for
allowed.test, forbidden.test (both 10.251.77.2, one address serving both
names like a CDN), private.test (127.0.0.1) and twoaddr.test (first
10.251.77.3, where no host answers, then 10.251.77.2); HTTPS and HTTP servers
with a leaf of the test's own CA (AIRLOCK_UPSTREAM_CA); a TCP echo on
7000.

The gateway: netslot-tool's gateway command leases a network slot, runs
the mint service as the controller does and starts build*/airlock-gateway
with al_gateway_launch (its own uid, no capabilities, its seccomp
filter), then forwards our GW_CONFIG lines. The guest: processes in the
slot's guest namespace (nsenter), with /etc/resolv.conf naming the
gateway (a private mount namespace), trusting the host CA
(<state>/keys/ca.crt) only. Only loopback and the namespaces made here
carry traffic; 203.0.113.10 (TEST-NET-3) is never routed anywhere."""
import glob
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import BUILD, NETSLOT_TOOL as TOOL, REPO, needs_root
from upstream_world import Lines, egress_policy, upstream_world

HERE = os.path.dirname(os.path.abspath(__file__))
GATEWAY = os.path.join(BUILD, "airlock-gateway")
PY = "/usr/bin/python3"
UP_ADDR, HOST_ADDR, UP_NET = "10.251.77.2", "10.251.77.1", "10.251.77.0/24"
DEAD_ADDR = "10.251.77.3"  # in the world's network, but no host has it
SANDBOX = "sbx-gwtest"
HEAD_TIMEOUT_MS = 3000

pytestmark = needs_root


@pytest.fixture(scope="module")
def world():
    names = {"allowed.test": UP_ADDR, "forbidden.test": UP_ADDR,
             "private.test": "127.0.0.1",
             "twoaddr.test": [DEAD_ADDR, UP_ADDR],
             "deadonly.test": [DEAD_ADDR]}
    yield from upstream_world("gwp", HOST_ADDR, UP_NET, [UP_ADDR], names)


POLICY_PORTS = """
extra_ports = {
  ["allowed.test"] = { 7000 },
}
"""


@pytest.fixture(scope="module")
def gw(world):
    yield from gateway(world, UP_ADDR + ":53", UP_NET,
                       ["allowed.test", "private.test", "twoaddr.test",
                        "deadonly.test"])


def gateway(world, dns, allow_cidrs, allow):
    """Generator (for a fixture): the gateway on a slot of its own,
    resolving through dns, allowed to dial allow_cidrs, configured in
    allowlist mode for the names allow."""
    state = tempfile.mkdtemp(prefix="gw-proxy-state-")
    os.chmod(state, 0o711)
    os.makedirs(os.path.join(state, "run"), mode=0o755)
    policies = os.path.join(state, "policies")
    # Let allowed.test's port 7000 through as TCP.
    egress_policy(policies, POLICY_PORTS)
    env = dict(os.environ,
               AIRLOCK_STATE=state, AIRLOCK_POLICIES=policies,
               AIRLOCK_UPSTREAM_DNS=dns,
               AIRLOCK_UPSTREAM_CA=world["ca"],
               AIRLOCK_UPSTREAM_ALLOW_CIDRS=allow_cidrs,
               AIRLOCK_GW_HEAD_TIMEOUT_MS=str(HEAD_TIMEOUT_MS),
               # These tests look for one decision after hundreds (512
               # lookups, say): the log's rate has its own tests
               # (redteam/test_log_flood.py).
               AIRLOCK_EGRESS_LOG_RATE="10000",
               AIRLOCK_EGRESS_LOG_BURST="100000")
    env.pop("AIRLOCK_UPSTREAM_HOSTS", None)
    p = subprocess.Popen([TOOL, state, "gateway", GATEWAY, SANDBOX],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    lines = Lines(p)
    resolv = os.path.join(state, "resolv.conf")
    try:
        info = lines.next()
        with open(resolv, "w") as f:
            f.write("nameserver %s\noptions timeout:2 attempts:2\n" %
                    info["gateway"])

        def configure(network):
            p.stdin.write((json.dumps(network) + "\n").encode())
            p.stdin.flush()
            return lines.next()

        ack = configure({"mode": "allowlist", "allow": allow})
        assert ack == {"ok": True}, ack
        yield {"state": state, "info": info, "resolv": resolv,
           "policy": os.path.join(policies, "egress.lua"),
               "configure": configure, "proc": p,
               "ca": os.path.join(state, "keys", "ca.crt")}
    finally:
        if p.poll() is None:
            p.stdin.close()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        err = p.stderr.read().decode()
        print(err)
        subprocess.run([TOOL, state, "drain", "ns"], capture_output=True)
        subprocess.run([TOOL, state, "reconcile"], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)
    assert p.returncode == 0, err
    for bad in ("ERROR: AddressSanitizer", "runtime error:",
                "LeakSanitizer", "UndefinedBehaviorSanitizer"):
        assert bad not in err, err


def guest(gw, *cmd, stdin=None, timeout=60):
    """cmd in the slot's guest namespace, resolving through the gateway."""
    wrapped = ["nsenter", "--net=" + gw["info"]["guest_ns"], "unshare",
               "-m", "sh", "-c",
               'mount --bind "$0" /etc/resolv.conf && exec "$@"',
               gw["resolv"], *cmd]
    return subprocess.run(wrapped, capture_output=True, text=True,
                          timeout=timeout, input=stdin)


def curl(gw, *args):
    return guest(gw, "curl", "-sS", "--max-time", "20", "--cacert", gw["ca"],
                 *args)


def egress(gw, want, timeout=5, sandbox=SANDBOX):
    """Egress records matching all of want's fields (waiting for the
    writer's flush)."""
    d = os.path.join(gw["state"], "run", "egress", sandbox)
    deadline = time.monotonic() + timeout
    while True:
        found = []
        for path in sorted(glob.glob(os.path.join(d, "[0-9]*"))):
            with open(path) as f:
                for line in f:
                    rec = json.loads(line)
                    if all(rec.get(k) == v for k, v in want.items()):
                        found.append(rec)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_gateway_runs_confined(gw):
    info = gw["info"]
    with open("/proc/%d/status" % info["pid"]) as f:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in f
                      if ":\t" in line)
    assert status["Uid"].split() == [str(info["uid"])] * 4
    assert status["Gid"].split()[0] == str(info["uid"])
    assert status["Groups"].strip() == ""
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[cap], 16) == 0, cap
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"
    # In the host's network namespace (upstream connections go from there).
    assert os.readlink("/proc/%d/ns/net" % info["pid"]) == \
        os.readlink("/proc/self/ns/net")
    fds = sorted(int(n) for n in os.listdir("/proc/%d/fd" % info["pid"]))
    assert fds[:7] == [0, 1, 2, 3, 4, 5, 6]
    # Its own files: the egress log directory and the address journal.
    for path, mode in ((os.path.join(gw["state"], "run", "egress",
                                     SANDBOX), 0o700),
                       (os.path.join(gw["state"], "run", "gw",
                                     SANDBOX + ".fakeip"), 0o600)):
        st = os.stat(path)
        assert (st.st_uid, st.st_mode & 0o777) == (info["uid"], mode), path
    print("launch %d ms" % info["launch_ms"])


def test_allowed_name_works_over_https_and_http(gw, world):
    r = curl(gw, "https://allowed.test/echo")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello allowed.test /echo\n"
    r = curl(gw, "http://allowed.test/echo?q=1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello allowed.test /echo?q=1\n"
    assert egress(gw, {"allow": True, "protocol": "https",
                       "name": "allowed.test", "method": "GET",
                       "path": "/echo"})
    assert egress(gw, {"allow": True, "protocol": "dns",
                       "name": "allowed.test"})


def test_bodies_are_reframed_both_ways(gw, world):
    r = curl(gw, "-d", "abc=1", "https://allowed.test/echo")
    assert r.stdout == "posted 5: abc=1\n", r.stderr
    r = curl(gw, "-H", "Transfer-Encoding: chunked", "-d", "xyz",
             "https://allowed.test/echo")
    assert r.stdout == "posted chunked 3: xyz\n", r.stderr
    r = curl(gw, "https://allowed.test/chunked")
    assert r.stdout == "chunk-one chunk-two", r.stderr
    # Larger than every buffer bound: it flows under backpressure.
    n = 24 << 20
    t0 = time.monotonic()
    r = curl(gw, "-o", "/dev/null", "-w", "%{size_download}",
             "https://allowed.test/big/%d" % n)
    took = time.monotonic() - t0
    assert r.returncode == 0 and int(r.stdout) == n, r.stderr
    t0 = time.monotonic()
    d = subprocess.run(["curl", "-sS", "--cacert", world["ca"], "--resolve",
                        "allowed.test:443:" + UP_ADDR, "-o", "/dev/null",
                        "-w", "%{size_download}",
                        "https://allowed.test/big/%d" % n],
                       capture_output=True, text=True, timeout=60)
    direct = time.monotonic() - t0
    assert int(d.stdout) == n, d.stderr
    print("24 MiB over HTTPS: through the gateway %.2f s (%.0f MB/s), "
          "directly %.2f s (%.0f MB/s): %.2fx direct"
          % (took, n / took / 1e6, direct, n / direct / 1e6, direct / took))


def test_synthetic_addresses_are_journaled(gw):
    addr = synthetic(gw, "allowed.test")
    with open(os.path.join(gw["state"], "run", "gw",
                           SANDBOX + ".fakeip")) as f:
        lines = f.read().splitlines()
    assert lines[0] == "airlock-fakeip 1"
    assert "%s allowed.test" % addr in lines[1:]


def test_forbidden_name_does_not_resolve(gw, world):
    r = curl(gw, "https://forbidden.test/")
    assert r.returncode == 6, (r.returncode, r.stderr)  # no such host
    assert egress(gw, {"allow": False, "protocol": "dns",
                       "name": "forbidden.test"})


def test_domain_fronting_is_refused(gw, world):
    r = curl(gw, "-o", "/dev/null", "-w", "%{http_code}", "-H",
             "Host: forbidden.test", "https://allowed.test/echo")
    assert r.stdout == "403", (r.stdout, r.stderr)
    recs = egress(gw, {"allow": False, "protocol": "https",
                       "name": "forbidden.test"})
    assert recs and "Host" in recs[0]["reason"]


def test_second_host_on_kept_alive_connection_is_refused(gw, world):
    r = guest(gw, PY, os.path.join(HERE, "gateway_probe.py"), "https",
              "allowed.test", gw["ca"], "allowed.test", "forbidden.test",
              "allowed.test")
    out = [json.loads(line) for line in r.stdout.splitlines()]
    assert out[0] == {"host": "allowed.test", "status": 200,
                      "body": "hello allowed.test /echo\n"}, r.stderr
    assert out[1]["host"] == "forbidden.test"
    assert out[1].get("status") == 403
    # The connection was closed after the refusal.
    assert out[2] == {"host": "allowed.test", "closed": True}
    # Plain HTTP is bound to its destination's name the same way.
    r = guest(gw, PY, os.path.join(HERE, "gateway_probe.py"), "http",
              "allowed.test", gw["ca"], "allowed.test", "forbidden.test")
    out = [json.loads(line) for line in r.stdout.splitlines()]
    assert [o.get("status") for o in out] == [200, 403], r.stderr


def test_ip_literals_are_refused(gw):
    # Routed to the gateway by the slot's rules, refused there: the
    # address is not one its DNS gave out.
    r = curl(gw, "-k", "https://203.0.113.10/")
    assert r.returncode != 0
    r = curl(gw, "http://203.0.113.10/")
    assert r.returncode != 0
    assert egress(gw, {"allow": False, "name": "203.0.113.10",
                       "port": 443})
    assert egress(gw, {"allow": False, "name": "203.0.113.10", "port": 80})
    # The upstream's own address is not even routed to the gateway.
    r = curl(gw, "-k", "--connect-timeout", "2", "https://%s/" % UP_ADDR)
    assert r.returncode != 0


def test_allowed_name_with_a_private_address_is_refused(gw):
    r = curl(gw, "-o", "/dev/null", "-w", "%{http_code}",
             "https://private.test/echo")
    assert r.stdout == "502", (r.stdout, r.stderr)
    recs = egress(gw, {"allow": False, "name": "private.test"})
    assert recs and "loopback" in recs[0]["reason"], recs


def test_tcp_pass_through_only_where_the_policy_allows(gw):
    script = ("import socket,sys\n"
              "s=socket.create_connection(('allowed.test',int(sys.argv[1])),"
              "timeout=10)\n"
              "s.sendall(b'ping\\n')\n"
              "try:\n print(s.recv(100).decode().strip() or 'eof')\n"
              "except OSError as e:\n print('error')\n")
    r = guest(gw, PY, "-c", script, "7000")
    assert r.stdout.strip() == "ping", r.stderr
    assert egress(gw, {"allow": True, "protocol": "tcp",
                       "name": "allowed.test", "port": 7000})
    r = guest(gw, PY, "-c", script, "7001")
    assert r.stdout.strip() in ("eof", "error"), r.stdout
    assert egress(gw, {"allow": False, "protocol": "tcp",
                       "name": "allowed.test", "port": 7001})


def test_network_change_applies_to_open_connections(gw):
    p = subprocess.Popen(
        ["nsenter", "--net=" + gw["info"]["guest_ns"], "unshare", "-m", "sh",
         "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"',
         gw["resolv"], PY, os.path.join(HERE, "gateway_probe.py"), "https",
         "allowed.test", gw["ca"], "allowed.test", "wait", "allowed.test"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = Lines(p)
    try:
        assert lines.next()["status"] == 200
        assert lines.next() == {"waiting": True}
        ack = gw["configure"]({"mode": "allowlist", "allow": []})
        assert ack == {"ok": True}
        p.stdin.write(b"go\n")
        p.stdin.flush()
        assert lines.next().get("status") == 403
        # And the DNS of the next connection.
        r = curl(gw, "https://allowed.test/echo")
        assert r.returncode == 6, r.stderr
    finally:
        p.kill()
        p.wait()
        assert gw["configure"]({"mode": "allowlist",
                                "allow": ["allowed.test",
                                          "private.test"]}) == {"ok": True}
    # Open mode: any public name, still through the gateway and logged.
    assert gw["configure"]({"mode": "open"}) == {"ok": True}
    try:
        r = curl(gw, "https://forbidden.test/echo")
        assert r.stdout == "hello forbidden.test /echo\n", r.stderr
        assert egress(gw, {"allow": True, "protocol": "https",
                           "name": "forbidden.test"})
    finally:
        assert gw["configure"]({"mode": "allowlist",
                                "allow": ["allowed.test",
                                          "private.test"]}) == {"ok": True}


PROBE = os.path.join(HERE, "gateway_probe.py")

# (what, raw request on a TLS connection to allowed.test, status or None
# for "closed without an answer")
RAW = [
    ("leading empty line before a fronted request",
     r"\r\nGET /echo HTTP/1.1\r\nHost: forbidden.test\r\n\r\n", 400),
    ("absolute-form target naming another host",
     r"GET https://forbidden.test/echo HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
     400),
    ("absolute-form target and Host both another host",
     r"GET https://forbidden.test/echo HTTP/1.1\r\nHost: forbidden.test\r\n\r\n",
     403),
    ("duplicate Host",
     r"GET /echo HTTP/1.1\r\nHost: allowed.test\r\nHost: forbidden.test\r\n\r\n",
     400),
    ("Host with another port",
     r"GET /echo HTTP/1.1\r\nHost: allowed.test:8443\r\n\r\n", 403),
    ("Transfer-Encoding with Content-Length",
     r"POST /echo HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\n"
     r"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("CONNECT inside the intercepted stream",
     r"CONNECT forbidden.test:443 HTTP/1.1\r\nHost: forbidden.test:443\r\n\r\n",
     405),
    ("h2c upgrade",
     r"GET /echo HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade, "
     r"HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
     400),
    ("obs-fold", r"GET /echo HTTP/1.1\r\nHost: allowed.test\r\nX: a\r\n b\r\n\r\n",
     400),
    # Refused as the upstream connects: the gateway used to crash here.
    ("bad chunk size as the body's first bytes",
     r"POST /echo HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: "
     r"chunked\r\n\r\nffffffffffffffff1\r\n\r\n", 400),
    ("HTTP/2 preface", r"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
]


@pytest.mark.parametrize("what,payload,status", RAW, ids=[r[0] for r in RAW])
def test_framing_and_binding_tricks_are_refused(gw, world, what, payload,
                                                status):
    world["log"][UP_ADDR].drain(0.1)
    r = guest(gw, PY, PROBE, "raw", "https", "allowed.test", gw["ca"],
              payload)
    out = json.loads(r.stdout)
    assert out.get("status") == status, (what, out, r.stderr)
    seen = world["log"][UP_ADDR].drain()
    assert not [e for e in seen if "http" in e], (what, seen)


def test_case_and_trailing_dot_are_the_same_name(gw):
    r = guest(gw, PY, PROBE, "raw", "https", "allowed.test", gw["ca"],
              r"GET /echo HTTP/1.1\r\nHost: ALLOWED.Test.\r\n\r\n")
    out = json.loads(r.stdout)
    assert out["status"] == 200, out
    assert out["body"] == "hello allowed.test /echo\n", out


def test_a_request_smuggled_in_a_body_stays_a_body(gw, world):
    inner = "GET /echo HTTP/1.1\r\nHost: forbidden.test\r\n\r\n"
    payload = ("POST /echo HTTP/1.1\r\nHost: allowed.test\r\n"
               "Content-Length: %d\r\n\r\n%s" % (len(inner), inner))
    world["log"][UP_ADDR].drain(0.1)
    r = guest(gw, PY, PROBE, "raw", "https", "allowed.test", gw["ca"],
              payload.replace("\r\n", r"\r\n"))
    out = json.loads(r.stdout)
    assert out["status"] == 200 and out["body"].startswith("posted 44"), out
    hosts = [e["http"] for e in world["log"][UP_ADDR].drain() if "http" in e]
    assert hosts == ["allowed.test"]


def synthetic(gw, name):
    r = guest(gw, "getent", "ahostsv4", name)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()[0]


def test_sni_of_another_name_fails_the_handshake(gw):
    # private.test is allowed too, but this address is allowed.test's.
    addr = synthetic(gw, "allowed.test")
    assert addr.startswith("198.18.") or addr.startswith("198.19.")
    r = curl(gw, "--resolve", "private.test:443:" + addr,
             "https://private.test/echo")
    assert r.returncode == 35, (r.returncode, r.stderr)  # TLS handshake
    recs = egress(gw, {"allow": False, "protocol": "https",
                       "name": "private.test", "port": 443})
    assert recs, "the refused handshake is not in the egress log"


def test_synthetic_address_never_given_out_is_refused(gw):
    r = curl(gw, "-k", "https://198.19.255.7/")
    assert r.returncode != 0
    recs = egress(gw, {"allow": False, "name": "198.19.255.7"})
    assert recs and "never given out" in recs[0]["reason"]


def test_kept_alive_latency(gw, world):
    """Figures: 300 small requests on one kept-alive HTTPS connection,
    through the gateway and directly from the host's namespace."""
    r = guest(gw, PY, PROBE, "time", "https", "allowed.test", gw["ca"],
              "300")
    via = json.loads(r.stdout)
    # Directly: the host reaches the upstream through the veth, with
    # the upstream CA; allowed.test pinned to its address.
    script = ("import socket,ssl,sys\n"
              "sys.argv=[0,'time','https','allowed.test',%r,'300']\n"
              "orig=socket.create_connection\n"
              "socket.create_connection=lambda a,**k: orig((%r,a[1]),**k)\n"
              "exec(open(%r).read())\n" % (world["ca"], UP_ADDR, PROBE))
    d = subprocess.run([PY, "-c", script], capture_output=True, text=True,
                       timeout=60)
    direct = json.loads(d.stdout)
    print("kept-alive HTTPS request: via gateway p50 %d us p99 %d us; "
          "direct p50 %d us p99 %d us; added p50 %d us"
          % (via["p50_us"], via["p99_us"], direct["p50_us"],
             direct["p99_us"], via["p50_us"] - direct["p50_us"]))
    assert via["p50_us"] > 0


def test_connections_are_bounded(gw):
    """GW_CONNS_MAX (512) connections at once; past that one is closed at
    once, and the gateway serves again when they are gone."""
    script = ("import socket,sys,resource\n"
              "resource.setrlimit(resource.RLIMIT_NOFILE,(4096,4096))\n"
              "held=[socket.create_connection(('allowed.test',80),timeout=10)"
              " for _ in range(512)]\n"
              "extra=socket.create_connection(('allowed.test',80),timeout=10)\n"
              "extra.settimeout(5)\n"
              "try:\n print('eof' if extra.recv(1)==b'' else 'data')\n"
              "except socket.timeout:\n print('open')\n"
              "for s in held: s.close()\n")
    r = guest(gw, PY, "-c", script, timeout=120)
    assert r.stdout.strip() == "eof", (r.stdout, r.stderr)
    assert egress(gw, {"allow": False, "reason": "too many connections",
                       "name": "allowed.test", "port": 80})
    deadline = time.monotonic() + 10
    while True:
        r = curl(gw, "http://allowed.test/echo")
        if r.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert r.stdout == "hello allowed.test /echo\n", r.stderr


def test_policy_file_changes_apply_to_the_next_lookup(gw):
    with open(gw["policy"]) as f:
        good = f.read()
    try:
        with open(gw["policy"], "w") as f:
            f.write(good + '\nnever[#never + 1] = "allowed.test"\n')
        r = curl(gw, "https://allowed.test/echo")
        assert r.returncode == 6, (r.returncode, r.stderr)
        assert egress(gw, {"allow": False, "protocol": "dns",
                           "name": "allowed.test", "reason": "a local name"})
        # A file that does not load keeps the last good policy.
        with open(gw["policy"], "w") as f:
            f.write(good + "\nthis is not lua\n")
        r = curl(gw, "https://allowed.test/echo")
        assert r.returncode == 6, (r.returncode, r.stderr)
    finally:
        with open(gw["policy"], "w") as f:
            f.write(good)
    r = curl(gw, "https://allowed.test/echo")
    assert r.stdout == "hello allowed.test /echo\n", r.stderr


def test_slow_heads_and_silent_connections_are_closed(gw):
    """A head that does not complete within the head timeout gets 408; a
    TLS connection that sends no ClientHello is closed; so is a kept-alive
    connection that sends no next request."""
    script = ("import socket,sys,time\n"
              "def conn(port, data):\n"
              " s=socket.create_connection(('allowed.test',port),timeout=20)\n"
              " s.sendall(data)\n"
              " t0=time.monotonic()\n"
              " got=b''\n"
              " while True:\n"
              "  b=s.recv(4096)\n"
              "  if not b: break\n"
              "  got+=b\n"
              " return [round(time.monotonic()-t0,1), got.split(b'\\r\\n')[0].decode()]\n"
              "print(conn(80,b'GET /echo HTTP/1.1\\r\\nHost: allo'))\n"
              "print(conn(443,b''))\n"
              "print(conn(80,b'GET /echo HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n'))\n")
    r = guest(gw, PY, "-c", script, timeout=60)
    out = [eval(line) for line in r.stdout.splitlines()]
    assert len(out) == 3, (r.stdout, r.stderr)
    limit = HEAD_TIMEOUT_MS / 1000
    (t1, line1), (t2, line2), (t3, line3) = out
    assert line1 == "HTTP/1.1 408 Request Timeout" and \
        limit - 0.5 <= t1 <= limit + 2.5, out[0]
    assert line2 == "" and limit - 0.5 <= t2 <= limit + 2.5, out[1]
    assert line3 == "HTTP/1.1 200 OK" and limit - 0.5 <= t3 <= limit + 2.5, \
        out[2]


def test_pipelined_requests_are_each_checked(gw, world):
    world["log"][UP_ADDR].drain(0.1)
    payload = (r"GET /echo HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
               r"GET /echo HTTP/1.1\r\nHost: forbidden.test\r\n\r\n"
               r"GET /echo HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
    r = guest(gw, PY, PROBE, "raw", "https", "allowed.test", gw["ca"],
              payload)
    out = json.loads(r.stdout)
    assert out["statuses"] == [200, 403], out
    hosts = [e["http"] for e in world["log"][UP_ADDR].drain() if "http" in e]
    assert hosts == ["allowed.test"]


def test_requests_read_with_the_handshake_are_answered(gw):
    # The client's Finished and its requests in one write: the gateway's
    # TLS reads them in one go (read-ahead), so the requests wait in
    # OpenSSL's buffer, not on the socket, and must still be served.
    r = guest(gw, PY, PROBE, "oneflight", "allowed.test", gw["ca"], "3",
              timeout=30)
    assert json.loads(r.stdout) == {"statuses": [200, 200, 200]}, \
        r.stdout + r.stderr[-300:]


def test_expect_continue_is_answered_after_the_decision(gw):
    r = guest(gw, "curl", "-sS", "--max-time", "20", "--cacert", gw["ca"],
              "-H", "Expect: 100-continue", "--data-binary", "@-",
              "https://allowed.test/echo", stdin="x" * 2000)
    assert r.stdout == "posted 2000: %s\n" % ("x" * 2000), r.stderr[-300:]
    r = guest(gw, "curl", "-sS", "--max-time", "20", "--cacert", gw["ca"],
              "-o", "/dev/null", "-w", "%{http_code}", "-H",
              "Expect: 100-continue", "-H", "Host: forbidden.test",
              "--data-binary", "@-", "https://allowed.test/echo",
              stdin="x" * 2000)
    assert r.stdout == "403", (r.stdout, r.stderr)


def test_allowed_sni_to_an_address_the_guest_chose_is_refused(gw):
    # A spoofed answer or /etc/hosts entry: allowed.test at an address the
    # gateway never gave out. SNI and Host are allowed; the address is not.
    r = curl(gw, "--resolve", "allowed.test:443:203.0.113.10",
             "https://allowed.test/echo")
    assert r.returncode != 0
    r = curl(gw, "--resolve", "allowed.test:80:203.0.113.10",
             "http://allowed.test/echo")
    assert r.returncode != 0
    assert egress(gw, {"allow": False, "name": "203.0.113.10", "port": 80,
                       "protocol": "http"})


def test_a_half_closed_request_still_gets_its_answer(gw):
    script = ("import socket\n"
              "s=socket.create_connection(('allowed.test',80),timeout=10)\n"
              "s.sendall(b'GET /echo HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n')\n"
              "s.shutdown(socket.SHUT_WR)\n"
              "got=b''\n"
              "while True:\n"
              " b=s.recv(4096)\n"
              " if not b: break\n"
              " got+=b\n"
              "print(got.split(b'\\r\\n')[0].decode(), got.endswith(b'hello allowed.test /echo\\n'))\n")
    r = guest(gw, PY, "-c", script)
    assert r.stdout.strip() == "HTTP/1.1 200 OK True", (r.stdout, r.stderr)


def gateway_cpu_ms(gw):
    with open("/proc/%d/stat" % gw["info"]["pid"]) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf(
        "SC_CLK_TCK")


def test_gateway_cpu_figures(gw, world):
    """Figures: the gateway's own CPU per new HTTPS connection (guest
    handshake, one request on an upstream connection an earlier guest
    connection left in the pool) and per MB of an HTTPS download."""
    n = 200
    world["log"][UP_ADDR].drain(0.1)
    c0 = gateway_cpu_ms(gw)
    r = guest(gw, PY, PROBE, "conns", "https", "allowed.test", gw["ca"],
              str(n), timeout=120)
    assert json.loads(r.stdout) == {"done": n}, r.stderr
    per_conn = (gateway_cpu_ms(gw) - c0) / n
    seen = [e for e in world["log"][UP_ADDR].drain() if "http" in e]
    assert len(seen) == n
    # One after the other: one upstream connection serves them all.
    assert len({e["peer"] for e in seen}) <= 2, seen[:3]
    size = 48 << 20
    c0 = gateway_cpu_ms(gw)
    r = curl(gw, "-o", "/dev/null", "-w", "%{size_download}",
             "https://allowed.test/big/%d" % size)
    assert int(r.stdout) == size, r.stderr
    per_mb = (gateway_cpu_ms(gw) - c0) / (size / 1e6)
    print("gateway CPU: %.2f ms per new HTTPS connection (%d); %.2f ms per "
          "MB downloaded over HTTPS" % (per_conn, n, per_mb))
    assert per_conn > 0


def test_gateway_dies_with_its_launcher(world):
    """A launcher killed with SIGKILL leaves no gateway behind (its
    parent-death signal, and the EOF of its control channel)."""
    state = tempfile.mkdtemp(prefix="gw-proxy-state2-")
    os.chmod(state, 0o711)
    os.makedirs(os.path.join(state, "run"), mode=0o755)
    env = dict(os.environ, AIRLOCK_STATE=state,
               AIRLOCK_POLICIES=os.path.join(REPO, "policies"),
               AIRLOCK_UPSTREAM_DNS=UP_ADDR + ":53",
               AIRLOCK_UPSTREAM_CA=world["ca"])
    try:
        p = subprocess.Popen([TOOL, state, "gateway", GATEWAY,
                              "sbx-gwtest2"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env)
        info = Lines(p).next()
        assert os.path.exists("/proc/%d" % info["pid"])
        p.kill()
        p.wait()
        deadline = time.monotonic() + 10
        while os.path.exists("/proc/%d/status" % info["pid"]):
            with open("/proc/%d/status" % info["pid"]) as f:
                if "State:\tZ" in f.read():
                    break
            assert time.monotonic() < deadline, "the gateway outlived it"
            time.sleep(0.05)
    finally:
        subprocess.run([TOOL, state, "reconcile"], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)


def test_a_kept_upstream_that_closed_is_dialled_again(gw, world):
    world["log"][UP_ADDR].drain(0.1)
    payload = (r"GET /drop-next HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
               r"GET /echo HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
    r = guest(gw, PY, PROBE, "raw", "https", "allowed.test", gw["ca"],
              payload)
    out = json.loads(r.stdout)
    assert out["statuses"] == [200, 200], out
    seen = world["log"][UP_ADDR].drain()
    assert {"dropped": "allowed.test"} in seen, seen


def upstream_requests(world, path):
    return [e for e in world["log"][UP_ADDR].drain()
            if e.get("path") == path]


def test_upstream_connections_are_kept_for_the_next_guest_connection(
        gw, world):
    """Each curl is a new guest connection: the second and third get the
    upstream connection the first left idle (HTTPS and HTTP alike). A
    network change closes the idle ones: the next request dials anew,
    resuming the TLS session of the name."""
    for scheme in ("https", "http"):
        world["log"][UP_ADDR].drain(0.1)
        path = "/pool-" + scheme
        for _ in range(3):
            r = curl(gw, "%s://allowed.test%s" % (scheme, path))
            assert r.stdout == "hello allowed.test %s\n" % path, r.stderr
        seen = upstream_requests(world, path)
        assert len(seen) == 3 and len({e["peer"] for e in seen}) == 1, seen
    kept = seen[0]["peer"]
    world["log"][UP_ADDR].drain(0.1)
    r = curl(gw, "https://allowed.test/pool-before")
    before = upstream_requests(world, "/pool-before")
    assert len(before) == 1, before
    ack = gw["configure"]({"mode": "allowlist",
                           "allow": ["allowed.test", "private.test",
                                     "twoaddr.test", "deadonly.test"]})
    assert ack == {"ok": True}
    r = curl(gw, "https://allowed.test/pool-after")
    assert r.stdout == "hello allowed.test /pool-after\n", r.stderr
    after = upstream_requests(world, "/pool-after")
    assert len(after) == 1, after
    assert after[0]["peer"] not in (kept, before[0]["peer"]), after
    assert after[0]["resumed"], after


def test_an_upstream_left_mid_response_is_not_kept(gw, world):
    """A guest that leaves in the middle of a response (curl gives up
    on a body over its --max-filesize): that upstream connection is
    closed, and the next request goes on another one."""
    world["log"][UP_ADDR].drain(0.1)
    big = "/big/%d" % (64 << 20)
    r = curl(gw, "--max-filesize", "1000", "-o", "/dev/null",
             "https://allowed.test" + big)
    assert r.returncode == 63, (r.returncode, r.stderr)
    r = curl(gw, "https://allowed.test/after-cut")
    assert r.stdout == "hello allowed.test /after-cut\n", r.stderr
    seen = world["log"][UP_ADDR].drain()
    cut = [e for e in seen if e.get("path") == big]
    after = [e for e in seen if e.get("path") == "/after-cut"]
    assert len(cut) == 1 and len(after) == 1, seen
    assert after[0]["peer"] != cut[0]["peer"], seen


def test_a_dead_first_address_is_passed_over(gw, world):
    """twoaddr.test resolves to an address where nothing answers, then
    to the live one: the gateway tries the second after the first's
    connect timeout, over HTTPS and HTTP."""
    for scheme in ("https", "http"):
        # The first address alone gets nowhere (502 from the gateway) ...
        r = curl(gw, "-o", "/dev/null", "-w", "%{http_code}",
                 "%s://deadonly.test/dead-%s" % (scheme, scheme))
        assert r.stdout == "502", (r.stdout, r.stderr)
        # ... and with the live one after it, the request is served.
        r = curl(gw, "%s://twoaddr.test/two-%s" % (scheme, scheme))
        assert r.stdout == "hello twoaddr.test /two-%s\n" % scheme, \
            (r.stdout, r.stderr)

