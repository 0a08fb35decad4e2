"""Disk limits an operator sets through the environment, on a stack of
this module's own: AIRLOCK_MAX_DISK_MB (which also lowers the default and
caps every template build step) and AIRLOCK_POOL_FULL_PCT."""
import pytest
import requests

from conftest import TIMEOUT, Sandboxes, assert_error, running_stack
from test_templates import build, submit

MAX_MB = 64


@pytest.fixture(scope="module")
def small():
    env = {"AIRLOCK_MAX_DISK_MB": str(MAX_MB), "AIRLOCK_POOL_SIZE": "2G",
           "AIRLOCK_WARM_POOL": "1", "AIRLOCK_WARM_POOL_VM": "0"}
    for st in running_stack(env, prefix="airlock-it-disk-"):
        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {st.key}"
        s.base = st.base
        st.api = s
        yield st


def test_the_maximum_lowers_the_default(small):
    api = small.api
    s = Sandboxes(api, "ns")
    try:
        assert s.create()["disk_mb"] == MAX_MB
    finally:
        s.cleanup()
    r = api.post(f"{api.base}/v1/sandboxes",
                 json={"driver": "ns", "disk_mb": MAX_MB + 1},
                 timeout=TIMEOUT)
    e = assert_error(r, 400, "invalid_request")
    assert f"at most {MAX_MB}" in e["message"], e


def test_a_build_step_is_capped_too(small):
    api = small.api
    fill = ('FROM minimal\n'
            'RUN ["sh", "-c", "dd if=/dev/zero of=/fill bs=1048576 '
            'count=100 conv=fsync"]\n')
    _, events = build(api, "diskhog", fill)
    assert events[-1].data["status"] == "failed", events[-1]
    text = " ".join(e.raw for e in events)
    assert "Disk quota exceeded" in text, text
    # Under the cap a build goes through.
    ok = ('FROM minimal\n'
          'RUN ["sh", "-c", "dd if=/dev/zero of=/fill bs=1048576 '
          'count=16 conv=fsync"]\n')
    _, events = build(api, "diskok", ok)
    assert events[-1].data["status"] == "succeeded", events


def test_threshold_from_the_environment(small):
    """AIRLOCK_POOL_FULL_PCT=1: any pool is "full"; creates and builds
    are 507, a running sandbox keeps working."""
    api = small.api
    s = Sandboxes(api, "ns")
    try:
        sid = s.create()["id"]
        small.env["AIRLOCK_POOL_FULL_PCT"] = "1"
        small.sh("restart", "fcgi")
        r = api.post(f"{api.base}/v1/sandboxes", json={"driver": "ns"},
                     timeout=TIMEOUT)
        e = assert_error(r, 507, "insufficient_storage")
        assert "at 1 %" in e["message"], e
        assert_error(submit(api, "blocked", "FROM minimal\n"), 507,
                     "insufficient_storage")
        r = api.post(f"{api.base}/v1/sandboxes/{sid}/exec",
                     json={"cmd": ["sh", "-c", "echo w > /w && cat /w"]},
                     headers={"Accept": "application/json"},
                     timeout=TIMEOUT)
        assert r.status_code == 200 and r.json()["stdout"] == "w\n", r.text
    finally:
        small.env.pop("AIRLOCK_POOL_FULL_PCT", None)
        small.sh("restart", "fcgi")
        s.cleanup()
