"""vm-only behaviour: every sandbox is its own QEMU microvm with its own
guest kernel, restored from the template's snapshot. Skipped (with the
reason) where GET /v1/info does not list the vm driver, except the test
that says whether it should be listed here."""
import os
import platform
import secrets
import signal
import time

import pytest

from conftest import (TIMEOUT, Sandboxes, assert_error, descendants,
                      exec_json, is_qemu, listener_pid, pid_alive, qemu_of,
                      qemu_rundir, shim_of, usable_drivers)

QEMU = "/usr/bin/qemu-system-x86_64"


@pytest.fixture(scope="module")
def vm(info):
    if "vm" not in usable_drivers(info):
        pytest.skip(f"vm driver not usable on this host: GET /v1/info "
                    f"answered {info!r}")
    return "vm"


@pytest.fixture
def vms(api, vm):
    s = Sandboxes(api, "vm")
    yield s
    s.cleanup()


@pytest.fixture(scope="module")
def vmbox(api, vm):
    s = Sandboxes(api, "vm")
    sb = s.create(timeout=1800)
    yield sb
    s.cleanup()


def sh(api, sid, script, **kw):
    return exec_json(api, sid, ["sh", "-c", script], **kw)


def test_info_lists_vm_where_qemu_is_installed(info):
    """Here QEMU is installed and the stack fetched the guest kernel, so
    the vm driver must be usable; a host without QEMU skips this."""
    if not os.access(QEMU, os.X_OK):
        pytest.skip(f"{QEMU} not installed")
    assert info is not None, "GET /v1/info failed"
    assert "vm" in info["drivers"], info


def test_info_reports_accel(info, vm):
    # These machines cannot boot Linux under (nested) KVM: the probe must
    # have fallen back to TCG. Elsewhere set AIRLOCK_TEST_VM_ACCEL=kvm.
    want = os.environ.get("AIRLOCK_TEST_VM_ACCEL", "tcg")
    assert info["vm_accel"] == want, info


def test_sandbox_reports_driver_and_accel(api, vmbox, info):
    assert vmbox["driver"] == "vm"
    assert vmbox["accel"] == info["vm_accel"]
    r = api.get(f"{api.base}/v1/sandboxes/{vmbox['id']}", timeout=TIMEOUT)
    assert r.status_code == 200
    assert r.json()["driver"] == "vm"
    assert r.json()["accel"] == info["vm_accel"]
    listed = {s["id"]: s for s in api.get(
        api.base + "/v1/sandboxes", timeout=TIMEOUT).json()["sandboxes"]}
    assert listed[vmbox["id"]]["driver"] == "vm"
    assert listed[vmbox["id"]]["accel"] == info["vm_accel"]


def test_guest_kernel_is_not_the_hosts(api, stack, vmbox):
    res = sh(api, vmbox["id"], "uname -r")
    assert res["exit_code"] == 0
    guest = res["stdout"].strip()
    assert guest and guest != platform.release(), (guest, platform.release())
    # It is the Debian cloud kernel the stack fetched into its state dir
    # ("linux-image-<release> <version>").
    with open(os.path.join(stack.state, "vm", "kernel", "version")) as f:
        pkg = f.read().split()[0]
    assert pkg == "linux-image-" + guest, (pkg, guest)


def test_guest_cannot_see_host_mounts_or_disks(api, stack, vmbox):
    sid = vmbox["id"]
    mounts = sh(api, sid, "cat /proc/mounts")["stdout"]
    assert mounts, "no /proc/mounts in the guest"
    # No host path, no btrfs pool, no loop device: the root is the
    # sandbox's own virtio disk.
    assert stack.state not in mounts, mounts
    assert "btrfs" not in mounts, mounts
    assert "/dev/loop" not in mounts, mounts
    root = [l.split() for l in mounts.splitlines() if l.split()[1:2] == ["/"]]
    assert root and root[-1][0] == "/dev/vda", mounts
    res = sh(api, sid, "ls /sys/block")
    assert res["stdout"].split() == ["vda"], res
    parts = sh(api, sid, "cat /proc/partitions")["stdout"].split()
    assert "vda" in parts and not [p for p in parts if p.startswith(
        ("loop", "sd", "nvme", "xvd", "dm-"))], parts
    # The guest's disk is the sandbox's reflinked 1 GiB image, not the
    # size of anything on the host.
    size = int(sh(api, sid, "cat /sys/block/vda/size")["stdout"])
    assert size * 512 <= 2 << 30, size


