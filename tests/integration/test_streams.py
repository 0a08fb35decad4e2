"""Exec event streams carried by nginx from the sandbox's shim: fcgi
starts the command and hands the stream over (X-Accel-Redirect to the
internal /_airlock/stream/ location), so streams hold no API worker and
outlive the workers themselves."""
import json
import os
import secrets
import socket
import struct
import time

import pytest

from conftest import (TIMEOUT, Sandboxes, assert_error, exec_json, exec_sse,
                      open_stream, sse_events)


def stream(api, sid, cmd, **kw):
    """An open exec stream: (response, its event iterator)."""
    r = api.post(f"{api.base}/v1/sandboxes/{sid}/exec",
                 json={"cmd": cmd, **kw},
                 headers={"Accept": "text/event-stream"}, stream=True,
                 timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/event-stream")
    return r, sse_events(r)


def alive(api, sid, pid):
    """Whether process pid runs in sandbox sid, asked by another exec."""
    out = exec_json(api, sid, ["sh", "-c", f"kill -0 {pid} && echo yes"])
    return out["stdout"].strip() == "yes"


def sleeps(api, sid, secs):
    """How many `sleep <secs>` run in sandbox sid."""
    # The number is never whole in the counter's own command lines.
    m = str(secs)
    out = exec_json(api, sid, [
        "sh", "-c", f"a={m[:1]}; b={m[1:]}; for p in /proc/[0-9]*; do "
        "c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); "
        'case "$c" in "sleep $a$b ") echo found;; esac; done; true'])
    return out["stdout"].split().count("found")


def wait_gone(api, sid, pid, secs=15):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if not alive(api, sid, pid):
            return True
        time.sleep(0.3)
    return False


def shim_stream_socket(stack, sid):
    return os.path.join(stack.state, "run", "stream", f"{sid}.sock")


def shim_request(stack, sid, head):
    """Send a raw request head to the shim's stream socket; the answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(shim_stream_socket(stack, sid))
    s.sendall(head)
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
        if b"event: exit" in out:
            break
    s.close()
    return out


def control_stream_exec(stack, sid, cmd, background=False):
    """STREAM_EXEC straight on the shim's control socket (what fcgi
    does): the stream's token."""
    lease = secrets.token_hex(16)
    payload = json.dumps({"exec": {"cmd": cmd, "stdin": False},
                          "lease": lease,
                          "background": background}).encode()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(os.path.join(stack.state, "run", "sbx", f"{sid}.sock"))
    s.sendall(struct.pack(">IHHII", 0x414C4631, 37, 0, 1, len(payload))
              + payload)
    buf = b""
    while True:
        while len(buf) < 16:
            b = s.recv(65536)
            assert b, "shim closed the control connection"
            buf += b
        _, typ, _, _, n = struct.unpack(">IHHII", buf[:16])
        while len(buf) < 16 + n:
            buf += s.recv(65536)
        body, buf = buf[16:16 + n], buf[16 + n:]
        if typ == 14:  # RESULT
            s.close()
            return json.loads(body)["token"]
        assert typ != 15, body  # ERROR


@pytest.fixture(scope="module")
def sbx(api):
    s = Sandboxes(api, "ns")
    sb = s.create(pids=512)
    # The shim makes its stream socket at its first stream.
    assert exec_sse(api, sb["id"], ["true"])[-1].name == "exit"
    yield sb["id"]
    s.cleanup()


def test_output_and_exit_code_arrive_through_nginx(stack, api, sbx):
    events = exec_sse(api, sbx, ["sh", "-c",
                                 "echo out; echo err >&2; exit 7"])
    names = [e.name for e in events]
    assert names[0] == "start" and names[-1] == "exit", names
    out = "".join(e.data.get("data", "") for e in events
                  if e.name == "stdout")
    err = "".join(e.data.get("data", "") for e in events
                  if e.name == "stderr")
    assert (out, err) == ("out\n", "err\n"), events
    assert events[-1].data["exit_code"] == 7
    # The shim served it: its stream socket is there.
    assert os.path.exists(shim_stream_socket(stack, sbx))


