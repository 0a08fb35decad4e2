"""The warm pool: the controller keeps standby sandboxes booted per
template and driver; a create claims one and gives it the sandbox's
identity (id, hostname, limits); the pool refills; a dead standby is
cleaned up. Standby sockets are run/pool/<template>.<driver>.<slot>.sock."""
import os
import signal
import subprocess
import time

import pytest

from conftest import (VM_MEMORY_MB, Sandboxes, descendants, exec_json,
                      is_qemu, listener_pid, pid_alive, usable_drivers)

# AIRLOCK_WARM_POOL (ns) and AIRLOCK_WARM_POOL_VM (vm) defaults.
POOL_SIZE = {"ns": 2, "vm": 2}
# A vm standby is a QEMU waiting for its snapshot: under TCG it takes
# longer to appear than a jail.
REFILL_S = {"ns": 30, "vm": 60}


def standbys(stack, driver):
    d = os.path.join(stack.state, "run", "pool")
    prefix = f"minimal.{driver}."
    try:
        return sorted(n for n in os.listdir(d) if n.startswith(prefix)
                      and n.endswith(".sock"))
    except FileNotFoundError:
        return []


def slot_of(name, driver):
    return name[len(f"minimal.{driver}."):-len(".sock")]


def wait_pool(stack, driver, n=None, seconds=None):
    n = POOL_SIZE[driver] if n is None else n
    deadline = time.monotonic() + (seconds or REFILL_S[driver])
    while time.monotonic() < deadline:
        if len(standbys(stack, driver)) >= n:
            return True
        time.sleep(0.2)
    return False


def shim_log(stack):
    with open(os.path.join(stack.state, "log", "shim.log")) as f:
        return f.read()


def cgroup_value(sid, v1_ctrl, v1_file, v2_file):
    v2 = f"/sys/fs/cgroup/airlock/{sid}/{v2_file}"
    v1 = f"/sys/fs/cgroup/{v1_ctrl}/airlock/{sid}/{v1_file}"
    path = v2 if os.path.exists(v2) else v1
    with open(path) as f:
        return f.read().strip()


def test_pool_is_filled_and_refills(stack, sandboxes, driver):
    n = POOL_SIZE[driver]
    assert wait_pool(stack, driver), standbys(stack, driver)
    before = set(standbys(stack, driver))
    made = [sandboxes.create() for _ in range(n)]
    assert len(made) == n
    # Claimed standbys leave the pool at once ...
    assert not before & set(standbys(stack, driver)), \
        (before, standbys(stack, driver))
    # ... and the controller boots new ones.
    assert wait_pool(stack, driver), standbys(stack, driver)
    assert set(standbys(stack, driver)) != before
    # The pool of the other driver is not drawn from.
    for sb in made:
        assert sb["driver"] == driver


def test_claimed_sandbox_has_its_own_identity_and_limits(stack, api,
                                                         sandboxes, driver):
    assert wait_pool(stack, driver)
    # A standby runs its template's START before any claim: capped at
    # AIRLOCK_DEFAULT_CPUS (1) meanwhile.
    slot = slot_of(standbys(stack, driver)[0], driver)
    assert cgroup_value(slot, "cpu", "cpu.cfs_quota_us", "cpu.max") in (
        "100000", "100000 100000")
    if driver == "ns":
        sb = sandboxes.create(pids=77, memory_mb=200, cpus=0.25,
                              env={"WHO": "claimed"})
    else:
        # vm guest RAM is fixed (the snapshot's); the rest is the same.
        sb = sandboxes.create(cpus=0.25, env={"WHO": "claimed"})
    sid = sb["id"]
    # The CPU cap of the request, not the standby's default (1 CPU), on
    # the jail's or QEMU's cgroup.
    assert sb["cpus"] == 0.25
    assert cgroup_value(sid, "cpu", "cpu.cfs_quota_us", "cpu.max") in (
        "25000", "25000 100000")
    res = exec_json(api, sid, ["sh", "-c", "hostname; echo $WHO"])
    assert res["stdout"] == f"{sid}\nclaimed\n"
    if driver == "ns":
        # The limits of the request, not the standby's defaults, are in
        # force. (cgroup files exist only for the ns jail.)
        assert cgroup_value(sid, "pids", "pids.max", "pids.max") == "77"
        assert cgroup_value(sid, "memory", "memory.limit_in_bytes",
                            "memory.max") == str(200 << 20)
        # So are the shares of memory outside processes (core/host/memshare.h):
        # /dev/shm half of it, SysV shm a quarter, resized at the claim.
        res = exec_json(api, sid, ["sh", "-c",
                                   "grep ' /dev/shm ' /proc/mounts; "
                                   "cat /proc/sys/kernel/shmmax"])
        assert "size=102400k,nr_inodes=1600" in res["stdout"], res
        assert res["stdout"].endswith(f"\n{50 << 20}\n"), res
    else:
        # The guest kernel sees its own RAM: 256 MiB less what the kernel
        # keeps for itself.
        assert sb["memory_mb"] == VM_MEMORY_MB
        kb = int(exec_json(api, sid, ["sh", "-c",
                                      "sed -n 's/^MemTotal: *\\([0-9]*\\).*/"
                                      "\\1/p' /proc/meminfo"])["stdout"])
        assert 180 << 10 <= kb <= VM_MEMORY_MB << 10, kb
    # Its root is its own: pool/sandboxes/<id>, no standby name left.
    assert os.path.isdir(os.path.join(stack.state, "pool", "sandboxes", sid))


