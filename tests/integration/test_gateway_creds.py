"""Credential injection in the egress gateway standing alone (issue 11):
airlock-gateway started as in test_gateway.py (netslot-tool), with a fake
credential channel as its fd 7 (this test speaks the controller's side:
CRED_SET, CRED_GRANT; it records CRED_SET_ACK and CRED_USE), against a
reflecting upstream (gateway_upstream.py /reflect: the request comes back
in the body and as X-Echo-* fields, and is logged as received).

The world is this test's own (namespace gwc-up-<pid>, 10.251.88.0/24):
api.cred.test (the credentials' host), other.cred.test (any other host)
and limited.cred.test (a rate-limited credential's host), one address."""
import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest

import frames
from test_gateway import GATEWAY, PY, REPO, TOOL, Lines, egress
from upstream_world import upstream_world

UP_ADDR, HOST_ADDR, UP_NET = "10.251.88.2", "10.251.88.1", "10.251.88.0/24"
SANDBOX = "sbx-gwcred"
GH = "ghp_Zq8sV3cr3tT0k3nValue01"  # header form, api.cred.test
PH = "phv_Pl4c3h0ld3rS3cr3t9"  # placeholder only, api.cred.test
LIM = "lim_R4t3L1m1t3dS3cr3tXY"  # rate-limited, limited.cred.test
VALUES = (GH, PH, LIM)

CREDS = [
    {"id": "cred-gh", "name": "github", "value": GH,
     "hosts": ["api.cred.test"], "header": "Authorization",
     "format": "Bearer {value}", "rate": None, "scope": "project"},
    {"id": "cred-ph", "name": "pgh", "value": PH,
     "hosts": ["api.cred.test"], "header": None, "format": "{value}",
     "rate": None, "scope": "sandbox"},
    {"id": "cred-lim", "name": "limited", "value": LIM,
     "hosts": ["limited.cred.test"], "header": "X-Api-Key",
     "format": "{value}", "rate": {"requests": 1, "per_seconds": 60},
     "scope": "global"},
]

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="network namespaces need root")


class Channel:
    """The controller's end of the gateway's fd 7."""

    def __init__(self, sock):
        self.sock, self.fd = sock, sock.fileno()
        self.acks, self.uses, self.takes = [], [], []
        self.refuse = {}  # credential id -> retry_after
        self.lock = threading.Lock()
        threading.Thread(target=self.serve, daemon=True).start()

    def push(self, version, creds):
        frames.send(self.fd, frames.CRED_SET, version, json.dumps(
            {"version": version, "creds": creds}).encode())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with self.lock:
                if version in self.acks:
                    return
            time.sleep(0.02)
        raise AssertionError("no CRED_SET_ACK for version %d" % version)

    def serve(self):
        while True:
            try:
                f = frames.read(self.fd)
            except OSError:
                return
            if f is None:
                return
            ftype, fid, payload = f
            msg = json.loads(payload)
            with self.lock:
                if ftype == frames.CRED_SET_ACK:
                    self.acks.append(msg["version"])
                elif ftype == frames.CRED_USE:
                    self.uses.append(msg)
                elif ftype == frames.CRED_TAKE:
                    self.takes.append(msg["id"])
                    wait = self.refuse.get(msg["id"])
                    grant = {"req": msg["req"], "ok": wait is None,
                             "retry_after": wait or 0}
                    frames.send(self.fd, frames.CRED_GRANT, fid,
                                json.dumps(grant).encode())

    def uses_where(self, timeout=5, **want):
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                found = [u for u in self.uses
                         if all(u.get(k) == v for k, v in want.items())]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.05)


@pytest.fixture(scope="module")
def world():
    names = {n: UP_ADDR for n in ("api.cred.test", "other.cred.test",
                                  "limited.cred.test")}
    yield from upstream_world("gwc", HOST_ADDR, UP_NET, [UP_ADDR], names)