def test_large_output_arrives_whole(api, sbx):
    # 4 MiB through a shim that pauses the agent at 256 KiB per stream.
    events = exec_sse(api, sbx, ["sh", "-c",
                                 "head -c 4194304 /dev/zero | tr '\\0' a"])
    out = "".join(e.data.get("data", "") for e in events
                  if e.name == "stdout")
    assert out == "a" * 4194304
    assert events[-1].name == "exit" and events[-1].data["exit_code"] == 0


def test_stream_survives_kill9_of_every_fcgi_worker(stack, api, sbx):
    r, events = stream(api, sbx, ["sh", "-c",
                                  "for i in 1 2 3 4 5 6; do echo $i; "
                                  "sleep 0.5; done; exit 3"])
    try:
        assert next(events).name == "start"
        killed = stack.kill9("airlock-fcgi")
        assert killed, "no airlock-fcgi to kill"
        assert not stack.pids("airlock-fcgi")
        rest = list(events)
    finally:
        r.close()
        stack.sh("start", "fcgi")
    out = "".join(e.data.get("data", "") for e in rest if e.name == "stdout")
    assert out == "1\n2\n3\n4\n5\n6\n", rest
    assert rest[-1].name == "exit" and rest[-1].data["exit_code"] == 3
    # The restarted workers answer.
    assert api.get(f"{api.base}/v1/health",
                   timeout=TIMEOUT).status_code == 200


def test_dropped_client_kills_its_process(api, sbx):
    r, events = stream(api, sbx, ["sleep", "300"])
    pid = next(events).data["pid"]
    assert alive(api, sbx, pid)
    r.raw._fp.fp.raw._sock.shutdown(socket.SHUT_RDWR)
    r.close()
    assert wait_gone(api, sbx, pid), f"pid {pid} still runs"


def test_background_process_outlives_its_stream(api, sbx):
    r, events = stream(api, sbx, ["sleep", "300"], background=True)
    pid = next(events).data["pid"]
    r.raw._fp.fp.raw._sock.shutdown(socket.SHUT_RDWR)
    r.close()
    time.sleep(2)
    try:
        assert alive(api, sbx, pid), "the background process was killed"
    finally:
        exec_json(api, sbx, ["kill", "-9", str(pid)])


def test_background_needs_a_stream(api, sbx):
    r = api.post(f"{api.base}/v1/sandboxes/{sbx}/exec",
                 json={"cmd": ["true"], "background": True},
                 headers={"Accept": "application/json"}, timeout=TIMEOUT)
    assert_error(r, 400, "invalid_request")
    r = api.post(f"{api.base}/v1/sandboxes/{sbx}/exec",
                 json={"cmd": ["true"], "background": "yes"},
                 headers={"Accept": "text/event-stream"}, timeout=TIMEOUT)
    assert_error(r, 400, "invalid_request")


def test_clients_cannot_reach_the_stream_location(stack, api, sbx):
    r = api.get(f"{api.base}/_airlock/stream/{sbx}/{'a' * 64}",
                timeout=TIMEOUT)
    assert r.status_code == 404


def test_forged_and_reused_tokens_get_404(stack, sbx):
    forged = secrets.token_hex(32)
    out = shim_request(stack, sbx,
                       f"GET /stream/{forged} HTTP/1.1\r\n"
                       "Host: x\r\n\r\n".encode())
    assert out.startswith(b"HTTP/1.1 404 "), out
    token = control_stream_exec(stack, sbx, ["echo", "hi"])
    head = f"GET /stream/{token} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    out = shim_request(stack, sbx, head)
    assert out.startswith(b"HTTP/1.1 200 OK\r\n"), out
    assert b'event: stdout\ndata: {"data":"hi\\n"}' in out, out
    assert b"event: exit" in out
    assert shim_request(stack, sbx, head).startswith(b"HTTP/1.1 404 ")


def test_malformed_stream_requests_get_400(stack, sbx):
    for head in (b"GET /stream/x HTTP/1.1\n\n",
                 b"GET /stream/" + b"a" * 64 + b" HTTP/1.1\r\n"
                 b"Content-Length: 5\r\n\r\nhello",
                 b"GET /stream/" + b"a" * 64 + b" HTTP/2\r\n\r\n",
                 b"X" * 5000):
        out = shim_request(stack, sbx, head)
        assert out.startswith(b"HTTP/1.1 400 "), (head[:40], out)
    out = shim_request(stack, sbx, b"POST /stream/" + b"a" * 64 +
                       b" HTTP/1.1\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 404 "), out


