"""A sandbox's CPU cap ("cpus"): what a create may ask, what the API
shows, the CFS quota on the sandbox's cgroup, a vm's vCPUs (its cpus
rounded up, core/vm/shape.h) and the operator's bounds.
The cap holding against a CPU hog is tests/redteam/test_cpu.py's; the
project quota on the sum is test_tenancy.py's."""
import os
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import (TIMEOUT, VM_MEMORY_MB, Sandboxes, assert_error,
                      assert_refused_at_start, exec_json, usable_drivers)


def cfs_quota(sid):
    """The sandbox's CFS quota in µs per 100 ms period (-1: none)."""
    v2 = f"/sys/fs/cgroup/airlock/{sid}/cpu.max"
    if os.path.exists(v2):
        with open(v2) as f:
            quota, period = f.read().split()
        assert period == "100000"
        return -1 if quota == "max" else int(quota)
    base = f"/sys/fs/cgroup/cpu/airlock/{sid}"
    with open(f"{base}/cpu.cfs_period_us") as f:
        assert f.read().strip() == "100000"
    with open(f"{base}/cpu.cfs_quota_us") as f:
        return int(f.read())


def host_cpus():
    return len(os.sched_getaffinity(0))


@pytest.mark.parametrize("cpus,quota", [(0.5, 50000), (0.01, 1000),
                                        (1, 100000), (1.25, 125000)])
def test_cpus_is_the_cgroups_quota(api, info, cpus, quota):
    """Asked, shown as asked, and in force on the jail's cgroup."""
    if cpus > host_cpus():
        pytest.skip(f"this host has {host_cpus()} CPUs")
    s = Sandboxes(api, "ns")
    try:
        sb = s.create(cpus=cpus)
        assert sb["cpus"] == cpus
        assert type(sb["cpus"]) is type(cpus), sb
        got = api.get(f"{api.base}/v1/sandboxes/{sb['id']}",
                      timeout=TIMEOUT).json()
        assert got["cpus"] == cpus
        listed = api.get(f"{api.base}/v1/sandboxes", timeout=TIMEOUT).json()
        assert [x["cpus"] for x in listed["sandboxes"]
                if x["id"] == sb["id"]] == [cpus]
        assert cfs_quota(sb["id"]) == quota
    finally:
        s.cleanup()


def test_cpus_default_is_one(api):
    """A create naming no cpus gets AIRLOCK_DEFAULT_CPUS (1): capped all
    the same, never unlimited."""
    s = Sandboxes(api, "ns")
    try:
        sb = s.create()
        assert sb["cpus"] == 1
        assert cfs_quota(sb["id"]) == 100000
    finally:
        s.cleanup()


@pytest.mark.parametrize("cpus,part", [
    (0, "'cpus' must be between 0.01 and 1024"),
    (0.005, "'cpus'"),
    (-1, "'cpus'"),
    (0.0001, "'cpus'"),
    (1.0005, "3 decimals"),
    ("1", "'cpus' must be a number"),
    (True, "'cpus' must be a number"),
    ([1], "'cpus' must be a number"),
])
def test_bad_cpus(api, cpus, part):
    r = api.post(f"{api.base}/v1/sandboxes",
                 json={"template": "minimal", "driver": "ns", "cpus": cpus},
                 timeout=TIMEOUT)
    e = assert_error(r, 400, "invalid_request")
    assert part in e["message"], e


@pytest.mark.parametrize("drv,more", [("ns", 1), ("vm", 0.5)])
def test_cpus_past_the_hosts_maximum(api, drv, more):
    """AIRLOCK_MAX_CPUS defaults to the host's CPUs: past it is 400
    naming the setting, for a vm too (whether or not vm runs here): no
    vCPU count beyond the host's."""
    n = host_cpus()
    r = api.post(f"{api.base}/v1/sandboxes",
                 json={"template": "minimal", "driver": drv,
                       "cpus": n + more}, timeout=TIMEOUT)
    e = assert_error(r, 400, "invalid_request")
    assert e["message"] == (f"'cpus' is at most {n} on this host "
                            f"(AIRLOCK_MAX_CPUS)")


def need_vm(info, vcpus=1):
    if "vm" not in usable_drivers(info):
        pytest.skip(f"vm not usable here: {info!r}")
    if vcpus > host_cpus():
        pytest.skip(f"this host has {host_cpus()} CPUs, no {vcpus}-vCPU vm")


def nproc(api, sid):
    """The CPUs the sandbox's guest kernel runs on."""
    return int(exec_json(api, sid, ["nproc"])["stdout"])


def vmdir(stack, template="minimal"):
    """The template's VM directory (core/vm/snapshot.h's VMDIR)."""
    return os.readlink(os.path.join(stack.state, "pool", "templates",
                                    template, ".airlock-vm"))


