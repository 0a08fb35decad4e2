"""Sandboxes outlive restarts of nginx, the fcgi workers and the
controller; the controller deletes expired sandboxes."""
import time

from conftest import TIMEOUT, assert_error, exec_json, pid_alive, qemu_of


def wait_health(stack, seconds=20):
    import requests
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if requests.get(stack.url("/v1/health"), timeout=2).status_code == 200:
                return True
        except requests.RequestException:
            pass
        time.sleep(0.1)
    return False


def test_sandboxes_survive_restarts(stack, api, sandboxes, driver):
    sb = sandboxes.create(timeout=600)
    exec_json(api, sb["id"], ["sh", "-c", "echo before > /tmp/mark"])
    shims = stack.pids("airlock-shim")
    assert shims, "no shim process found for the stack"
    # A vm sandbox is also its QEMU: it must be the same process after.
    qemu = qemu_of(stack, sb["id"]) if driver == "vm" else None
    if driver == "vm":
        assert qemu is not None, "no QEMU found for the vm sandbox"

    killed = stack.kill9("airlock-fcgi")
    assert killed, "no airlock-fcgi process found"
    assert stack.kill9("airlock-controller"), "no airlock-controller found"
    stack.sh("restart", "nginx")
    # With the workers gone the API says so, in JSON.
    r = api.get(f"{api.base}/v1/sandboxes/{sb['id']}", timeout=TIMEOUT)
    assert r.status_code >= 500
    # The sandboxes did not notice.
    assert all(pid_alive(p) for p in shims)

    stack.sh("start", "fcgi")
    stack.sh("start", "controller")
    assert wait_health(stack)

    r = api.get(f"{api.base}/v1/sandboxes/{sb['id']}", timeout=TIMEOUT)
    assert r.status_code == 200
    assert r.json()["state"] == "running"
    res = exec_json(api, sb["id"], ["cat", "/tmp/mark"])
    assert res["stdout"] == "before\n"
    if driver == "vm":
        assert qemu_of(stack, sb["id"]) == qemu
    # New sandboxes work too after the restart.
    sb2 = sandboxes.create()
    assert exec_json(api, sb2["id"], ["echo", "new"])["stdout"] == "new\n"
    # And the controller was restarted while a sandbox was running: it
    # must not have reaped it.
    time.sleep(2)
    assert exec_json(api, sb["id"], ["true"])["exit_code"] == 0


def test_sandbox_expires(stack, api, sandboxes, driver):
    sb = sandboxes.create(timeout=2)
    qemu = qemu_of(stack, sb["id"]) if driver == "vm" else None
    assert exec_json(api, sb["id"], ["true"])["exit_code"] == 0
    time.sleep(5)
    deadline = time.monotonic() + 30
    while True:
        r = api.get(f"{api.base}/v1/sandboxes/{sb['id']}", timeout=TIMEOUT)
        if r.status_code == 404 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert_error(r, 404)
    r = api.post(f"{api.base}/v1/sandboxes/{sb['id']}/exec",
                 json={"cmd": ["true"]}, headers={"Accept": "application/json"},
                 timeout=TIMEOUT)
    assert_error(r, 404)
    if driver == "vm":
        # The expired machine is gone, not merely hidden.
        assert qemu is not None
        deadline = time.monotonic() + 10
        while pid_alive(qemu) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pid_alive(qemu)
