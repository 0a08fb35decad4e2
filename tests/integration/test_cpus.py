"""A sandbox's CPU cap ("cpus"): what a create may ask, what the API
shows, the CFS quota on the sandbox's cgroup and the operator's bounds.
The cap holding against a CPU hog is tests/redteam/test_cpu.py's; the
project quota on the sum is test_tenancy.py's."""
import os

import pytest

from conftest import (TIMEOUT, Sandboxes, assert_error,
                      assert_refused_at_start, usable_drivers)


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


def test_cpus_past_the_hosts_maximum(api):
    """AIRLOCK_MAX_CPUS defaults to the host's CPUs: one more is 400
    naming the setting."""
    n = host_cpus()
    r = api.post(f"{api.base}/v1/sandboxes",
                 json={"template": "minimal", "driver": "ns",
                       "cpus": n + 1}, timeout=TIMEOUT)
    e = assert_error(r, 400, "invalid_request")
    assert e["message"] == (f"'cpus' is at most {n} on this host "
                            f"(AIRLOCK_MAX_CPUS)")


def test_vm_cpus_at_most_its_vcpus(api, info):
    """A vm is restored from its template's snapshot, one vCPU: more
    than 1 CPU is 400 naming it, whether or not vm runs here."""
    if host_cpus() < 2:
        pytest.skip("one CPU: 2 is past AIRLOCK_MAX_CPUS first")
    r = api.post(f"{api.base}/v1/sandboxes",
                 json={"template": "minimal", "driver": "vm", "cpus": 2},
                 timeout=TIMEOUT)
    e = assert_error(r, 400, "invalid_request")
    assert e["message"] == ("'cpus' of a vm sandbox is at most 1, the vCPU "
                            "count of the template's VM snapshot")
    if "vm" not in usable_drivers(info):
        pytest.skip(f"vm not usable here for the capped create: {info!r}")
    s = Sandboxes(api, "vm")
    try:
        sb = s.create(cpus=0.5)
        assert sb["cpus"] == 0.5
        # QEMU's cgroup: the guest's vCPU and the emulator together.
        assert cfs_quota(sb["id"]) == 50000
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