def test_guest_cannot_see_host_processes(api, vmbox):
    res = sh(api, vmbox["id"],
             "for p in /proc/[0-9]*; do "
             "c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); "
             "[ -n \"$c\" ] && echo \"$c\"; done; true")
    procs = res["stdout"].splitlines()
    assert procs, res
    for mark in ("pytest", "airlock-shim", "postgres", "nginx", "qemu"):
        assert not [p for p in procs if mark in p], (mark, procs)


def test_restored_sandboxes_are_independent(api, vms):
    a = vms.create()
    b = vms.create()
    mark = secrets.token_hex(8)
    # On the root disk (each sandbox's own reflinked image) and in /tmp.
    res = sh(api, a["id"], f"echo {mark} > /only-a && echo {mark} > "
                           f"/tmp/only-a && sync && cat /only-a")
    assert res["stdout"] == mark + "\n", res
    res = sh(api, b["id"], "cat /only-a /tmp/only-a 2>&1; "
                           "test -e /only-a || test -e /tmp/only-a; "
                           "echo rc=$?")
    assert mark not in res["stdout"] and "rc=1" in res["stdout"], res
    # Both were restored from the same snapshot, RNG state included; the
    # host reseeds each after the restore, so they do not produce the
    # same "random" bytes.
    rnd = [sh(api, s["id"], "head -c 16 /dev/urandom | od -An -tx1")[
        "stdout"] for s in (a, b)]
    assert rnd[0] != rnd[1], rnd
    # ... and each got its own hostname after the restore.
    names = [sh(api, s["id"], "hostname")["stdout"].strip() for s in (a, b)]
    assert names == [a["id"], b["id"]], names
    # A fresh sandbox from the same template does not see a's file
    # either: nothing written in a sandbox reaches the template.
    c = vms.create()
    res = sh(api, c["id"], "test -e /only-a; echo rc=$?")
    assert res["stdout"] == "rc=1\n", res


def test_guest_clock_is_set_after_restore(api, vmbox):
    # The snapshot was taken when the template booted; a restored guest
    # gets the host's time, not the snapshot's.
    guest = int(sh(api, vmbox["id"], "date +%s")["stdout"])
    assert abs(guest - time.time()) < 30, (guest, time.time())