def test_vm_standby_serves_only_its_shape(stack, api, info):
    """vm standbys are of the default shape (AIRLOCK_DEFAULT_CPUS 1: one
    vCPU, the snapshot's for good): a create of 2 CPUs claims none of
    them and runs on a machine of 2 vCPUs of its own; one of 1 CPU
    claims one."""
    if "vm" not in usable_drivers(info):
        pytest.skip(f"vm not usable here: {info!r}")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: no 2-vCPU vm")
    s = Sandboxes(api, "vm")
    try:
        assert wait_pool(stack, "vm"), standbys(stack, "vm")
        before = set(standbys(stack, "vm"))
        two = s.create(cpus=2)
        assert set(standbys(stack, "vm")) >= before, \
            (before, standbys(stack, "vm"))
        assert f"is now sandbox {two['id']}" not in shim_log(stack)
        res = exec_json(api, two["id"], ["sh", "-c", "nproc; hostname"])
        assert res["stdout"] == f"2\n{two['id']}\n"
        one = s.create(cpus=1)
        assert not before <= set(standbys(stack, "vm")), \
            (before, standbys(stack, "vm"))
        assert f"is now sandbox {one['id']}" in shim_log(stack)
        res = exec_json(api, one["id"], ["sh", "-c", "nproc; hostname"])
        assert res["stdout"] == f"1\n{one['id']}\n"
    finally:
        s.cleanup()


def test_standbys_are_not_listed(api, stack, driver):
    assert wait_pool(stack, driver)
    r = api.get(f"{api.base}/v1/sandboxes", timeout=(5, 60))
    assert r.status_code == 200
    ids = [s["id"] for s in r.json()["sandboxes"]]
    assert not [i for i in ids if i.startswith("standby-")], ids


def test_dead_standby_is_cleaned_up(stack, driver):
    assert wait_pool(stack, driver)
    victim = standbys(stack, driver)[0]
    slot = slot_of(victim, driver)
    pid = listener_pid(stack, os.path.join(stack.state, "run", "pool",
                                           victim))
    assert pid is not None, f"no shim serves {victim}"
    # A vm standby's QEMU must go with its shim.
    qemus = [p for p in descendants(pid) if is_qemu(p)]
    if driver == "vm":
        assert qemus, f"no QEMU under the shim of {victim}"
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    # Within a reconcile period its socket, rootfs and cgroups are gone and
    # the pool is full again.
    root = os.path.join(stack.state, "pool", "sandboxes", slot)
    deadline = time.monotonic() + 30 + REFILL_S[driver]
    while time.monotonic() < deadline:
        if victim not in standbys(stack, driver) \
                and not os.path.exists(root) \
                and len(standbys(stack, driver)) >= POOL_SIZE[driver]:
            break
        time.sleep(0.3)
    assert victim not in standbys(stack, driver)
    assert not os.path.exists(root)
    if driver == "ns":
        assert not os.path.exists(f"/sys/fs/cgroup/pids/airlock/{slot}")
        assert not os.path.exists(f"/sys/fs/cgroup/airlock/{slot}")
    assert not [p for p in qemus if pid_alive(p)], qemus
    assert len(standbys(stack, driver)) >= POOL_SIZE[driver]


