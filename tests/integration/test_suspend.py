"""Suspend and resume from suspended (issue 25): a suspended sandbox holds
no process, no slot and no writable subvolume, only its snapshot; a
resume brings it back under the same id with its files (ns: its
processes start afresh, "resumed_cold"; vm: the same processes and
memory). An ns suspend must ask for "memory": false."""
import os
import time

import pytest

from conftest import (TIMEOUT, assert_error, exec_json, parse_time, pid_alive,
                      qemu_of, shim_of)


def call(api, sid, what, body=None):
    return api.post(f"{api.base}/v1/sandboxes/{sid}/{what}", json=body,
                    timeout=TIMEOUT)


def get(api, sid):
    return api.get(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)


def suspend_body(driver):
    return {"memory": False} if driver == "ns" else {}


def test_ns_suspend_needs_memory_false(api, sandboxes, driver):
    if driver != "ns":
        pytest.skip("a vm keeps its memory: a plain suspend is right")
    sid = sandboxes.create()["id"]
    for body in (None, {}, {"memory": True}):
        r = call(api, sid, "suspend", body)
        assert_error(r, 422, "memory_not_supported")
        assert "memory" in r.json()["error"]["message"]
    assert get(api, sid).json()["state"] == "running"
    assert exec_json(api, sid, ["true"])["exit_code"] == 0


def test_suspend_resume_keeps_files(stack, api, sandboxes, driver):
    sid = sandboxes.create()["id"]
    exec_json(api, sid, ["sh", "-c", "echo kept > /root/mark; sync"])
    shim = shim_of(stack, sid)
    assert shim is not None
    qemu = qemu_of(stack, sid) if driver == "vm" else None

    r = call(api, sid, "suspend", suspend_body(driver))
    assert r.status_code == 200, r.text
    sb = r.json()
    assert sb["state"] == "suspended" and sb["operation"] is None, sb
    snap = sb["snapshot"]
    assert snap
    # Nothing of it runs or is held: no shim, no QEMU, no writable root.
    deadline = time.monotonic() + 10
    while pid_alive(shim) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(shim), "the shim outlived the suspend"
    if qemu is not None:
        assert not pid_alive(qemu), "QEMU outlived the suspend"
    assert not os.path.exists(os.path.join(stack.state, "pool", "sandboxes",
                                           sid))
    assert os.path.isdir(os.path.join(stack.state, "pool", "snapshots",
                                      snap, "rootfs"))
    r = api.post(f"{api.base}/v1/sandboxes/{sid}/exec",
                 json={"cmd": ["true"]}, timeout=TIMEOUT)
    assert_error(r, 409, "conflict")
    assert "resume" in r.json()["error"]["message"]
    assert_error(call(api, sid, "pause"), 409, "conflict")
    assert_error(call(api, sid, "suspend", suspend_body(driver)), 409,
                 "conflict")

    r = call(api, sid, "resume")
    assert r.status_code == 200, r.text
    sb = r.json()
    assert sb["state"] == "running", sb
    assert sb["resumed_cold"] is (driver == "ns"), sb
    out = exec_json(api, sid, ["cat", "/root/mark"])
    assert out["stdout"] == "kept\n", out
    assert_error(call(api, sid, "resume"), 409, "conflict")