def wait_state(api, sid, want, seconds=30):
    deadline = time.monotonic() + seconds
    body = None
    while time.monotonic() < deadline:
        r = api.get(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
        if r.status_code == 200:
            body = r.json()
            if body["state"] == want:
                return body
        time.sleep(0.2)
    return body


def test_killed_qemu_marks_error_and_frees_slot(stack, api, vms):
    other = vms.create()
    sb = vms.create()
    sid = sb["id"]
    qemu = qemu_of(stack, sid)
    assert qemu is not None, "no QEMU found for the sandbox"
    shim = shim_of(stack, sid)
    root = os.path.join(stack.state, "pool", "sandboxes", sid)
    sock = os.path.join(stack.state, "run", "sbx", f"{sid}.sock")
    assert os.path.isdir(root) and os.path.exists(sock)
    rundir = qemu_rundir(qemu)

    os.kill(qemu, signal.SIGKILL)

    body = wait_state(api, sid, "error")
    assert body is not None and body["state"] == "error", body
    assert isinstance(body.get("error"), str) and body["error"], body
    # Its slot is free: the shim ended, the rootfs snapshot (with the
    # reflinked disk) and the control socket are gone.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not os.path.exists(root) and not os.path.exists(sock) and \
                (shim is None or not pid_alive(shim)):
            break
        time.sleep(0.2)
    assert not os.path.exists(root), os.listdir(root)
    assert not os.path.exists(sock)
    # QEMU's own sockets and log went with it.
    assert rundir is None or not os.path.exists(rundir), \
        (rundir, os.listdir(rundir))
    assert shim is None or not pid_alive(shim)
    assert not pid_alive(qemu)
    # Using it now is a clear API error, not a hang.
    r = api.post(f"{api.base}/v1/sandboxes/{sid}/exec",
                 json={"cmd": ["true"]}, headers={"Accept": "application/json"},
                 timeout=TIMEOUT)
    assert 400 <= r.status_code < 600 and "error" in r.json(), r.text
    # The neighbour did not notice, and new sandboxes still come up.
    assert sh(api, other["id"], "echo alive")["stdout"] == "alive\n"
    fresh = vms.create()
    assert sh(api, fresh["id"], "echo new")["stdout"] == "new\n"
    # An errored sandbox can still be deleted.
    r = api.delete(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
    assert r.status_code == 204, r.text
    assert_error(api.get(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT),
                 404)


def vm_standbys(stack):
    d = os.path.join(stack.state, "run", "pool")
    try:
        return sorted(n for n in os.listdir(d)
                      if n.startswith("minimal.vm.") and n.endswith(".sock"))
    except FileNotFoundError:
        return []


def test_claim_takes_a_waiting_qemu_and_pool_refills(stack, api, vms):
    """A create claims a standby: the sandbox runs in a QEMU that was
    already started before the request, and the controller starts a new
    standby QEMU in its place."""
    deadline = time.monotonic() + 60
    while len(vm_standbys(stack)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    names = vm_standbys(stack)
    assert len(names) >= 2, names
    waiting = set()
    for n in names:
        shim = listener_pid(stack, os.path.join(stack.state, "run", "pool",
                                                n))
        assert shim is not None, n
        waiting |= {p for p in descendants(shim) if is_qemu(p)}
    assert len(waiting) >= 2, waiting

    made = [vms.create() for _ in range(2)]
    used = {qemu_of(stack, sb["id"]) for sb in made}
    assert used <= waiting, (used, waiting)
    for sb in made:
        assert sh(api, sb["id"], "hostname")["stdout"] == sb["id"] + "\n"

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        now = vm_standbys(stack)
        if len(now) >= 2 and not set(now) & set(names):
            break
        time.sleep(0.2)
    assert len(vm_standbys(stack)) >= 2 and \
        not set(vm_standbys(stack)) & set(names), vm_standbys(stack)
    # The new standbys are new QEMUs, waiting.
    fresh = set()
    for n in vm_standbys(stack):
        shim = listener_pid(stack, os.path.join(stack.state, "run", "pool",
                                                n))
        if shim is not None:
            fresh |= {p for p in descendants(shim) if is_qemu(p)}
    assert len(fresh) >= 2 and not fresh & waiting, (fresh, waiting)


def cgroup_file(sid, v1_ctrl, v1_file, v2_file):
    v2 = f"/sys/fs/cgroup/airlock/{sid}/{v2_file}"
    v1 = f"/sys/fs/cgroup/{v1_ctrl}/airlock/{sid}/{v1_file}"
    return v2 if os.path.exists(v2) else v1


def test_qemu_runs_inside_the_sandboxs_limits(stack, api, vms):
    """QEMU itself is confined: a cgroup leaf named after the sandbox
    holds it, with memory = guest RAM + emulator overhead, a thread cap
    and the sandbox's CPU share; deleting the sandbox removes it."""
    sb = vms.create(cpu_shares=300)
    sid = sb["id"]
    pid = qemu_of(stack, sid)
    assert pid is not None, "no QEMU for the sandbox"
    with open(f"/proc/{pid}/cgroup") as f:
        groups = f.read()
    assert f"/airlock/{sid}\n" in groups, groups
    with open(cgroup_file(sid, "memory", "memory.limit_in_bytes",
                          "memory.max")) as f:
        assert int(f.read()) == (256 + 512) << 20
    with open(cgroup_file(sid, "pids", "pids.max", "pids.max")) as f:
        assert f.read().strip() == "256"
    v1_shares = f"/sys/fs/cgroup/cpu/airlock/{sid}/cpu.shares"
    if os.path.exists(v1_shares):
        with open(v1_shares) as f:
            assert f.read().strip() == "300"
    r = api.delete(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
    assert r.status_code == 204
    assert not os.path.exists(
        cgroup_file(sid, "memory", "memory.limit_in_bytes", "memory.max"))
