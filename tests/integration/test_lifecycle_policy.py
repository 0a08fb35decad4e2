"""policies/lifecycle.lua (issue 25): idle suspend, rolling snapshots and
their retention, driven by the controller with a test policy whose delays
are seconds (read from each sandbox's metadata), never hours; activity
(an API call) postpones the idle action; a policy that fails to load
keeps the last good one, and one that fails for a sandbox does nothing
to it."""
import os
import shutil
import time

import pytest

from conftest import (REPO, TIMEOUT, Sandboxes, api_session, exec_json,
                      running_stack)

# Delays from the sandbox's metadata; without them nothing happens.
POLICY = """
function lifecycle(sb)
  local m = sb.metadata
  if m.boom then error("boom for " .. sb.id) end
  local t = { idle = { action = "none" },
              snapshots = { every = 0, keep = 0 } }
  if m.idle_after then
    t.idle = { after = tonumber(m.idle_after),
               action = m.idle_action or "suspend" }
  end
  if m.every then
    t.snapshots = { every = tonumber(m.every),
                    keep = tonumber(m.keep or "0") }
  end
  if m.bad then
    t.snapshots = { every = "often", keep = -1 }
  end
  return t
end
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    d = tmp_path_factory.mktemp("policies")
    for name in ("egress.lua", "credentials.lua"):
        shutil.copy(os.path.join(REPO, "policies", name), d / name)
    (d / "lifecycle.lua").write_text(POLICY)
    yield from running_stack(env={"AIRLOCK_POLICIES": str(d),
                                  "AIRLOCK_DRIVERS": "ns",
                                  "AIRLOCK_WARM_POOL": "0",
                                  "AIRLOCK_WARM_POOL_VM": "0"},
                             prefix="airlock-lcpol-")


@pytest.fixture(scope="module")
def api(stack):
    return api_session(stack)


@pytest.fixture
def sandboxes(api):
    """ns only: the policy's idle suspend of an ns sandbox is the one
    that keeps files only; the vm captures are test_suspend's."""
    s = Sandboxes(api, "ns")
    yield s
    s.cleanup()


def create(api, sandboxes, **metadata):
    return sandboxes.create(metadata={k: str(v) for k, v in metadata.items()})


