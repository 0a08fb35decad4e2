"""The warm pool: the controller keeps standby sandboxes booted per
template; a create claims one and gives it the sandbox's identity (id,
hostname, limits); the pool refills; a dead standby is cleaned up."""
import os
import signal
import time

from conftest import exec_json, pid_alive

POOL_SIZE = 2  # AIRLOCK_WARM_POOL default


def standbys(stack):
    d = os.path.join(stack.state, "run", "pool")
    try:
        return sorted(n for n in os.listdir(d) if n.startswith("minimal.")
                      and n.endswith(".sock"))
    except FileNotFoundError:
        return []


def wait_pool(stack, n, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if len(standbys(stack)) >= n:
            return True
        time.sleep(0.2)
    return False


def cgroup_value(sid, v1_ctrl, v1_file, v2_file):
    v2 = f"/sys/fs/cgroup/airlock/{sid}/{v2_file}"
    v1 = f"/sys/fs/cgroup/{v1_ctrl}/airlock/{sid}/{v1_file}"
    path = v2 if os.path.exists(v2) else v1
    with open(path) as f:
        return f.read().strip()


def test_pool_is_filled_and_refills(stack, sandboxes):
    assert wait_pool(stack, POOL_SIZE), standbys(stack)
    before = set(standbys(stack))
    made = [sandboxes.create() for _ in range(POOL_SIZE)]
    assert len(made) == POOL_SIZE
    # Claimed standbys leave the pool at once ...
    assert not before & set(standbys(stack)), (before, standbys(stack))
    # ... and the controller boots new ones.
    assert wait_pool(stack, POOL_SIZE), standbys(stack)
    assert set(standbys(stack)) != before


def test_claimed_sandbox_has_its_own_identity_and_limits(stack, api,
                                                         sandboxes):
    assert wait_pool(stack, POOL_SIZE)
    sb = sandboxes.create(pids=77, memory_mb=200, env={"WHO": "claimed"})
    sid = sb["id"]
    res = exec_json(api, sid, ["sh", "-c", "hostname; echo $WHO"])
    assert res["stdout"] == f"{sid}\nclaimed\n"
    # The limits of the request, not the standby's defaults, are in force.
    assert cgroup_value(sid, "pids", "pids.max", "pids.max") == "77"
    assert cgroup_value(sid, "memory", "memory.limit_in_bytes",
                        "memory.max") == str(200 << 20)
    # Its root is its own: pool/sandboxes/<id>, no standby name left.
    assert os.path.isdir(os.path.join(stack.state, "pool", "sandboxes", sid))


def test_standbys_are_not_listed(api, stack):
    assert wait_pool(stack, POOL_SIZE)
    r = api.get(f"{api.base}/v1/sandboxes", timeout=(5, 60))
    assert r.status_code == 200
    ids = [s["id"] for s in r.json()["sandboxes"]]
    assert not [i for i in ids if i.startswith("standby-")], ids


def listener_pid(stack, path):
    """The airlock-shim listening on unix socket path (via the socket's
    inode in /proc/net/unix and the shims' fd tables)."""
    inode = None
    with open("/proc/net/unix") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 8 and parts[7] == path:
                inode = parts[6]
    assert inode is not None, f"{path} is not a listening socket"
    for pid in stack.pids("airlock-shim"):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return pid
        except OSError:
            continue
    return None


def test_dead_standby_is_cleaned_up(stack):
    assert wait_pool(stack, POOL_SIZE)
    victim = standbys(stack)[0]
    slot = victim[len("minimal."):-len(".sock")]
    pid = listener_pid(stack, os.path.join(stack.state, "run", "pool", victim))
    assert pid is not None, f"no shim serves {victim}"
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    # Within a reconcile period its socket, rootfs and cgroups are gone and
    # the pool is full again.
    root = os.path.join(stack.state, "pool", "sandboxes", slot)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if victim not in standbys(stack) and not os.path.exists(root) \
                and len(standbys(stack)) >= POOL_SIZE:
            break
        time.sleep(0.3)
    assert victim not in standbys(stack)
    assert not os.path.exists(root)
    assert not os.path.exists(f"/sys/fs/cgroup/pids/airlock/{slot}")
    assert not os.path.exists(f"/sys/fs/cgroup/airlock/{slot}")
    assert len(standbys(stack)) >= POOL_SIZE