def put_pool(api, name, **bounds):
    return api.put(f"{api.base}/v1/templates/{name}/warm_pool", json=bounds,
                   timeout=30)


def test_template_pool_bounds(stack, api, driver):
    """An admin sets a template's own standby bounds; the controller holds
    its pool to them (within its 5 s re-read), and null puts a bound back
    to the operator's default."""
    lo, hi = f"{driver}_min", f"{driver}_max"
    n = POOL_SIZE[driver] + 1
    assert wait_pool(stack, driver), standbys(stack, driver)
    try:
        r = put_pool(api, "minimal", **{lo: n, hi: n})
        assert r.status_code == 200, r.text
        pool = r.json()["warm_pool"]
        assert (pool[lo], pool[hi]) == (n, n)
        assert lo not in pool["defaults"] and hi not in pool["defaults"]
        got = api.get(f"{api.base}/v1/templates/minimal", timeout=30).json()
        assert got["warm_pool"] == pool
        assert wait_pool(stack, driver, n), standbys(stack, driver)
        # Down to one: the extras are retired, not left running.
        r = put_pool(api, "minimal", **{lo: 1, hi: 1})
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + REFILL_S[driver]
        while len(standbys(stack, driver)) > 1 and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(standbys(stack, driver)) == 1, standbys(stack, driver)
    finally:
        r = put_pool(api, "minimal", **{lo: None, hi: None})
    assert r.status_code == 200, r.text
    pool = r.json()["warm_pool"]
    assert lo in pool["defaults"] and hi in pool["defaults"]
    assert pool[lo] == POOL_SIZE[driver]
    assert wait_pool(stack, driver), standbys(stack, driver)


def test_template_pool_bad_bodies(api):
    for body, word in (({}, "at least one"), ({"ns_min": -1}, "ns_min"),
                       ({"vm_max": 65}, "vm_max"), ({"ns_min": "2"}, "ns_min"),
                       ({"size": 2}, "unknown field")):
        r = put_pool(api, "minimal", **body)
        assert r.status_code == 400, (body, r.text)
        assert word in r.json()["error"]["message"], (body, r.text)
    r = api.put(f"{api.base}/v1/templates/minimal/warm_pool", data=b"{",
                timeout=30)
    assert r.status_code == 400, r.text
    r = put_pool(api, "no-such-template", ns_min=1)
    assert r.status_code == 404, r.text


def subvol_uuid(path):
    out = subprocess.run(["btrfs", "subvolume", "show", path],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True).stdout
    for line in out.splitlines():
        k, _, v = line.strip().partition(":")
        if k == "UUID":
            return v.strip()
    raise AssertionError(out)


def spares(stack, template="minimal"):
    d = os.path.join(stack.state, "pool", "spares")
    try:
        return {n: os.path.join(d, n) for n in os.listdir(d)
                if n.startswith(template + ".")}
    except FileNotFoundError:
        return {}


def test_starts_take_spare_snapshots(stack, api):
    """The controller keeps snapshots of the template made ahead (at
    least 32), and a start takes one instead of snapshotting: the new
    sandboxes' root subvolumes are former spares, and the controller
    makes new ones."""
    deadline = time.monotonic() + 60
    while len(spares(stack)) < 32:
        assert time.monotonic() < deadline, len(spares(stack))
        time.sleep(0.5)
    before = {subvol_uuid(p) for p in spares(stack).values()}
    # More than the warm pool holds: some are cold starts.
    sbs = Sandboxes(api, "ns")
    try:
        made = [sbs.create() for _ in range(POOL_SIZE["ns"] + 3)]
        roots = [os.path.join(stack.state, "pool", "sandboxes", sb["id"])
                 for sb in made]
        # The first cold start at least took one of those (none is made
        # while starts take them).
        taken = [r for r in roots if subvol_uuid(r) in before]
        assert taken, roots
        for sb in made:
            assert exec_json(api, sb["id"], ["true"])["exit_code"] == 0
        # Taken spares are replaced.
        deadline = time.monotonic() + 30
        while len(spares(stack)) < 32:
            assert time.monotonic() < deadline, len(spares(stack))
            time.sleep(0.5)
    finally:
        sbs.cleanup()
