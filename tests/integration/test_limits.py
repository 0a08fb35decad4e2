"""Bounds on what a hostile sandbox or client can cost the host: the log
flood (forged agent frames from inside, bad frames on the shim's control
socket), the fcgi socket's permissions and failed authentication."""
import grp
import os
import socket
import stat
import subprocess
import tempfile
import threading
import time

import pytest
import requests

from conftest import (REPO, TIMEOUT, Sandboxes, Stack, _cleanup_state,
                      assert_error, assert_refused_at_start, children, dir_bytes, exec_json,
                      free_port, qemu_log_copier, qemu_of, qemu_rundir,
                      seed_vm_kernel, shim_of, usable_drivers)

MIB = 1 << 20


@pytest.fixture(scope="module")
def forge_frames_path(tmp_path_factory):
    """tests/integration/guest/forge_frames.c, built static for a guest."""
    out = str(tmp_path_factory.mktemp("forge") / "forge_frames")
    src = os.path.join(REPO, "tests", "integration", "guest",
                       "forge_frames.c")
    subprocess.run(["cc", "-static", "-O2", "-o", out, src], check=True)
    return out


@pytest.fixture(scope="module")
def forge_frames(forge_frames_path):
    with open(forge_frames_path, "rb") as f:
        return f.read()


def agent_host_pid(stack, sid):
    """The host pid of an ns sandbox's agent: its shim's child."""
    shim = shim_of(stack, sid)
    for pid in children(shim):
        with open(f"/proc/{pid}/comm") as f:
            if f.read().strip() == "airlock-agent":
                return pid
    raise AssertionError(f"no agent under shim {shim} of {sid}")


def flood_control_socket(path, stop, counter):
    """Connect, send a frame with a bad magic, repeat: every one is a
    protocol error the shim logs."""
    while not stop.is_set():
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(path)
                s.sendall(b"XXXX" + bytes(12))
                s.recv(16)
        except OSError:
            pass
        counter[0] += 1


@pytest.mark.parametrize("drv", ["ns", "vm"])
def test_log_flood_is_bounded(api, stack, info, forge_frames,
                              forge_frames_path, drv):
    """A guest (vm) or a compromised agent (ns, where nothing inside can
    reach the agent's channel) that forges session ERROR frames for 20 s
    while a local client sends bad frames to its shim grows the host's log
    directory by at most 3 MiB, and the sandbox still answers."""
    if drv not in usable_drivers(info):
        pytest.skip(f"driver {drv} not usable on this host: {info!r}")
    sbs = Sandboxes(api, drv)
    try:
        sid = sbs.create()["id"]
        r = api.put(f"{api.base}/v1/sandboxes/{sid}/files",
                    params={"path": "/tmp/forge"}, data=forge_frames,
                    timeout=TIMEOUT)
        assert r.status_code == 201, r.text
        exec_json(api, sid, ["chmod", "755", "/tmp/forge"])
        logdir = os.path.join(stack.state, "log")
        before = dir_bytes(logdir)

        stop, bad = threading.Event(), [0]
        sock = os.path.join(stack.state, "run", "sbx", f"{sid}.sock")
        t = threading.Thread(target=flood_control_socket,
                             args=(sock, stop, bad))
        t.start()
        try:
            if drv == "vm":
                res = exec_json(api, sid, ["/tmp/forge", "20"])
                out, rc = res["stdout"], res["exit_code"]
            else:
                p = subprocess.run(
                    [forge_frames_path, "20", str(agent_host_pid(stack, sid))],
                    stdout=subprocess.PIPE, text=True, timeout=60)
                out, rc = p.stdout, p.returncode
        finally:
            stop.set()
            t.join()
        assert rc == 0, out
        sent = int(out.split()[1])
        # The flood was real: each of these is a log line of some 100
        # bytes, more than the bound without the limit.
        assert (sent + bad[0]) * 90 > 3 * MIB, (out, bad)

        grown = dir_bytes(logdir) - before
        print(f"log flood: {sent} forged frames, {bad[0]} bad connections,"
              f" log dir grew by {grown} bytes")
        assert grown <= 3 * MIB, f"log dir grew by {grown} bytes"
        with open(os.path.join(logdir, "shim.log"), errors="replace") as f:
            text = f.read()
        assert "log lines suppressed (rate limit)" in text

        res = exec_json(api, sid, ["echo", "still here"])
        assert res["stdout"] == "still here\n"
    finally:
        sbs.cleanup()


def test_vm_qemu_output_is_capped(api, stack, info):
    """What a sandbox's QEMU prints (a guest can make it: device errors)
    reaches its qemu.log through a copier that keeps the first MiB and
    drains the rest, so QEMU never blocks and the file stays small."""
    if "vm" not in usable_drivers(info):
        pytest.skip(f"vm driver not usable on this host: {info!r}")
    sbs = Sandboxes(api, "vm")
    try:
        sid = sbs.create()["id"]
        q = qemu_of(stack, sid)
        assert q is not None
        assert qemu_log_copier(q) is not None, os.readlink(f"/proc/{q}/fd/2")
        log = os.path.join(qemu_rundir(q), "qemu.log")
        # 3 MiB on QEMU's own stderr, as QEMU would write it.
        chunk = b"qemu-system-x86_64: virtio: guest-made error\n" * 1400
        with open(f"/proc/{q}/fd/2", "wb", buffering=0) as f:
            written = 0
            while written < 3 * MIB:
                written += f.write(chunk)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open(log, "rb") as f:
                data = f.read()
            if data.endswith(b"past 1 MiB is dropped\n"):
                break
            time.sleep(0.2)
        assert len(data) <= MIB + 100, len(data)
        assert data.endswith(b"airlock: QEMU's output past 1 MiB is "
                             b"dropped\n"), data[-200:]
        assert exec_json(api, sid, ["echo", "vm"])["stdout"] == "vm\n"
    finally:
        sbs.cleanup()


