"""Pause and resume (issue 25), on each driver: a paused sandbox keeps its
processes and memory but runs nothing (vm: vCPUs stopped; ns: frozen),
its open streams stall and go on after resume, and command deadlines
stand still while it is paused. Calls that need it running are refused
with a 409 that names resume."""
import threading
import time

import requests

from conftest import TIMEOUT, assert_error, exec_json, sse_events

COUNTER = ("i=0; while :; do i=$((i+1)); echo $i > /tmp/count.tmp; "
           "mv /tmp/count.tmp /tmp/count; sleep 0.1; done")


def call(api, sid, what):
    return api.post(f"{api.base}/v1/sandboxes/{sid}/{what}", timeout=TIMEOUT)


def count(api, sid):
    return int(exec_json(api, sid, ["cat", "/tmp/count"])["stdout"])


def test_pause_resume_keeps_processes_and_stops_them(api, sandboxes):
    sb = sandboxes.create()
    sid = sb["id"]
    # A detached counter: it outlives its exec.
    exec_json(api, sid, ["sh", "-c", f"({COUNTER}) >/dev/null 2>&1 &"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = api.post(f"{api.base}/v1/sandboxes/{sid}/exec",
                     json={"cmd": ["cat", "/tmp/count"]}, timeout=TIMEOUT)
        if r.status_code == 200 and r.json()["exit_code"] == 0:
            break
        time.sleep(0.2)
    before = count(api, sid)

    r = call(api, sid, "pause")
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "paused" and r.json()["operation"] is None
    assert api.get(f"{api.base}/v1/sandboxes/{sid}",
                   timeout=TIMEOUT).json()["state"] == "paused"
    # Nothing runs in it: commands and files are refused, naming resume.
    r = api.post(f"{api.base}/v1/sandboxes/{sid}/exec",
                 json={"cmd": ["true"]}, timeout=TIMEOUT)
    assert_error(r, 409, "conflict")
    assert "resume" in r.json()["error"]["message"], r.text
    r = api.get(f"{api.base}/v1/sandboxes/{sid}/files",
                params={"path": "/tmp/count"}, timeout=TIMEOUT)
    assert_error(r, 409, "conflict")
    assert_error(call(api, sid, "pause"), 409, "conflict")
    time.sleep(2)

    r = call(api, sid, "resume")
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "running"
    after = count(api, sid)
    # Two seconds paused would be ~20 ticks; it stood still (what moved
    # is the time around the calls).
    assert after - before < 12, (before, after)
    assert_error(call(api, sid, "resume"), 409, "conflict")
    time.sleep(1)
    assert count(api, sid) > after, "the counter did not go on"


def test_stream_stalls_and_deadline_holds_while_paused(api, sandboxes):
    sid = sandboxes.create()["id"]
    # 6 lines over ~1.5 s (more under TCG), inside a 4 s deadline that a
    # 3 s pause would break if it counted.
    body = {"cmd": ["sh", "-c",
                    "for i in 1 2 3 4 5 6; do echo $i; sleep 0.25; done"],
            "timeout": 4}
    events = []
    with api.post(f"{api.base}/v1/sandboxes/{sid}/exec", json=body,
                  headers={"Accept": "text/event-stream"}, stream=True,
                  timeout=TIMEOUT) as resp:
        assert resp.status_code == 200, resp.text

        def read():
            for e in sse_events(resp):
                events.append(e)

        t = threading.Thread(target=read, daemon=True)
        t.start()
        deadline = time.monotonic() + 60
        while not any(e.name == "stdout" for e in events):
            assert time.monotonic() < deadline, events
            time.sleep(0.02)
        assert call(api, sid, "pause").status_code == 200
        paused_at = time.monotonic()
        time.sleep(3)
        during = [e for e in events
                  if e.name in ("stdout", "exit") and
                  paused_at + 0.5 < e.t < paused_at + 3]
        assert call(api, sid, "resume").status_code == 200
        t.join(60)
    assert not during, f"output while paused: {during}"
    out = "".join(e.data.get("data", "") for e in events
                  if e.name == "stdout")
    assert out == "1\n2\n3\n4\n5\n6\n", events
    last = events[-1]
    assert last.name == "exit", events
    assert last.data.get("exit_code") == 0, last
    assert not last.data.get("timed_out"), last


def test_pause_of_unknown_or_foreign_sandbox_is_404(api, stack):
    r = call(api, "nosuchsandbox0000000", "pause")
    assert_error(r, 404, "not_found")
    r = call(api, "nosuchsandbox0000000", "resume")
    assert_error(r, 404, "not_found")


def test_delete_of_a_paused_sandbox(api, sandboxes):
    sid = sandboxes.create()["id"]
    assert call(api, sid, "pause").status_code == 200
    r = api.delete(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
    assert r.status_code == 204, r.text
    r = api.get(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
    assert r.status_code == 404
