"""vm-only behaviour: every sandbox is its own QEMU microvm with its own
guest kernel, restored from the template's snapshot. Skipped (with the
reason) where GET /v1/info does not list the vm driver, except the test
that says whether it should be listed here."""
import errno
import fcntl
import hashlib
import os
import platform
import re
import secrets
import signal
import time

import pytest

from conftest import (TIMEOUT, Sandboxes, assert_error, cgroup_path, cmdline,
                      descendants, exec_json, is_qemu, listener_pid,
                      pid_alive, qemu_of, qemu_rundir, shim_of,
                      usable_drivers)

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
    # The guest's disk is the sandbox's own image, grown to its disk_mb,
    # not the size of anything on the host.
    size = int(sh(api, sid, "cat /sys/block/vda/size")["stdout"])
    assert size * 512 == vmbox["disk_mb"] << 20, (size, vmbox)


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
    assert rundir is not None, "QEMU's log is not in a run directory"

    os.kill(qemu, signal.SIGKILL)

    body = wait_state(api, sid, "error")
    assert body is not None and body["state"] == "error", body
    assert isinstance(body.get("error"), str) and body["error"], body
    # The reason says what happened, whichever of the channel's end and
    # SIGCHLD the shim saw first: the machine by the driver's init_name,
    # and not out of memory (its cgroup counts no OOM kill).
    assert body["error"] == "the sandbox's virtual machine (QEMU) was " \
        "killed by signal 9", body
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
    assert not os.path.exists(rundir), (rundir, os.listdir(rundir))
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
    with open(cgroup_path("memory", sid, "memory.limit_in_bytes",
                          "memory.max")) as f:
        assert int(f.read()) == (256 + 512) << 20
    with open(cgroup_path("pids", sid, "pids.max", "pids.max")) as f:
        assert f.read().strip() == "256"
    v1_shares = f"/sys/fs/cgroup/cpu/airlock/{sid}/cpu.shares"
    if os.path.exists(v1_shares):
        with open(v1_shares) as f:
            assert f.read().strip() == "300"
    r = api.delete(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
    assert r.status_code == 204
    assert not os.path.exists(
        cgroup_path("memory", sid, "memory.limit_in_bytes", "memory.max"))


# QEMU's mac= of every machine's NIC, the template's (core/vm/net.h).
TEMPLATE_MAC = "52:54:00:12:34:56"


def mac_for_id(sid):
    """The contract of core/vm/net.c (the egress gateway relies on it):
    0x02 (locally administered, unicast), then the first 5 bytes of
    SHA-256(id)."""
    h = hashlib.sha256(sid.encode()).digest()
    return ":".join(f"{b:02x}" for b in b"\x02" + h[:5])


def test_each_sandbox_has_its_own_mac_on_its_slots_tap(stack, api, vms):
    """After a restore every sandbox has its own MAC: set by the guest
    init from the GO line (a create restored from the snapshot) or by the
    agent from IDENTITY (a claimed warm standby, which had the standby's).
    The API reports it, it is derived from the id, no two sandboxes and
    no sandbox and its template share one, and the NIC is on the network
    slot's tap (QEMU's only network backend, a descriptor) with the
    default route via the slot's gateway (test_network.py checks the
    addresses)."""
    deadline = time.monotonic() + 60
    while len(vm_standbys(stack)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    waiting = set()
    for n in vm_standbys(stack):
        shim = listener_pid(stack, os.path.join(stack.state, "run", "pool",
                                                n))
        if shim is not None:
            waiting |= {p for p in descendants(shim) if is_qemu(p)}
    assert waiting, vm_standbys(stack)
    # The pool holds two standbys: the first creates claim them, the
    # next ones (made before the controller's refill is ready) restore
    # from the snapshot themselves.
    by_path = {}
    made = []
    for _ in range(6):
        sb = vms.create()
        made.append(sb)
        by_path.setdefault(qemu_of(stack, sb["id"]) in waiting, sb)
        if len(by_path) == 2:
            break
    assert True in by_path, "no create claimed a waiting standby"
    assert False in by_path, "every create claimed a standby"

    macs = {}
    for sb in (by_path[True], by_path[False]):
        sid = sb["id"]
        r = api.get(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        mac = r.json().get("mac")
        assert isinstance(mac, str) and re.fullmatch(
            r"02(:[0-9a-f]{2}){5}", mac), r.json()
        assert mac == mac_for_id(sid), (sid, mac)
        assert sb.get("mac") == mac, sb
        res = sh(api, sid, "ls /sys/class/net; "
                           "cat /sys/class/net/eth0/address")
        assert res["exit_code"] == 0, res
        lines = res["stdout"].split()
        assert lines[:-1] == ["eth0", "lo"], res
        assert lines[-1] == mac, (sid, lines[-1], mac)
        macs[sid] = mac
        # The default route goes via the slot's gateway ...
        res = sh(api, sid, "cat /proc/net/route")
        assert res["exit_code"] == 0, res
        routes = [l.split() for l in res["stdout"].splitlines()
                  if l.strip() and not l.startswith("Iface")]
        assert [r[:2] for r in routes if r[1] == "00000000"] == \
            [["eth0", "00000000"]], res
        # ... through the tap QEMU got as a descriptor, its only backend.
        qemu = qemu_of(stack, sid)
        assert qemu is not None
        argv = cmdline(qemu)
        assert "-netdev tap,id=tap0,fd=9 " in argv, argv
        assert ("virtio-net-device,id=net0,netdev=tap0,"
                f"mac={TEMPLATE_MAC}") in argv, argv
        assert argv.count("-netdev") == 1 and "-nic " not in argv, argv
    assert len(set(macs.values())) == 2, macs
    assert TEMPLATE_MAC not in macs.values(), macs
    # An ns sandbox has no NIC of its own to report.
    r = api.post(api.base + "/v1/sandboxes",
                 json={"template": "minimal", "driver": "ns"},
                 timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    vms.ids.append(r.json()["id"])
    assert "mac" not in r.json(), r.json()
    g = api.get(f"{api.base}/v1/sandboxes/{r.json()['id']}", timeout=TIMEOUT)
    assert g.status_code == 200 and "mac" not in g.json(), g.json()


# core/vm/jail.h
JAIL_UID_BASE = 1900000000
JAIL_UID_COUNT = 65536


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def owned_by(top, uid):
    """Paths under top (not following links) owned by uid."""
    found = []
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            try:
                if os.lstat(p).st_uid == uid:
                    found.append(p)
            except OSError:
                pass
    return found


def test_qemu_runs_jailed(stack, api, vms):
    """Every sandbox's QEMU has its own unprivileged uid, no capabilities,
    namespaces of its own and a root holding nothing of the host's."""
    a, b = vms.create(), vms.create()
    qa, qb = qemu_of(stack, a["id"]), qemu_of(stack, b["id"])
    assert qa is not None and qb is not None and qa != qb
    uids = []
    for q in (qa, qb):
        st = proc_status(q)
        uid = int(st["Uid"].split()[0])
        assert st["Uid"].split() == [str(uid)] * 4, st["Uid"]
        assert st["Gid"].split() == [str(uid)] * 4, st["Gid"]
        assert st["Groups"] == "", st["Groups"]
        assert JAIL_UID_BASE <= uid < JAIL_UID_BASE + JAIL_UID_COUNT
        assert int(st["CapEff"], 16) == 0 and int(st["CapPrm"], 16) == 0
        assert st["NoNewPrivs"] == "1"
        with open(f"/proc/{q}/limits") as f:
            core = [ln for ln in f if ln.startswith("Max core file size")]
        assert core and core[0].split()[4:6] == ["0", "0"], core
        uids.append(uid)
    assert uids[0] != uids[1]
    for ns in ("mnt", "net", "pid", "ipc", "uts"):
        host = os.readlink(f"/proc/self/ns/{ns}")
        na = os.readlink(f"/proc/{qa}/ns/{ns}")
        nb = os.readlink(f"/proc/{qb}/ns/{ns}")
        assert na != host and nb != host and na != nb, ns
    # Its root: /usr, a few devices, its own /proc; nothing else.
    root = f"/proc/{qa}/root"
    top = set(os.listdir(root))
    assert {"usr", "dev", "proc"} <= top, top
    assert not top & {"etc", "home", "root", "tmp", "var", "srv", "opt",
                      "run", "sys", "mnt"}, top
    assert set(os.listdir(f"{root}/dev")) <= \
        {"null", "zero", "random", "urandom", "kvm"}
    # Read-only, even for the host's root going in through /proc.
    with pytest.raises(OSError) as e:
        open(f"{root}/planted", "w")
    assert e.value.errno == errno.EROFS
    # In its pid namespace it is alone.
    assert [p for p in os.listdir(f"{root}/proc") if p.isdigit()] == ["1"]
    # The uid owns nothing on the host: not the sandbox's disk or rootfs,
    # not QEMU's run directory.
    for sb, q, uid in ((a, qa, uids[0]), (b, qb, uids[1])):
        sroot = os.path.join(stack.state, "pool", "sandboxes", sb["id"])
        assert owned_by(sroot, uid) == []
        assert owned_by(qemu_rundir(q), uid) == []
    # And the sandboxes work.
    assert sh(api, a["id"], "echo ok")["stdout"] == "ok\n"


def template_ram(pid):
    """/proc path of the template RAM memfd QEMU pid was given."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("/memfd:airlock-template-ram"):
            return f"/proc/{pid}/fd/{fd}"
    return None


def test_template_ram_is_sealed_and_shared(stack, api, vms):
    """Clones map one copy of their template's RAM, which nobody, not even
    the host's root, can write: a QEMU that breaks cannot change what
    later sandboxes start from."""
    a, b = vms.create(), vms.create()
    qa, qb = qemu_of(stack, a["id"]), qemu_of(stack, b["id"])
    ra, rb = template_ram(qa), template_ram(qb)
    assert ra is not None and rb is not None
    assert os.stat(ra).st_ino == os.stat(rb).st_ino, \
        "each clone got its own copy: pages are not shared"
    fd = os.open(ra, os.O_RDWR)
    try:
        F_GET_SEALS = 1034
        assert fcntl.fcntl(fd, F_GET_SEALS) & 0xF == 0xF
        with pytest.raises(PermissionError):
            os.write(fd, b"x")
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 4096)
    finally:
        os.close(fd)
    # QEMU maps it privately: guest writes are copy-on-write.
    with open(f"/proc/{qa}/maps") as f:
        maps = [ln.split() for ln in f if "memfd:airlock-template-ram" in ln]
    assert maps and all(m[1].endswith("p") for m in maps), maps
    # A guest writing all over its RAM changes nothing for its sibling.
    sh(api, a["id"], "head -c 64M /dev/zero > /dev/shm/fill && sync")
    assert sh(api, b["id"], "echo fine")["stdout"] == "fine\n"