# ------------------------------------------------------------ AIRLOCK_DRIVERS


@pytest.fixture(scope="module")
def ns_only(stack):
    """A second stack of the same build with AIRLOCK_DRIVERS=ns."""
    st = Stack(tempfile.mkdtemp(prefix="airlock-it-ns-"), stack.build,
               free_port(), free_port())
    st.env["AIRLOCK_DRIVERS"] = "ns"
    st.env["AIRLOCK_WARM_POOL"] = "1"
    st.env["AIRLOCK_WARM_POOL_VM"] = "1"
    log = []
    try:
        seed_vm_kernel(st.state)
        p = st.sh("up", check=False)
        if p.returncode != 0:
            pytest.fail(f"stack did not start:\n{p.stdout}", pytrace=False)
        with open(os.path.join(st.state, "api-key")) as f:
            st.key = f.read().strip()
        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {st.key}"
        s.base = st.base
        s.stack = st
        yield s
    finally:
        _cleanup_state(st, log)


def test_disabled_driver(ns_only):
    api = ns_only
    r = api.get(api.base + "/v1/info", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    info = r.json()
    assert info["drivers"] == ["ns"], info
    assert info["default_driver"] == "ns", info

    r = api.post(api.base + "/v1/sandboxes",
                 json={"template": "minimal", "driver": "vm"},
                 timeout=TIMEOUT)
    assert_error(r, 422, "disabled")
    assert r.json()["error"]["message"] == \
        "driver vm is disabled by AIRLOCK_DRIVERS=ns"

    sbs = Sandboxes(api, "ns")
    try:
        sb = sbs.create()
        assert exec_json(api, sb["id"], ["echo", "ns"])["stdout"] == "ns\n"
    finally:
        sbs.cleanup()

    # The warm pool keeps ns standbys and none of vm.
    pool = os.path.join(api.stack.state, "run", "pool")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        socks = os.listdir(pool) if os.path.isdir(pool) else []
        if any(".ns." in n for n in socks):
            break
        time.sleep(0.2)
    time.sleep(2)
    socks = os.listdir(pool)
    assert any(".ns." in n for n in socks), socks
    assert not any(".vm." in n for n in socks), socks


def test_default_driver_must_be_enabled(stack, tmp_path):
    """A default the operator disabled stops the programs at start."""
    assert_refused_at_start(stack, tmp_path,
                            {"AIRLOCK_DRIVERS": "ns",
                             "AIRLOCK_DEFAULT_DRIVER": "vm"},
                            "AIRLOCK_DEFAULT_DRIVER=vm is not enabled by "
                            "AIRLOCK_DRIVERS=ns")


# ------------------------------------------------------------ the front door


def test_fcgi_socket_is_nginx_only(stack):
    path = os.path.join(stack.state, "run", "fcgi.sock")
    st = os.stat(path)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o660, oct(st.st_mode)
    assert st.st_uid == 0
    # The group nginx's workers run as, from the rendered config.
    with open(os.path.join(stack.state, "nginx", "nginx.conf")) as f:
        user = next(line.split() for line in f
                    if line.startswith("user "))
    group = user[2].rstrip(";")
    assert st.st_gid == grp.getgrnam(group).gr_gid, (st.st_gid, group)
    # Anyone else cannot connect.
    p = subprocess.run(
        ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c",
         "import socket,sys; s=socket.socket(socket.AF_UNIX); "
         "s.connect(sys.argv[1])", path],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=30)
    assert p.returncode != 0 and "PermissionError" in p.stdout, p.stdout


def test_failed_auth_is_rate_limited(stack):
    url = stack.url("/v1/sandboxes")
    with requests.Session() as bad:
        bad.headers["Authorization"] = "Bearer " + "x" * 40
        codes, throttled = [], None
        for _ in range(50):
            r = bad.get(url, timeout=TIMEOUT)
            codes.append(r.status_code)
            if r.status_code == 429 and throttled is None:
                throttled = r
        assert set(codes) == {401, 429}, codes
        assert codes[0] == 401
        assert_error(throttled, 429, "rate_limited")
        assert throttled.headers.get("Retry-After") == "1"
        # A valid key right after is never throttled.
        for _ in range(5):
            r = requests.get(url, headers={"X-API-Key": stack.key},
                             timeout=TIMEOUT)
            assert r.status_code == 200, r.text
        r = requests.post(stack.url("/v1/sandboxes"),
                          headers={"Authorization": f"Bearer {stack.key}"},
                          json={"template": "no-such-template"},
                          timeout=TIMEOUT)
        assert r.status_code == 404, r.text
        # The limit lifts: within a few seconds a bad key is a 401 again
        # (and the other tests' 401 checks see 401s).
        deadline = time.monotonic() + 15
        while True:
            r = bad.get(url, timeout=TIMEOUT)
            if r.status_code == 401 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert_error(r, 401, "unauthorized")
        assert r.json()["error"]["message"] == "invalid API key"
    time.sleep(12)  # refill the burst for the tests after this one
    r = requests.get(url, timeout=TIMEOUT)
    assert_error(r, 401, "unauthorized")
    assert r.json()["error"]["message"].startswith("API key required")