def shapes_made(stack):
    """How many vCPU snapshots the stack's shims made (vm/shape.c)."""
    with open(os.path.join(stack.state, "log", "shim.log")) as f:
        return len(re.findall(r"-vCPU snapshot made in \d+ ms", f.read()))


@pytest.mark.parametrize("cpus,quota", [(0.5, 50000), (1, 100000),
                                        (None, 100000)])
def test_vm_of_one_vcpu_unchanged(api, info, cpus, quota):
    """Up to 1 CPU (and the default, AIRLOCK_DEFAULT_CPUS 1) a vm runs on
    the template's base snapshot, one vCPU; QEMU's cgroup (the guest's
    vCPU and the emulator together) holds the cap."""
    need_vm(info)
    s = Sandboxes(api, "vm")
    try:
        sb = s.create() if cpus is None else s.create(cpus=cpus)
        assert sb["cpus"] == (1 if cpus is None else cpus)
        assert nproc(api, sb["id"]) == 1
        assert cfs_quota(sb["id"]) == quota
    finally:
        s.cleanup()


@pytest.mark.parametrize("cpus,vcpus,quota", [(2, 2, 200000),
                                              (1.5, 2, 150000)])
def test_vm_vcpus_are_its_cpus_rounded_up(api, info, stack, cpus, vcpus,
                                          quota):
    """A vm of cpus=N runs on ceil(N) vCPUs, which its guest sees, while
    the CFS quota holds QEMU to N CPUs; the API shows cpus as asked. Its
    snapshot sits beside the template's base one."""
    need_vm(info, vcpus)
    s = Sandboxes(api, "vm")
    try:
        sb = s.create(cpus=cpus)
        assert sb["cpus"] == cpus
        got = api.get(f"{api.base}/v1/sandboxes/{sb['id']}",
                      timeout=TIMEOUT).json()
        assert got["cpus"] == cpus
        assert got["memory_mb"] == VM_MEMORY_MB
        assert nproc(api, sb["id"]) == vcpus
        assert cfs_quota(sb["id"]) == quota
        shape = os.path.join(vmdir(stack), f"vcpus-{vcpus}")
        assert sorted(os.listdir(shape)) == ["disk.ext4", "mem", "state"]
    finally:
        s.cleanup()


def test_vm_shape_made_once_for_concurrent_creates(api, info, stack):
    """Creates that all need a shape the template has no snapshot of:
    one makes it (booting the guest, seconds under TCG), the others wait
    for it and restore from it, or are told to come back (503 with
    Retry-After) when it takes longer than they wait; none fails
    otherwise, and the snapshot is made once."""
    need_vm(info, 2)
    shape = os.path.join(vmdir(stack), "vcpus-2")
    shutil.rmtree(shape, ignore_errors=True)
    made = shapes_made(stack)
    s = Sandboxes(api, "vm")

    def create(_):
        t0 = time.monotonic()
        r = api.post(f"{api.base}/v1/sandboxes",
                     json=s.body(cpus=2), timeout=TIMEOUT)
        return r, time.monotonic() - t0

    try:
        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(create, range(3)))
        ok = []
        for r, secs in answers:
            if r.status_code == 201:
                s.ids.append(r.json()["id"])
                ok.append(r.json()["id"])
                continue
            e = assert_error(r, 503, "unavailable")
            assert r.headers.get("Retry-After", "").isdigit(), r.headers
            assert ("2-vCPU VM snapshot is being made for another create"
                    in e["message"]), e
        assert ok, [(r.status_code, r.text) for r, _ in answers]
        assert shapes_made(stack) == made + 1
        for sid in ok:
            assert nproc(api, sid) == 2
        print("2-vCPU creates at once, the shape missing: " + ", ".join(
            f"{r.status_code} in {secs:.1f} s" for r, secs in answers))
    finally:
        s.cleanup()


@pytest.mark.parametrize("env,says", [
    ({"AIRLOCK_MAX_CPUS": str(host_cpus() + 1)},
     f"AIRLOCK_MAX_CPUS={host_cpus() + 1} is more than the {host_cpus()} "
     "CPUs of this host"),
    ({"AIRLOCK_DEFAULT_CPUS": "0.5", "AIRLOCK_MAX_CPUS": "0.25"},
     "AIRLOCK_DEFAULT_CPUS (0.5) is more than AIRLOCK_MAX_CPUS (0.25)"),
    ({"AIRLOCK_DEFAULT_CPUS": "half"}, "AIRLOCK_DEFAULT_CPUS must be a "
     "number of CPUs"),
    ({"AIRLOCK_QUOTA_CPUS": "-2"}, "AIRLOCK_QUOTA_CPUS must be a number"),
])
def test_settings_that_cannot_work_stop_the_programs(stack, tmp_path, env,
                                                     says):
    """A CPU setting that cannot work stops the programs at start, naming
    it, rather than failing creates one by one."""
    assert_refused_at_start(stack, tmp_path, env, says)