def get(api, sid):
    r = api.get(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


def snapshots(api, sid):
    r = api.get(f"{api.base}/v1/sandboxes/{sid}/snapshots", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["snapshots"]


def wait(pred, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"not within {seconds} s: {what}")


def lifecycle_status(api):
    r = api.get(f"{api.base}/v1/info", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["policies"].get("lifecycle")


def test_idle_ns_sandbox_is_suspended_with_its_files_and_activity_postpones_it(
        api, sandboxes):
    idle = create(api, sandboxes, idle_after=4)["id"]
    busy = create(api, sandboxes, idle_after=4)["id"]
    exec_json(api, idle, ["sh", "-c", "echo kept > /root/mark; sync"])
    t0 = time.monotonic()
    # busy gets an exec every second for 12 s: three times its delay.
    while time.monotonic() - t0 < 12:
        exec_json(api, busy, ["true"])
        assert get(api, busy)["state"] == "running"
        time.sleep(1)
    wait(lambda: get(api, idle)["state"] == "suspended", 20,
         "the idle sandbox suspended")
    sb = get(api, busy)
    assert sb["state"] == "running", sb
    snaps = snapshots(api, idle)
    assert [s["kind"] for s in snaps] == ["suspend"], snaps
    # ns: the files only, and recorded as such.
    assert snaps[0]["memory"] is False and snaps[0]["status"] == "ready"
    # Left alone, busy goes the same way.
    wait(lambda: get(api, busy)["state"] == "suspended", 30,
         "the busy sandbox suspended once left alone")
    # A resume brings the files back (and is activity).
    r = api.post(f"{api.base}/v1/sandboxes/{idle}/resume", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert exec_json(api, idle, ["cat", "/root/mark"])["stdout"] == "kept\n"


def test_an_open_stream_is_activity(api, sandboxes):
    sid = create(api, sandboxes, idle_after=3)["id"]
    # A command that prints for 14 s through an open event stream, and
    # no API call meanwhile.
    r = api.post(f"{api.base}/v1/sandboxes/{sid}/exec",
                 json={"cmd": ["sh", "-c",
                               "for i in $(seq 14); do echo $i; sleep 1;"
                               " done"]},
                 headers={"Accept": "text/event-stream"}, stream=True,
                 timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    t0 = time.monotonic()
    got = b""
    for chunk in r.iter_content(chunk_size=None):
        got += chunk
        if time.monotonic() - t0 > 10:
            break
    # Three times its idle delay with the stream open: still running.
    assert b"data" in got, got
    assert get(api, sid)["state"] == "running"
    r.close()
    # The stream over, it goes idle.
    wait(lambda: get(api, sid)["state"] == "suspended", 40,
         "suspended once its stream ended")


def test_idle_delete_and_none(api, sandboxes):
    gone = create(api, sandboxes, idle_after=2, idle_action="delete")["id"]
    kept = create(api, sandboxes, idle_after=2, idle_action="none")["id"]
    wait(lambda: api.get(f"{api.base}/v1/sandboxes/{gone}",
                         timeout=TIMEOUT).status_code == 404, 20,
         "the idle sandbox deleted")
    assert get(api, kept)["state"] == "running"


def test_rolling_snapshots_are_taken_and_pruned_named_ones_stay(
        api, sandboxes):
    sid = create(api, sandboxes, every=3, keep=9)["id"]
    r = api.post(f"{api.base}/v1/sandboxes/{sid}/snapshots",
                 json={"name": "mine"}, timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    named = r.json()["id"]
    first = wait(lambda: [s["id"] for s in snapshots(api, sid)
                          if s["kind"] == "rolling"], 20,
                 "a first rolling snapshot")[0]
    seen = set()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 25:
        snaps = snapshots(api, sid)
        seen |= {s["id"] for s in snaps if s["kind"] == "rolling"}
        time.sleep(0.5)
    snaps = snapshots(api, sid)
    rolling = [s for s in snaps if s["kind"] == "rolling"]
    print(f"\nrolling snapshots taken in 25 s: {len(seen)}, "
          f"kept at the end: {len(rolling)}")
    # On cadence (every 3 s, a sweep every 2 s): several, not one.
    assert len(seen) >= 4, seen
    # Pruned past 9 s: the first is gone, and only the recent stay.
    assert first not in {s["id"] for s in snaps}, snaps
    assert 1 <= len(rolling) <= 5, rolling
    assert named in {s["id"] for s in snaps if s["kind"] == "named"}, snaps
    r = api.get(f"{api.base}/v1/snapshots/{first}", timeout=TIMEOUT)
    assert r.status_code == 404, r.text


def test_suspended_sandbox_keeps_the_snapshot_it_resumes_from(
        api, sandboxes):
    sid = create(api, sandboxes, idle_after=7, every=2, keep=3)["id"]
    wait(lambda: get(api, sid)["state"] == "suspended", 30, "suspended")
    # Its rolling snapshots go after 3 s; the suspend one stays.
    wait(lambda: [s["kind"] for s in snapshots(api, sid)] == ["suspend"],
         20, "only the snapshot it resumes from left")
    time.sleep(4)
    assert [s["kind"] for s in snapshots(api, sid)] == ["suspend"]
    r = api.post(f"{api.base}/v1/sandboxes/{sid}/resume", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert exec_json(api, sid, ["true"])["exit_code"] == 0


def test_bad_values_get_defaults_and_a_throwing_policy_does_nothing(
        api, sandboxes):
    # every "often", keep -1: logged, the defaults (hourly) apply: no
    # rolling snapshot within seconds.
    bad = create(api, sandboxes, bad=1)["id"]
    # The policy throws for this one: nothing is done to it.
    boom = create(api, sandboxes, boom=1, idle_after=1)["id"]
    time.sleep(8)
    assert snapshots(api, bad) == []
    assert get(api, boom)["state"] == "running"
    st = lifecycle_status(api)
    assert st["loaded"] is True and st["reload_error"] is None, st


def test_a_broken_policy_keeps_the_last_good_one(stack, api, sandboxes):
    path = os.path.join(stack.env["AIRLOCK_POLICIES"], "lifecycle.lua")
    good = open(path).read()
    try:
        last = None
        for broken in ("function lifecycle(sb) return {\n",
                       "error('thrown at load')\n",
                       "function lifecycle(sb) return 42 end\n"):
            with open(path, "w") as f:
                f.write(broken)
            st = wait(lambda: (lambda s: s if s and s["reload_error"] and
                               s["reload_error"] != last else None)(
                                   lifecycle_status(api)), 15,
                      f"the reload of {broken!r} refused")
            last = st["reload_error"]
            assert st["loaded"] is True, st
            assert "lifecycle.lua" in st["reload_error"] or \
                "lifecycle()" in st["reload_error"], st
            print(f"\nrefused: {st['reload_error']!r}")
        # The last good policy still decides: idle after 3 s.
        sid = create(api, sandboxes, idle_after=3)["id"]
        wait(lambda: get(api, sid)["state"] == "suspended", 30,
             "suspended by the last good policy")
    finally:
        with open(path, "w") as f:
            f.write(good)
        os.utime(path, (time.time() + 5, time.time() + 5))
    wait(lambda: (lambda s: s and s["reload_error"] is None)(
        lifecycle_status(api)), 15, "the good policy back")