def test_suspend_from_paused_and_delete_while_suspended(stack, api, sandboxes,
                                                        driver):
    sid = sandboxes.create()["id"]
    assert call(api, sid, "pause").status_code == 200
    r = call(api, sid, "suspend", suspend_body(driver))
    assert r.status_code == 200, r.text
    snap = r.json()["snapshot"]
    r = api.delete(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
    assert r.status_code == 204, r.text
    assert get(api, sid).status_code == 404
    # The controller removes a deleted sandbox's suspend snapshot.
    path = os.path.join(stack.state, "pool", "snapshots", snap)
    deadline = time.monotonic() + 30
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not os.path.exists(path), "the snapshot outlived its sandbox"


def test_suspend_of_foreign_or_unknown_sandbox_is_404(api):
    for what in ("suspend", "resume"):
        r = call(api, "nosuchsandbox0000000", what, {"memory": False})
        assert_error(r, 404, "not_found")


def test_suspend_body_is_checked(api, sandboxes):
    sid = sandboxes.create()["id"]
    for body in ('{"memory": 1}', '{"memroy": false}', '[]', '{'):
        r = api.post(f"{api.base}/v1/sandboxes/{sid}/suspend", data=body,
                     headers={"Content-Type": "application/json"},
                     timeout=TIMEOUT)
        assert_error(r, 400, "invalid_request")
    assert get(api, sid).json()["state"] == "running"


COUNTER = ("i=0; while :; do i=$((i+1)); echo $i > /tmp/count.tmp; "
           "mv /tmp/count.tmp /tmp/count; sleep 0.1; done")


def counter(api, sid):
    out = exec_json(api, sid, ["sh", "-c",
                               "cat /tmp/count; cat /tmp/counter.pid"])
    n, pid = out["stdout"].split()
    return int(n), int(pid)


def test_vm_suspend_keeps_processes_over_cycles(api, sandboxes, driver):
    """A vm suspend keeps the machine: the same counter process goes on
    counting from where it stood, cycle after cycle, and what each cycle
    wrote stays."""
    if driver != "vm":
        pytest.skip("an ns sandbox keeps no process across a suspend "
                    "(no CRIU here): test_ns_suspend_needs_memory_false")
    sid = sandboxes.create()["id"]
    exec_json(api, sid, ["sh", "-c",
                         f"({COUNTER}) >/dev/null 2>&1 & "
                         "echo $! > /tmp/counter.pid"])
    deadline = time.monotonic() + 60
    while True:
        r = api.post(f"{api.base}/v1/sandboxes/{sid}/exec",
                     json={"cmd": ["test", "-s", "/tmp/count"]},
                     timeout=TIMEOUT)
        if r.json().get("exit_code") == 0:
            break
        assert time.monotonic() < deadline, "the counter never started"
        time.sleep(0.2)
    for cycle in range(5):
        exec_json(api, sid, ["sh", "-c", f"echo {cycle} > /root/c{cycle}"])
        before, pid = counter(api, sid)
        r = call(api, sid, "suspend")
        assert r.status_code == 200, r.text
        time.sleep(1)  # suspended: no time passes for the guest
        r = call(api, sid, "resume")
        assert r.status_code == 200, r.text
        assert r.json()["resumed_cold"] is False, r.json()
        after, pid2 = counter(api, sid)
        assert pid2 == pid, f"cycle {cycle}: the counter is a new process"
        # It went on from where it stood: not reset, and the second it
        # spent suspended did not count (10 ticks).
        assert before <= after < before + 40, (cycle, before, after)
        for k in range(cycle + 1):
            assert exec_json(api, sid, ["cat", f"/root/c{k}"])["stdout"] \
                == f"{k}\n"
    time.sleep(0.5)
    assert counter(api, sid)[0] > after, "the counter stopped"


def wait_state(api, sid, want, seconds=60):
    deadline = time.monotonic() + seconds
    while True:
        sb = get(api, sid).json()
        if sb["state"] == want:
            return sb
        assert time.monotonic() < deadline, f"{sid}: {sb}"
        time.sleep(0.3)


def test_lost_machines_come_back_from_their_last_snapshot(stack, api,
                                                          sandboxes, driver):
    """kill -9 of the shims (their QEMUs die with them), as a host restart
    does: a sandbox with a snapshot comes back suspended to it
    (recovered_from) and resumes with its files; one without is lost
    (error); a suspended one is untouched."""
    body = suspend_body(driver)
    snapped, bare, suspended = (sandboxes.create()["id"] for _ in range(3))
    exec_json(api, snapped, ["sh", "-c", "echo saved > /root/f; sync"])
    r = api.post(f"{api.base}/v1/sandboxes/{snapped}/snapshots",
                 json={"name": "keep"}, timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    snap = r.json()["id"]
    exec_json(api, snapped, ["sh", "-c", "echo later > /root/f"])
    assert call(api, snapped, "pause").status_code == 200
    assert call(api, suspended, "suspend", body).status_code == 200
    for sid in (snapped, bare):
        pid = shim_of(stack, sid)
        assert pid is not None
        os.kill(pid, 9)

    sb = wait_state(api, snapped, "suspended")
    assert sb["recovered_from"] == snap, sb
    sb = wait_state(api, bare, "error")
    assert "lost" in sb.get("error", ""), sb
    assert get(api, suspended).json()["state"] == "suspended"

    r = call(api, snapped, "resume")
    assert r.status_code == 200, r.text
    # What it wrote after its last snapshot is lost with its machine.
    assert exec_json(api, snapped, ["cat", "/root/f"])["stdout"] == "saved\n"
    r = call(api, suspended, "resume")
    assert r.status_code == 200, r.text


def test_timeout_is_replaced(api, sandboxes):
    sid = sandboxes.create(timeout=30)["id"]
    r = post_timeout(api, sid, {"timeout": 3600})
    assert r.status_code == 200, r.text
    left = parse_time(r.json()["expires_at"]).timestamp() - time.time()
    assert 3500 < left <= 3600, r.json()
    for body in ({}, {"timeout": 0}, {"timeout": "1"}, {"x": 1}):
        assert_error(post_timeout(api, sid, body), 400, "invalid_request")
    assert_error(post_timeout(api, "nosuchsandbox0000000", {"timeout": 5}),
                 404, "not_found")


def post_timeout(api, sid, body):
    return api.post(f"{api.base}/v1/sandboxes/{sid}/timeout", json=body,
                    timeout=TIMEOUT)


def test_on_timeout_suspend_and_auto_resume(api, sandboxes, driver):
    """At its deadline a sandbox created with on_timeout suspend is
    suspended, not deleted; with auto_resume an exec resumes it."""
    sid = sandboxes.create(timeout=4, on_timeout="suspend",
                           auto_resume=True)["id"]
    exec_json(api, sid, ["sh", "-c", "echo here > /root/f; sync"])
    sb = wait_state(api, sid, "suspended", 60)
    assert sb["on_timeout"] == "suspend" and sb["auto_resume"] is True, sb
    assert parse_time(sb["expires_at"]).timestamp() - time.time() > 6 * 24 * 3600, sb
    out = exec_json(api, sid, ["cat", "/root/f"])
    assert out["stdout"] == "here\n", out
    assert get(api, sid).json()["state"] == "running"


def tree_holds(root, needle):
    """Whether any file under root contains needle (read in chunks)."""
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            tail = b""
            with open(p, "rb") as fh:
                while True:
                    chunk = fh.read(1 << 20)
                    if not chunk:
                        break
                    if needle in tail + chunk:
                        return p
                    tail = chunk[-len(needle):]
    return None


def test_no_credential_value_in_a_snapshot(stack, api, sandboxes, driver):
    """Credentials never enter a sandbox, so no snapshot holds one: the
    suspended sandbox's memory and files have its placeholder, never its
    value."""
    value = "sekrit-" + os.urandom(16).hex()
    r = api.post(f"{api.base}/v1/credentials",
                 json={"name": "snapcheck", "value": value,
                       "inject": {"hosts": ["api.example.test"],
                                  "header": "Authorization",
                                  "format": "Bearer {value}"}},
                 timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    try:
        sid = sandboxes.create()["id"]
        out = exec_json(api, sid, ["sh", "-c",
                                   "echo $AIRLOCK_CRED_SNAPCHECK > /root/c;"
                                   " cat /root/c; sync"])
        assert out["stdout"] == "airlock-cred:snapcheck\n", out
        r = call(api, sid, "suspend", suspend_body(driver))
        assert r.status_code == 200, r.text
        snapdir = os.path.join(stack.state, "pool", "snapshots",
                               r.json()["snapshot"])
        assert os.path.isdir(snapdir)
        # The scan is not vacuous: the placeholder is found.
        assert tree_holds(snapdir, b"airlock-cred:snapcheck") is not None
        assert tree_holds(snapdir, value.encode()) is None
    finally:
        api.delete(f"{api.base}/v1/credentials/snapcheck", timeout=TIMEOUT)


def test_a_newer_suspend_supersedes_the_older_snapshot(stack, api, sandboxes,
                                                       driver):
    """A sandbox keeps one suspend snapshot, the one it resumes from: its
    older ones are removed once a newer suspend committed."""
    sid = sandboxes.create()["id"]
    body = suspend_body(driver)
    r = call(api, sid, "suspend", body)
    assert r.status_code == 200, r.text
    first = r.json()["snapshot"]
    assert call(api, sid, "resume").status_code == 200
    r = call(api, sid, "suspend", body)
    assert r.status_code == 200, r.text
    second = r.json()["snapshot"]
    path = os.path.join(stack.state, "pool", "snapshots", first)
    deadline = time.monotonic() + 30
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not os.path.exists(path), "the superseded snapshot stayed"
    assert api.get(f"{api.base}/v1/snapshots/{first}",
                   timeout=TIMEOUT).status_code == 404
    assert os.path.isdir(os.path.join(stack.state, "pool", "snapshots",
                                      second))
    assert call(api, sid, "resume").status_code == 200