@pytest.fixture(scope="module")
def gw(world):
    state = tempfile.mkdtemp(prefix="gw-cred-state-")
    os.chmod(state, 0o711)
    os.makedirs(os.path.join(state, "run"), mode=0o755)
    policies = os.path.join(state, "policies")
    os.makedirs(policies, mode=0o755)
    for name in ("egress.lua", "credentials.lua"):
        shutil.copy(os.path.join(REPO, "policies", name), policies)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = dict(os.environ,
               AIRLOCK_STATE=state, AIRLOCK_POLICIES=policies,
               AIRLOCK_UPSTREAM_DNS=UP_ADDR + ":53",
               AIRLOCK_UPSTREAM_CA=world["ca"],
               AIRLOCK_UPSTREAM_ALLOW_CIDRS=UP_NET,
               AIRLOCK_TEST_CRED_FD=str(theirs.fileno()))
    env.pop("AIRLOCK_UPSTREAM_HOSTS", None)
    p = subprocess.Popen([TOOL, state, "gateway", GATEWAY, SANDBOX],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env,
                         pass_fds=[theirs.fileno()])
    theirs.close()
    lines = Lines(p)
    resolv = os.path.join(state, "resolv.conf")
    try:
        info = lines.next()
        with open(resolv, "w") as f:
            f.write("nameserver %s\noptions timeout:2 attempts:2\n" %
                    info["gateway"])
        p.stdin.write((json.dumps({"mode": "allowlist", "allow": [
            "api.cred.test", "other.cred.test",
            "limited.cred.test"]}) + "\n").encode())
        p.stdin.flush()
        assert lines.next() == {"ok": True}
        yield {"state": state, "info": info, "resolv": resolv,
               "chan": Channel(ours), "world": world,
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
        ours.close()
        run_dir = os.path.join(state, "run")
        logs = ""
        for root, _, files in os.walk(run_dir):
            for n in files:
                try:
                    with open(os.path.join(root, n), "rb") as f:
                        logs += f.read().decode("latin-1")
                except OSError:
                    pass
        shutil.rmtree(state, ignore_errors=True)
    assert p.returncode == 0, err
    for v in VALUES:
        assert v not in err, "a value in the gateway's log"
        assert v not in logs, "a value in the egress log"
    for bad in ("ERROR: AddressSanitizer", "runtime error:",
                "UndefinedBehaviorSanitizer"):
        assert bad not in err, err


def guest(gw, *cmd, stdin=None, timeout=60):
    wrapped = ["nsenter", "--net=" + gw["info"]["guest_ns"], "unshare",
               "-m", "sh", "-c",
               'mount --bind "$0" /etc/resolv.conf && exec "$@"',
               gw["resolv"], *cmd]
    return subprocess.run(wrapped, capture_output=True, text=True,
                          timeout=timeout, input=stdin)


def curl(gw, *args):
    """curl in the guest: (status, head and body as the guest saw them)."""
    r = guest(gw, "curl", "-sS", "-i", "--max-time", "20", "--cacert",
              gw["ca"], "-w", "\n%{http_code}", *args)
    out, _, code = r.stdout.rpartition("\n")
    return int(code or 0), out + r.stderr


def received(gw, path, timeout=5):
    """What the upstream logged for a /reflect request to path."""
    lines = gw["world"]["log"][UP_ADDR]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for rec in lines.drain(0.2):
            gw.setdefault("seen", []).append(rec)
        for rec in gw.get("seen", []):
            if rec.get("path") == path and "reflect" in rec:
                return rec
    return None


def no_value(text):
    for v in VALUES:
        assert v not in text
        assert base64.b64encode(v.encode()).decode()[:16] not in text


def test_no_set_yet_fails_closed(gw):
    # Before the controller's first set a placeholder is answered 503.
    code, out = curl(gw, "https://api.cred.test/reflect?t=airlock-cred:pgh")
    assert code == 503, out
    assert received(gw, "/reflect?t=airlock-cred:pgh", timeout=1) is None
    gw["chan"].push(1, CREDS)


def test_header_injected_only_toward_its_host_and_masked(gw):
    code, out = curl(gw, "-H", "Authorization: guest-junk",
                     "https://api.cred.test/reflect/h1")
    assert code == 200, out
    rec = received(gw, "/reflect/h1")
    assert rec["headers"]["Authorization"] == "Bearer " + GH
    assert rec["headers"]["Accept-Encoding"] == "identity"
    # The reflecting upstream echoed it in a field and in the body.
    assert "Bearer " + "*" * len(GH) in out
    assert "X-Echo-Authorization: Bearer ***" in out
    no_value(out)
    assert gw["chan"].uses_where(name="github", action="use", decision="allow",
                                 status=200)

    code, out = curl(gw, "-H", "Authorization: guest-junk",
                     "https://other.cred.test/reflect/h2")
    assert code == 200, out
    rec = received(gw, "/reflect/h2")
    assert rec["headers"]["Authorization"] == "guest-junk"
    assert all(v not in json.dumps(rec) for v in VALUES)


def test_placeholders_swapped_in_the_head(gw):
    code, out = curl(gw, "-H", "X-Token: tok airlock-cred:pgh",
                     "-u", "user:airlock-cred:pgh",
                     "https://api.cred.test/reflect/p1?q=airlock-cred%3Apgh")
    assert code == 200, out
    rec = received(gw, "/reflect/p1?q=" + PH)
    assert rec is not None
    # The header form wins for Authorization (set by the gateway).
    assert rec["headers"]["X-Token"] == "tok " + PH
    assert rec["headers"]["Authorization"] == "Bearer " + GH
    no_value(out)
    assert "*" * len(PH) in out

    code, out = curl(gw, "-u", "user:airlock-cred:pgh",
                     "http://limited.cred.test/reflect/p2")
    assert code == 403, out  # pgh's hosts do not include limited.cred.test


def test_basic_auth_placeholder_swapped(gw):
    # limited.cred.test has a header credential (X-Api-Key), not
    # Authorization: the guest's Basic goes through swapped.
    gw["chan"].push(2, CREDS + [
        {"id": "cred-basic", "name": "basic", "value": "b4s1cS3cr3tV4lue",
         "hosts": ["other.cred.test"], "header": None,
         "format": "{value}", "rate": None, "scope": "project"}])
    code, out = curl(gw, "-u", "user:airlock-cred:basic",
                     "https://other.cred.test/reflect/b1")
    assert code == 200, out
    rec = received(gw, "/reflect/b1")
    assert rec["headers"]["Authorization"] == "Basic " + base64.b64encode(
        b"user:b4s1cS3cr3tV4lue").decode()
    assert "b4s1cS3cr3tV4lue" not in out
    gw["chan"].push(3, CREDS)


def b64(s):
    return base64.b64encode(s.encode()).decode()


WRONG_HOST = [
    ("plain-header", ["-H", "X-T: airlock-cred:github"], "/reflect/w1"),
    ("url-encoded", [], "/reflect/w2?t=%61irlock-cred%3agithub"),
    ("url-encoded-upper", [], "/reflect/w3?t=AIRLOCK%2DCRED%3Agithub"),
    ("json-body", ["-H", "Content-Type: application/json", "--data",
                   '{"t":"\\u0061irlock-cred\\u003agithub"}'],
     "/reflect/w4"),
    ("basic-auth", ["-u", "me:airlock-cred:github"], "/reflect/w5"),
    ("base64-body", ["--data", "x=" + b64("u:airlock-cred:github")],
     "/reflect/w6"),
    ("base64-header-shifted", ["-H", "X-B: ab" + b64("zairlock-cred:pgh")],
     "/reflect/w7"),
]


@pytest.mark.parametrize("what,args,path", WRONG_HOST,
                         ids=[w[0] for w in WRONG_HOST])
def test_placeholder_toward_another_host_is_denied(gw, what, args, path):
    code, out = curl(gw, *args, "https://other.cred.test" + path)
    assert code == 403, (what, out)
    assert received(gw, path, timeout=1) is None
    assert egress(gw, {"allow": False, "name": "other.cred.test"},
                  sandbox=SANDBOX)
    assert gw["chan"].uses_where(action="denied_placeholder", decision="deny",
                                 host="other.cred.test")


def test_placeholder_split_across_reads_is_denied(gw):
    # A body sent in pieces with pauses between: the gateway has
    # forwarded the first piece before the placeholder is complete, and
    # cuts the upstream before the body's end.
    script = r"""
import socket, sys, time
s = socket.create_connection(("other.cred.test", 80))
body = b"x=airlock-cred:github&y=1"
s.sendall(b"POST /reflect/split HTTP/1.1\r\nHost: other.cred.test\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body))
for i in range(0, len(body), 5):
    s.sendall(body[i:i + 5]); time.sleep(0.15)
print(s.recv(4096).decode().split("\r\n")[0])
"""
    r = guest(gw, PY, "-c", script)
    assert "403" in r.stdout, r
    # The upstream saw at most a cut request: never the body's end.
    rec = received(gw, "/reflect/split", timeout=1)
    assert rec is None or len(rec["body"]) < 25, rec


def test_unknown_credential_is_denied_even_toward_a_credential_host(gw):
    code, out = curl(gw, "-H", "X-T: airlock-cred:nosuch",
                     "https://api.cred.test/reflect/u1")
    assert code == 403, out
    assert received(gw, "/reflect/u1", timeout=1) is None
    # Also in a field the header form replaces: the guest sent it.
    code, out = curl(gw, "-H", "Authorization: Bearer airlock-cred:nosuch",
                     "https://api.cred.test/reflect/u2")
    assert code == 403, out
    assert received(gw, "/reflect/u2", timeout=1) is None
    # Beside a placeholder that is swapped, in the same field, in the
    # same Basic pair, in the same target: the one left still denies.
    for i, args in enumerate([
            ["-H", "X-Token: airlock-cred:pgh airlock-cred:nosuch"],
            ["-H", "X-Token: airlock-cred:pghairlock-cred:nosuch"],
            ["-u", "airlock-cred:pgh:airlock-cred:nosuch"],
            ["-H", "X-Proxy-Authorization: Basic " +
             b64("airlock-cred:pgh:airlock-cred:nosuch")]]):
        code, out = curl(gw, *args, "https://api.cred.test/reflect/u3%d" % i)
        assert code == 403, (args, out)
        assert received(gw, "/reflect/u3%d" % i, timeout=1) is None
    code, out = curl(gw, "https://api.cred.test/reflect/u4?a=airlock-cred:pgh"
                     "&b=airlock-cred%3Anosuch")
    assert code == 403, out


def test_body_placeholder_toward_its_host_passes_unchanged(gw):
    code, out = curl(gw, "--data", "note=airlock-cred:pgh",
                     "https://api.cred.test/reflect/body")
    assert code == 200, out
    rec = received(gw, "/reflect/body")
    assert rec["body"] == "note=airlock-cred:pgh"  # never rewritten


def test_chunked_response_is_masked(gw):
    code, out = curl(gw, "https://api.cred.test/reflect-chunked/c1")
    assert code == 200, out
    no_value(out)
    assert "Bearer " + "*" * len(GH) in out


def test_compressed_answer_to_a_credential_request_is_refused(gw):
    code, out = curl(gw, "https://api.cred.test/reflect-gzip/z1")
    assert code == 502, out
    no_value(out)


def test_rate_limit_answers_429_without_contacting_upstream(gw):
    gw["chan"].refuse["cred-lim"] = 7
    code, out = curl(gw, "https://limited.cred.test/reflect/r1")
    assert code == 429, out
    assert "Retry-After: 7" in out
    assert received(gw, "/reflect/r1", timeout=1) is None
    assert "cred-lim" in gw["chan"].takes
    assert gw["chan"].uses_where(name="limited", action="rate_limited")
    del gw["chan"].refuse["cred-lim"]
    code, out = curl(gw, "https://limited.cred.test/reflect/r2")
    assert code == 200, out
    assert received(gw, "/reflect/r2")["headers"]["X-Api-Key"] == LIM


def test_redirect_is_passed_and_not_followed(gw):
    code, out = curl(gw, "https://api.cred.test/redirect")
    assert code == 302, out
    assert "Location: https://other.cred.test/reflect" in out
    time.sleep(0.5)
    assert received(gw, "/reflect", timeout=0.5) is None


def test_changed_credentials_policy_applies_to_the_next_connection(gw):
    """credentials.lua saved (through a rename) with a read-only rule:
    the next connection's POST goes without the header (audited
    denied_policy) while a GET still gets it; the shipped file back,
    POST gets it again."""
    path = os.path.join(gw["state"], "policies", "credentials.lua")
    with open(path) as f:
        shipped = f.read()

    def save(text):
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.rename(path + ".tmp", path)

    save('function credentials(req)\n'
         '  if req.method ~= "GET" then return deny("read-only") end\n'
         '  return allow("reads")\n'
         'end\n')
    try:
        code, out = curl(gw, "--data", "x=1",
                         "https://api.cred.test/reflect/ro1")
        assert code == 200, out
        assert "Authorization" not in received(gw, "/reflect/ro1")["headers"]
        assert gw["chan"].uses_where(name="github", action="denied_policy",
                                     reason="read-only")
        code, out = curl(gw, "https://api.cred.test/reflect/ro2")
        assert code == 200, out
        assert received(gw, "/reflect/ro2")["headers"]["Authorization"] == \
            "Bearer " + GH
    finally:
        save(shipped)
    code, out = curl(gw, "--data", "x=1", "https://api.cred.test/reflect/ro3")
    assert code == 200, out
    assert received(gw, "/reflect/ro3")["headers"]["Authorization"] == \
        "Bearer " + GH