def test_unused_token_expires_and_kills_its_process(stack, api, sbx):
    marker = secrets.randbelow(10**6) + 10**6
    control_stream_exec(stack, sbx, ["sleep", str(marker)])
    assert sleeps(api, sbx, marker) == 1
    deadline = time.monotonic() + 20
    while sleeps(api, sbx, marker) > 0:
        assert time.monotonic() < deadline, "the process outlived its token"
        time.sleep(0.5)


def test_other_projects_key_cannot_stream(stack, api, sbx):
    name = "ts-" + secrets.token_hex(4)
    assert api.post(f"{api.base}/v1/projects", json={"name": name},
                    timeout=TIMEOUT).status_code == 201
    k = api.post(f"{api.base}/v1/keys",
                 json={"project": name, "role": "member", "name": "x"},
                 timeout=TIMEOUT).json()["key"]
    r = api.post(f"{api.base}/v1/sandboxes/{sbx}/exec",
                 json={"cmd": ["echo", "no"]},
                 headers={"Accept": "text/event-stream",
                          "Authorization": f"Bearer {k}"},
                 timeout=TIMEOUT)
    assert_error(r, 404, "not_found")


def test_300_open_streams_leave_the_api_answering(stack, api):
    sbs = Sandboxes(api, "ns")
    r = api.put(f"{api.base}/v1/projects/default/quota",
                json={"concurrent_streams": 1000}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    conns = []
    try:
        ids = [sbs.create(pids=512)["id"] for _ in range(3)]
        body = json.dumps({"cmd": ["sleep", "61"]})
        for i in range(300):
            c, resp = open_stream(stack, "POST",
                                  f"/v1/sandboxes/{ids[i % 3]}/exec", body)
            assert resp.status == 200, (i, resp.status, resp.read())
            first = resp.read(12)
            assert first == b"event: start", (i, first)
            conns.append((c, resp))
        # Every stream is open and held by nothing but nginx and the
        # shims: the API still answers, quickly enough for a client.
        h = api.get(f"{api.base}/v1/health", timeout=10)
        assert h.status_code == 200, h.text
        assert [sleeps(api, i, 61) for i in ids] == [100, 100, 100]
        for c, _ in conns:
            c.close()
        # Each dropped client's process goes with it.
        deadline = time.monotonic() + 30
        while any(sleeps(api, i, 61) for i in ids):
            assert time.monotonic() < deadline, \
                [sleeps(api, i, 61) for i in ids]
            time.sleep(0.5)
    finally:
        for c, _ in conns:
            c.close()
        api.put(f"{api.base}/v1/projects/default/quota",
                json={"concurrent_streams": None}, timeout=TIMEOUT)
        sbs.cleanup()


def test_stream_on_each_driver(api, sandbox):
    """The same stream path on every driver (the conftest's `sandbox` is
    one per driver): output, exit code, and a dropped client's process
    killed."""
    sid = sandbox["id"]
    events = exec_sse(api, sid, ["sh", "-c", "echo one; echo two >&2; "
                                 "exit 4"])
    assert [e.name for e in events][0] == "start"
    assert events[-1].name == "exit" and events[-1].data["exit_code"] == 4
    assert "".join(e.data.get("data", "") for e in events
                   if e.name == "stdout") == "one\n"
    r, it = stream(api, sid, ["sleep", "300"])
    pid = next(it).data["pid"]
    assert alive(api, sid, pid)
    r.raw._fp.fp.raw._sock.shutdown(socket.SHUT_RDWR)
    r.close()
    assert wait_gone(api, sid, pid), f"pid {pid} still runs"


def test_sandbox_deleted_mid_stream_ends_it_with_an_error(api):
    sbs = Sandboxes(api, "ns")
    try:
        sid = sbs.create()["id"]
        r, events = stream(api, sid, ["sleep", "300"])
        assert next(events).name == "start"
        assert api.delete(f"{api.base}/v1/sandboxes/{sid}",
                          timeout=TIMEOUT).status_code in (200, 204)
        rest = list(events)
        r.close()
        assert rest and rest[-1].name == "error", rest
        assert rest[-1].data["message"] == "the sandbox ended"
    finally:
        sbs.cleanup()
