"""The credential channel end to end (issue 11, cred-svc): a private
stack whose shims start tests/integration/cred_gateway.py as the gateway
(it reports what it was sent as names and value hashes, never values).
A sandbox's gateway gets its set at start; a rotation is in every
affected gateway's set by the time the PUT has answered; the rate limit
of a credential is one bucket for all sandboxes; after the controller is
killed and started again each gateway gets a new channel and a set; a
HELLO from a non-root peer is refused; a gateway's use records become
audit rows."""
import hashlib
import json
import os
import secrets
import socket
import struct
import time

import pytest
import requests

from conftest import TIMEOUT, Sandboxes, exec_json, running_stack

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "cred_gateway.py")
TAKES = 3  # cred_gateway.py's tokens per gateway
RATE = 4  # the credential's: fewer than two gateways' takes

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="network slots need root")


@pytest.fixture(scope="module")
def cstack():
    yield from running_stack(env={"AIRLOCK_GATEWAY": FAKE},
                             prefix="airlock-it-credchan-")


@pytest.fixture(scope="module")
def capi(cstack):
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {cstack.key}"
    s.base = cstack.base
    return s


def digest(v):
    return hashlib.sha256(v.encode()).hexdigest()


def report(sid):
    try:
        with open(f"/tmp/airlock-credgw-{sid}.json") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def wait_report(sid, pred, timeout=30):
    deadline = time.monotonic() + timeout
    r = None
    while time.monotonic() < deadline:
        r = report(sid)
        if r is not None and pred(r):
            return r
        time.sleep(0.1)
    raise AssertionError(f"gateway of {sid}: {r}")


def test_channel(cstack, capi):
    v1 = "v1-" + secrets.token_hex(16)
    r = capi.post(f"{capi.base}/v1/credentials", timeout=TIMEOUT, json={
        "name": "github", "value": v1, "scope": {"project": True},
        "inject": {"hosts": ["api.example.test"], "header": "Authorization",
                   "format": "Bearer {value}"},
        "rate_limit": {"requests": RATE, "per_seconds": 3600}})
    assert r.status_code == 201, r.text
    cred = r.json()["id"]

    sbs = Sandboxes(capi, "ns")
    try:
        net = {"mode": "allowlist", "allow": ["api.example.test"]}
        ids = [sbs.create(network=net)["id"] for _ in range(2)]
        # A gateway starts on its guest's first use of the network: a
        # lookup (which the stand-in does not answer) starts it.
        for sid in ids:
            exec_json(capi, sid, ["/bin/sh", "-c",
                                  "timeout 2 nslookup api.example.test "
                                  ">/dev/null 2>&1; true"], timeout=20)
        # Each gateway has the sandbox's set, with this value.
        for sid in ids:
            wait_report(sid, lambda r: r["creds"].get("github") ==
                        digest(v1))
        # One bucket of RATE tokens for both: of 2 * TAKES takes, RATE
        # granted, the rest refused, wherever they came from.
        reps = [wait_report(sid, lambda r: r["grants"] + r["denials"] ==
                            TAKES) for sid in ids]
        assert sum(r["grants"] for r in reps) == RATE
        assert sum(r["denials"] for r in reps) == 2 * TAKES - RATE

        # Each gateway's use is an audit row with its sandbox and project.
        for sid in ids:
            deadline = time.monotonic() + 10
            rows = []
            while not rows and time.monotonic() < deadline:
                r = capi.get(f"{capi.base}/v1/audit?sandbox={sid}",
                             timeout=TIMEOUT)
                assert r.status_code == 200, r.text
                rows = [a for a in r.json()["audit"]
                        if a["action"] == "use"]
                time.sleep(0.2)
            assert rows, f"no use row for {sid}"
            assert rows[0]["credential"] == "github"
            assert rows[0]["path"] == "/probe"
            assert rows[0]["status"] == 200
            assert rows[0]["project"]

        # A rotation is there once the PUT has answered.
        v2 = "v2-" + secrets.token_hex(16)
        r = capi.put(f"{capi.base}/v1/credentials/{cred}", timeout=TIMEOUT,
                     json={"value": v2})
        assert r.status_code == 200, r.text
        for sid in ids:
            assert report(sid)["creds"]["github"] == digest(v2)

        # The controller goes and comes back: a new channel, a set.
        before = {sid: report(sid) for sid in ids}
        assert cstack.kill9("airlock-controller")
        cstack.sh("start", "controller")
        for sid in ids:
            r = wait_report(sid, lambda r: r["channels"] >
                            before[sid]["channels"] and r["sets"] >
                            before[sid]["sets"])
            assert r["version"] > before[sid]["version"]
            assert r["creds"]["github"] == digest(v2)

        # Deleted: gone from the sets by the time DELETE answered.
        r = capi.delete(f"{capi.base}/v1/credentials/{cred}",
                        timeout=TIMEOUT)
        assert r.status_code == 204, r.text
        for sid in ids:
            assert "github" not in report(sid)["creds"]
    finally:
        sbs.cleanup()

    # No value in the stack's logs.
    for root, _, files in os.walk(os.path.join(cstack.state, "log")):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
            assert v1.encode() not in data and v2.encode() not in data


def test_hello_from_non_root_refused(cstack):
    path = os.path.join(cstack.state, "run", "cred.sock")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(path)
            p = b'{"sandbox":"sb-anything"}'
            s.sendall(struct.pack(">IHHII", 0x414C4631, 50, 0, 0, len(p)) + p)
            hdr = s.recv(16, socket.MSG_WAITALL)
            ftype, n = struct.unpack(">IHHII", hdr)[1], \
                struct.unpack(">IHHII", hdr)[4]
            body = json.loads(s.recv(n, socket.MSG_WAITALL))
            code = 0 if ftype == 15 and body["code"] == "forbidden" else 3
        except Exception:
            code = 2
        os._exit(code)
    _, st = os.waitpid(pid, 0)
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0
