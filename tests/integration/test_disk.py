"""Disk: each sandbox's cap on what it adds to its template (a btrfs
qgroup on its snapshot), the operator's maximum, the 507 a nearly full
pool answers, and the state that must never live on the pool."""
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import (STACK, TIMEOUT, Sandboxes, assert_error, exec_json)
from test_warm_pool import standbys, wait_pool

# What the test stack runs with (core/base/config.c defaults).
DEFAULT_DISK_MB = 4096
MAX_DISK_MB = 65536
POOL_FULL_PCT = 95


def sh(api, sid, script, **kw):
    return exec_json(api, sid, ["sh", "-c", script], **kw)


def create(api, **body):
    body.setdefault("template", "minimal")
    return api.post(f"{api.base}/v1/sandboxes", json=body, timeout=TIMEOUT)


def get(api, sid):
    r = api.get(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


def test_disk_mb_default_and_requested(api):
    s = Sandboxes(api, "ns")
    try:
        sb = s.create()
        assert sb["disk_mb"] == DEFAULT_DISK_MB, sb
        assert get(api, sb["id"])["disk_mb"] == DEFAULT_DISK_MB
        sb = s.create(disk_mb=100)
        assert sb["disk_mb"] == 100, sb
        assert get(api, sb["id"])["disk_mb"] == 100
    finally:
        s.cleanup()
    listed = api.get(f"{api.base}/v1/templates", timeout=TIMEOUT).json()
    minimal = [t for t in listed["templates"] if t["name"] == "minimal"]
    assert minimal and minimal[0]["disk_mb"] == DEFAULT_DISK_MB, listed


def test_disk_mb_over_the_maximum_is_400(api):
    e = assert_error(create(api, disk_mb=MAX_DISK_MB + 1), 400,
                     "invalid_request")
    assert str(MAX_DISK_MB) in e["message"], e
    assert "AIRLOCK_MAX_DISK_MB" in e["message"], e
    for bad in (8, 0, -1, "64", 1.5, 1 << 40):
        e = assert_error(create(api, disk_mb=bad), 400, "invalid_request")
        assert "disk_mb" in e["message"], (bad, e)


def dd(api, sid, mb, path="/fill"):
    """Write mb MiB with dd (fsync'ed); (exit code, output, MiB on disk)."""
    res = sh(api, sid,
             f"dd if=/dev/zero of={path} bs=1048576 count={mb} "
             f"conv=fsync 2>&1; echo rc=$?; ls -l {path}", timeout=300)
    out = res["stdout"]
    rc = int(re.search(r"rc=(\d+)", out).group(1))
    m = re.search(r"\s(\d+)\s+\w{3}\s+\d+\s+[\d:]+\s+" + re.escape(path),
                  out)
    size = int(m.group(1)) / (1 << 20) if m else None
    return rc, out, size


def test_filling_the_disk_stops_at_disk_mb(api, sandboxes, driver):
    """The redteam attempt "fill the disk": 100 MiB into a 64 MiB cap
    fails inside (ns: EDQUOT from the qgroup; vm: the host's EDQUOT
    reaches the guest as EIO, or EROFS once ext4 remounts), and a neighbour still writes."""
    small = sandboxes.create(disk_mb=64, timeout=900)
    neighbour = sandboxes.create(timeout=900)
    rc, out, size = dd(api, small["id"], 100)
    print(f"{driver}: dd of 100 MiB into disk_mb=64: rc={rc}: {out!r}")
    assert rc != 0, out
    if driver == "ns":
        assert "Disk quota exceeded" in out, out
        assert size is not None and 40 <= size <= 66, out
    else:
        # The guest's ext4 has room; the host refuses the image's new
        # extents, QEMU reports the error (werror=report), not a pause.
        # dd sees the EIO, or, when ext4 met it first in its journal and
        # remounted itself read-only (errors=remount-ro), EROFS.
        assert ("Input/output error" in out
                or "Read-only file system" in out), out
    # The sandbox is still there and answers.
    assert sh(api, small["id"], "echo alive")["stdout"].strip() == "alive"
    rc, out, size = dd(api, neighbour["id"], 100)
    assert rc == 0 and size == 100, out
    assert sh(api, neighbour["id"], "rm /fill; echo ok")["exit_code"] == 0
    # A new sandbox still starts on the pool.
    fresh = sandboxes.create()
    assert sh(api, fresh["id"], "echo up")["stdout"].strip() == "up"


def df_total_mib(api, sid):
    """Size of the sandbox's root filesystem as its own df says, MiB."""
    out = sh(api, sid, "df -m / | { while read a b c; do x=$b; done; "
                       "echo $x; }")["stdout"]
    return int(out.strip())


def grow_lines(stack, sid):
    """The shim's log lines that time sid's disk grow (start or claim)."""
    with open(os.path.join(stack.state, "log", "shim.log")) as f:
        return [ln.strip() for ln in f
                if sid in ln and "disk grow" in ln]


def test_vm_filesystem_is_as_big_as_disk_mb(stack, api, info):
    """The template's image is the default disk_mb (4096): a default or
    smaller create's guest ext4 is that size (below it the qgroup stops
    writes at disk_mb: test_filling_the_disk_stops_at_disk_mb); a larger
    disk_mb grows it at the start or claim, and the guest can allocate
    past the image's size."""
    if "vm" not in (info or {}).get("drivers", []):
        pytest.skip(f"vm driver not usable on this host: {info!r}")
    s = Sandboxes(api, "vm")
    big = 2 * DEFAULT_DISK_MB
    try:
        for mb in (big, DEFAULT_DISK_MB, 64):
            body = {} if mb == DEFAULT_DISK_MB else {"disk_mb": mb}
            sid = s.create(timeout=900, **body)["id"]
            total = df_total_mib(api, sid)
            lines = grow_lines(stack, sid)
            print(f"disk_mb={mb}: df {total} MiB; {lines}")
            assert lines, f"no disk grow logged for {sid}"
            size = max(mb, DEFAULT_DISK_MB)
            assert size * 0.95 <= total <= size, (mb, total)
        # Allocation (not data: fallocate writes no blocks) past the image.
        past = DEFAULT_DISK_MB + 200
        res = sh(api, sid, f"fallocate -l {past}M /big 2>&1; echo rc=$?")
        assert "rc=0" not in res["stdout"], res
        res = sh(api, s.ids[0], f"fallocate -l {past}M /big && rm /big && "
                                "echo ok")
        assert res["stdout"].strip() == "ok", res
    finally:
        s.cleanup()


def test_vm_claims_grow_only_past_the_image(stack, api, info):
    """A vm standby waits with the template's image, the default disk_mb:
    a create asking less or the default claims it with nothing to grow;
    one asking more claims it too and grows it."""
    if "vm" not in (info or {}).get("drivers", []):
        pytest.skip(f"vm driver not usable on this host: {info!r}")
    s = Sandboxes(api, "vm")
    try:
        for mb in (2048, 2 * DEFAULT_DISK_MB):
            assert wait_pool(stack, "vm"), standbys(stack, "vm")
            before = set(standbys(stack, "vm"))
            sid = s.create(disk_mb=mb, timeout=900)["id"]
            assert before - set(standbys(stack, "vm")), "no standby claimed"
            line = [ln for ln in grow_lines(stack, sid) if "adopted" in ln]
            assert line, grow_lines(stack, sid)
            size = max(mb, DEFAULT_DISK_MB)
            assert size * 0.95 <= df_total_mib(api, sid) <= size
            grew = "(disk grow 0.0" not in line[0]
            assert grew == (mb > DEFAULT_DISK_MB), line
    finally:
        s.cleanup()


def test_claimed_standby_gets_the_requests_cap(stack, api):
    """A standby waits with the default cap; the claim replaces it."""
    assert wait_pool(stack, "ns"), standbys(stack, "ns")
    before = set(standbys(stack, "ns"))
    s = Sandboxes(api, "ns")
    try:
        sid = s.create(disk_mb=32)["id"]
        assert before - set(standbys(stack, "ns")), "no standby claimed"
        with open(os.path.join(stack.state, "log", "shim.log")) as f:
            assert f"sandbox {sid}: disk capped at 32 MiB" in f.read()
        rc, out, size = dd(api, sid, 64)
        assert rc != 0 and "Disk quota exceeded" in out, out
        assert size is not None and size <= 33, out
    finally:
        s.cleanup()


def test_deleting_frees_the_cap(api):
    """Writing the whole cap, deleting the file, writing it again: the
    cap counts what the sandbox holds, not what it ever wrote."""
    s = Sandboxes(api, "ns")
    try:
        sid = s.create(disk_mb=48)["id"]
        for _ in range(2):
            rc, out, _ = dd(api, sid, 32)
            assert rc == 0, out
            sh(api, sid, "rm /fill; sync")
            time.sleep(1)  # the freed extents leave the qgroup on commit
    finally:
        s.cleanup()


# A subvolume is a qgroup of its own: one the sandbox makes inside its
# root is not under its cap. btrfs lets any user with write access make
# one (BTRFS_IOC_SUBVOL_CREATE needs no capability).
SUBVOL_C = r"""
#include <fcntl.h>
#include <linux/btrfs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
int main(int argc, char **argv)
{
	struct btrfs_ioctl_vol_args a;
	memset(&a, 0, sizeof a);
	snprintf(a.name, sizeof a.name, "%s", argv[2]);
	int fd = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (fd < 0 || ioctl(fd, BTRFS_IOC_SUBVOL_CREATE, &a) < 0) {
		perror("subvolume create");
		return 1;
	}
	puts("created");
	return 0;
}
"""


@pytest.fixture(scope="module")
def subvol_tool(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed: cannot build the static helper")
    d = tmp_path_factory.mktemp("subvol")
    src, exe = d / "subvol.c", d / "subvol"
    src.write_text(SUBVOL_C)
    p = subprocess.run(["gcc", "-static", "-O2", "-o", str(exe), str(src)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot build a static helper: {p.stdout[-300:]}")
    return exe.read_bytes()


def test_nested_subvolume_does_not_escape_the_cap(api, subvol_tool):
    s = Sandboxes(api, "ns")
    try:
        sid = s.create(disk_mb=32)["id"]
        r = api.put(f"{api.base}/v1/sandboxes/{sid}/files",
                    params={"path": "/subvol"}, data=subvol_tool,
                    timeout=TIMEOUT)
        assert r.status_code in (200, 201, 204), r.text
        # A subvolume would be a quota group of its own, outside the
        # sandbox's cap: the jail's seccomp filter refuses the ioctl.
        made = sh(api, sid, "chmod 0755 /subvol && /subvol / nested 2>&1")
        assert made["exit_code"] == 1, made
        assert "Operation not permitted" in made["stdout"], made
    finally:
        s.cleanup()


# --------------------------------------------------------------- 507


def used_pct(path):
    st = os.statvfs(path)
    return -(-(st.f_blocks - st.f_bavail) * 100 // st.f_blocks)


def pool_is_our_loop_image(stack):
    pool = os.path.join(stack.state, "pool")
    src = subprocess.run(["findmnt", "-n", "-o", "SOURCE", "--mountpoint",
                          pool], stdout=subprocess.PIPE, text=True).stdout
    return src.strip().startswith("/dev/loop")


def test_nearly_full_pool_answers_507(stack, api):
    if not pool_is_our_loop_image(stack):
        pytest.skip("the pool is not this test stack's own loop image: "
                    "not filling it")
    pool = os.path.join(stack.state, "pool")
    s = Sandboxes(api, "ns")
    ballast = os.path.join(pool, "ballast")
    try:
        running = s.create(timeout=900)["id"]
        st = os.statvfs(pool)
        # Leave 3 % of the pool free: above the 95 % threshold, with room
        # for what running sandboxes still write.
        keep = st.f_blocks * st.f_frsize * 3 // 100
        take = st.f_bavail * st.f_frsize - keep
        assert take > 0
        fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.posix_fallocate(fd, 0, take)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.sync()
        assert used_pct(pool) >= POOL_FULL_PCT

        e = assert_error(create(api, driver="ns"), 507,
                         "insufficient_storage")
        assert "full" in e["message"] and "AIRLOCK_POOL_FULL_PCT" in \
            e["message"], e
        parts = {"name": (None, "fullpool"),
                 "airlockfile": (None, "FROM minimal\nRUN [\"true\"]\n")}
        r = api.post(f"{api.base}/v1/templates", files=parts,
                     timeout=TIMEOUT)
        assert_error(r, 507, "insufficient_storage")

        # Running sandboxes keep running; the pool's reserve is not
        # theirs (core/pool/poolcap.h), so once the controller has seen the
        # pool this full (every second), their writes stop inside them.
        res = sh(api, running, "cat /etc/hostname")
        assert res["exit_code"] == 0 and res["stdout"].strip(), res
        deadline = time.monotonic() + 10
        while True:
            res = sh(api, running, "echo x > /root/x && sync")
            said = res["stdout"] + res["stderr"]
            if "Disk quota exceeded" in said or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert "Disk quota exceeded" in said and res["exit_code"] != 0, res
    finally:
        if os.path.exists(ballast):
            os.unlink(ballast)
        subprocess.run(["btrfs", "filesystem", "sync", pool], check=False)
        s.cleanup()
    deadline = time.monotonic() + 30
    while used_pct(pool) >= POOL_FULL_PCT and time.monotonic() < deadline:
        time.sleep(0.5)
    s = Sandboxes(api, "ns")
    try:
        s.create()  # asserts 201: room again
    finally:
        s.cleanup()


# ------------------------------------------------ what is not on the pool


def mount_of(path):
    """(mount point, source) of the filesystem holding path."""
    out = subprocess.run(["findmnt", "-n", "-o", "TARGET,SOURCE",
                          "--target", path], stdout=subprocess.PIPE,
                         text=True, check=True).stdout.split()
    return out[0], out[1]


def test_pg_logs_keys_are_not_on_the_pool(stack):
    pool = os.path.join(stack.state, "pool")
    assert mount_of(pool)[0] == pool, "the pool is a filesystem of its own"
    for d in ("pg", "log", "keys"):
        p = os.path.join(stack.state, d)
        assert os.path.isdir(p), p
        assert mount_of(p)[0] != pool, p
        assert mount_of(p)[1] != mount_of(pool)[1], p
    # airlock-controller --init checked the same and turned quotas on.
    r = subprocess.run(["btrfs", "qgroup", "show", pool],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    assert r.returncode == 0, r.stdout
    # Where the kernel tells the mode (Linux 6.7+, which has simple
    # quotas), it is the cheap one (bench/snapshot.sh).
    uuid = subprocess.run(["findmnt", "-n", "-o", "UUID", "--mountpoint",
                           pool], stdout=subprocess.PIPE,
                          text=True).stdout.strip()
    mode = f"/sys/fs/btrfs/{uuid}/qgroups/mode"
    if os.path.exists(mode):
        with open(mode) as f:
            assert f.read().strip() == "squota"


def controller_init(stack, env):
    return subprocess.run([os.path.join(stack.build, "airlock-controller"),
                           "--init"], env=env, cwd="/",
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=60)


def test_state_dir_on_btrfs_still_gets_its_own_pool(stack):
    """A state directory on btrfs: stack.sh must not use a directory of
    it as the pool (PostgreSQL and the logs would share its space); it
    mounts the pool image there instead. A pool mounted by hand from the
    state's own filesystem is refused by airlock-controller --init."""
    tmp = tempfile.mkdtemp(prefix="airlock-btrfs-state-")
    img, mnt = os.path.join(tmp, "host.img"), os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    mounted = False
    env = dict(stack.env)
    state = os.path.join(mnt, "state")
    env.update({"AIRLOCK_STATE": state, "AIRLOCK_POOL_SIZE": "300M"})
    try:
        subprocess.run(["truncate", "-s", "400M", img], check=True)
        subprocess.run(["mkfs.btrfs", "-q", img], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["mount", "-o", "loop", img, mnt], check=True)
        mounted = True
        p = subprocess.run([STACK, "start", "pool"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stdout
        pool = os.path.join(state, "pool")
        target, src = mount_of(pool)
        assert target == pool, (target, src)
        assert src != mount_of(state)[1], src
        back = subprocess.run(["losetup", "-n", "-O", "BACK-FILE", src],
                              stdout=subprocess.PIPE, text=True).stdout
        assert back.strip() == os.path.join(state, "pool.img"), back
        # --init (no PostgreSQL here: it stops at the database) accepts
        # this pool and turns its quotas on.
        p = controller_init(stack, env)
        assert "pool's filesystem" not in p.stdout, p.stdout
        assert "disk quotas" not in p.stdout, p.stdout
        q = subprocess.run(["btrfs", "qgroup", "show", pool],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        assert q.returncode == 0, q.stdout
        p = subprocess.run([STACK, "stop", "pool"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stdout

        # A directory of the state's filesystem mounted as the pool.
        shared = os.path.join(state, "shared")
        os.makedirs(shared, exist_ok=True)
        subprocess.run(["mount", "--bind", shared, pool], check=True)
        p = controller_init(stack, env)
        assert p.returncode == 111, p.stdout
        assert f"{state}/log is on the pool's filesystem" in p.stdout, \
            p.stdout
        subprocess.run(["umount", pool], check=True)
    finally:
        pool = os.path.join(state, "pool")
        if os.path.ismount(pool):
            subprocess.run(["umount", "-l", pool], check=False)
        if mounted:
            subprocess.run(["umount", "-l", mnt], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
