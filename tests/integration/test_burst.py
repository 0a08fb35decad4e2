"""Bursts end clean: many creates from many clients (ns driver) each get
201, or a clean 429/503 with Retry-After and the error envelope when a
quota or capacity is reached; once everything created is deleted, nothing
is left of the burst: no rows in error, no subvolume, cgroup leaf,
socket or shim process without a live sandbox.

And the warm pool follows the create rate: after a burst it holds more
than its minimum, and back at the minimum once the burst has left the
rate window.

AIRLOCK_TEST_BURST (default 200) creates from AIRLOCK_TEST_BURST_CLIENTS
(default 32) threads."""
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import running_stack

BURST = int(os.environ.get("AIRLOCK_TEST_BURST", "200"))
CLIENTS = int(os.environ.get("AIRLOCK_TEST_BURST_CLIENTS", "32"))
# The project may run fewer sandboxes than the burst asks for, so part of
# the burst is refused by the quota.
QUOTA = max(1, BURST // 5)
# The capacity leg runs PostgreSQL with this few connections: fcgi (4
# workers of 16 threads, a connection each once used) runs out of them in
# the burst. Shims hold none, whatever the sandbox count.
PG_CONNECTIONS = 12
POOL_MIN, POOL_MAX, WINDOW_S = 1, 6, 6
CG_CTRLS = ("pids", "memory", "cpu", "freezer")


@pytest.fixture(scope="module")
def bstack():
    yield from running_stack(env={
        "AIRLOCK_DRIVERS": "ns", "AIRLOCK_DEFAULT_DRIVER": "ns",
        "AIRLOCK_WARM_POOL": str(POOL_MIN),
        "AIRLOCK_WARM_POOL_MAX": str(POOL_MAX),
        "AIRLOCK_WARM_POOL_WINDOW": str(WINDOW_S),
        "AIRLOCK_WARM_POOL_VM": "0",
    }, prefix="airlock-burst-")


def restart_pg(st, max_connections=None):
    """PostgreSQL again, with max_connections (None: the default); the
    daemons reconnect on their own."""
    st.sh("stop", "pg")
    if max_connections is None:
        st.env.pop("AIRLOCK_PG_MAX_CONNECTIONS", None)
    else:
        st.env["AIRLOCK_PG_MAX_CONNECTIONS"] = str(max_connections)
    st.sh("start", "pg")


def session(st):
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {st.key}"
    return s


def listdir(path):
    try:
        return set(os.listdir(path))
    except FileNotFoundError:
        return set()


def standby_slots(st):
    return {n.split(".")[2] for n in listdir(f"{st.state}/run/pool")
            if n.endswith(".sock")}


def get(api, url, **kw):
    """GET, asking again while the API is out of database connections
    (the capacity test holds them all)."""
    for _ in range(50):
        r = api.get(url, timeout=60, **kw)
        if r.status_code != 503:
            break
        time.sleep(0.2)
    assert r.status_code == 200, r.text
    return r


def census(st, api):
    """What this stack holds, by kind. Cgroup leaves are shared with
    every stack on the host, so only those named by one of this stack's
    sandboxes (any state) or standbys count."""
    rows = {}
    for state in ("creating", "running", "paused", "suspended", "error",
                  "deleted"):
        r = get(api, f"{st.base}/v1/sandboxes", params={"state": state})
        rows.update((sb["id"], state) for sb in r.json()["sandboxes"])
    by_state = {}
    for state in rows.values():
        by_state[state] = by_state.get(state, 0) + 1
    live = {i for i, s in rows.items() if s in ("creating", "running",
                                                "paused")}
    ours = set(rows) | standby_slots(st)
    leaves = {}
    for c in CG_CTRLS:
        for name in listdir(f"/sys/fs/cgroup/{c}/airlock") & ours:
            leaves.setdefault(name, set()).add(c)
    return {
        "api": by_state,
        "rows": rows,
        "live": live,
        "errors": sorted(i for i, s in rows.items() if s == "error"),
        "subvolumes": listdir(f"{st.state}/pool/sandboxes"),
        "leaves": set(leaves),
        "sockets": {n[:-5] for n in listdir(f"{st.state}/run/sbx")
                    if n.endswith(".sock")},
        "standbys": standby_slots(st),
        "shims": len(st.pids("airlock-shim")),
    }


def settle(st, api, want, seconds=60):
    """The census once it matches want (the standbys refilled, the shims
    of deleted sandboxes exited), else the last one."""
    deadline = time.monotonic() + seconds
    while True:
        c = census(st, api)
        if want(c) or time.monotonic() > deadline:
            return c
        time.sleep(0.5)


def burst(st, n, clients, body):
    local = threading.local()

    def one(_):
        if not hasattr(local, "s"):
            local.s = session(st)
        t0 = time.monotonic()
        try:
            r = local.s.post(f"{st.base}/v1/sandboxes", json=body,
                             timeout=120)
        except requests.RequestException as e:
            return ("exception", str(e), None, time.monotonic() - t0)
        return (r.status_code, r.text, r, time.monotonic() - t0)

    with ThreadPoolExecutor(max_workers=clients) as ex:
        return list(ex.map(one, range(n)))


def delete_all(st, ids):
    with ThreadPoolExecutor(max_workers=8) as ex:
        codes = list(ex.map(
            lambda i: requests.delete(
                f"{st.base}/v1/sandboxes/{i}", timeout=120,
                headers={"Authorization": f"Bearer {st.key}"}).status_code,
            ids))
    assert set(codes) <= {204}, codes


def check_answers(results):
    created, refused = [], []
    for status, text, r, _ in results:
        if status == 201:
            created.append(r.json()["id"])
            continue
        assert status in (429, 503), f"{status}: {text}"
        assert r.headers.get("Retry-After", "").isdigit(), \
            (status, dict(r.headers), text)
        err = r.json()["error"]
        assert err["code"] and err["message"], text
        refused.append((status, err["message"]))
    return created, refused


def idle(c):
    return not c["live"] and len(c["standbys"]) >= POOL_MIN and \
        c["shims"] == len(c["standbys"])


def burst_ends_clean(st, api, most, limit=None, unlimit=None):
    """A burst with at most `most` creates let through; returns the
    refusals. limit() runs just before the burst, unlimit() just after
    it (before anything is counted)."""
    before = settle(st, api, idle)
    assert idle(before), before

    if limit is not None:
        limit()
    t0 = time.monotonic()
    try:
        results = burst(st, BURST, CLIENTS, {"template": "minimal"})
    finally:
        if unlimit is not None:
            unlimit()
    took = time.monotonic() - t0
    created, refused = check_answers(results)
    print(f"burst of {BURST} from {CLIENTS}: {len(created)} created, "
          f"{len(refused)} refused in {took:.1f}s")
    assert 0 < len(created) <= most, (len(created), refused[:5])
    assert len(created) + len(refused) == BURST

    during = census(st, api)
    # Every refusal left nothing: the live rows are exactly the created
    # sandboxes, each with its subvolume, cgroup leaf and socket.
    assert during["live"] == set(created)
    assert not during["errors"], during["errors"][:5]
    for i in created:
        assert i in during["subvolumes"] and i in during["leaves"] and \
            i in during["sockets"], i

    delete_all(st, created)
    after = settle(st, api, lambda c: idle(c) and
                   not c["subvolumes"] - c["standbys"] and
                   not c["leaves"] - c["standbys"] and not c["sockets"])
    assert after["api"].get("running", 0) == 0, after["api"]
    assert not after["errors"], after["errors"][:5]
    assert set(after["rows"].values()) <= {"deleted"}, after["rows"]
    assert after["live"] == before["live"] == set()
    # Standbys come and go (their slots differ); nothing else is left.
    assert after["subvolumes"] - after["standbys"] == \
        before["subvolumes"] - before["standbys"] == set()
    assert after["leaves"] - after["standbys"] == \
        before["leaves"] - before["standbys"] == set()
    assert after["sockets"] == before["sockets"]
    assert after["shims"] == len(after["standbys"])
    return refused


def test_burst_over_quota_ends_clean(bstack):
    st = bstack
    api = session(st)
    r = api.put(f"{st.base}/v1/projects/default/quota",
                json={"running_sandboxes": QUOTA}, timeout=60)
    assert r.status_code == 200, r.text
    try:
        refused = burst_ends_clean(st, api, QUOTA)
    finally:
        api.put(f"{st.base}/v1/projects/default/quota",
                json={"running_sandboxes": 1000}, timeout=60)
    assert {s for s, _ in refused} >= {429}, refused[:5]


def test_burst_over_capacity_ends_clean(bstack):
    """More concurrent creates than PostgreSQL has connections for fcgi's
    threads: those without one are refused (503, Retry-After) and leave
    nothing, the others create."""
    st = bstack
    api = session(st)
    refused = burst_ends_clean(
        st, api, BURST - 1,
        limit=lambda: restart_pg(st, PG_CONNECTIONS),
        unlimit=lambda: restart_pg(st))
    assert {s for s, _ in refused} >= {503}, refused[:5]
    assert any("PostgreSQL" in m for _, m in refused), refused[:5]


def test_warm_pool_follows_the_create_rate(bstack):
    st = bstack
    api = session(st)
    r = api.put(f"{st.base}/v1/projects/default/quota",
                json={"running_sandboxes": 1000}, timeout=60)
    assert r.status_code == 200, r.text
    # The earlier bursts out of the window: the pool at its minimum.
    deadline = time.monotonic() + WINDOW_S + 30
    while len(standby_slots(st)) != POOL_MIN and \
            time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(standby_slots(st)) == POOL_MIN

    created, _ = check_answers(burst(st, 3 * POOL_MAX, 4,
                                     {"template": "minimal"}))
    assert len(created) == 3 * POOL_MAX
    # Within the window the recent creates ask for more standbys than the
    # minimum (capped at the maximum).
    grown, deadline = 0, time.monotonic() + WINDOW_S
    while time.monotonic() < deadline:
        grown = max(grown, len(standby_slots(st)))
        if grown > POOL_MIN:
            break
        time.sleep(0.1)
    delete_all(st, created)
    assert POOL_MIN < grown <= POOL_MAX, grown
    # Idle past the window: the extras are retired.
    deadline = time.monotonic() + WINDOW_S + 20
    while len(standby_slots(st)) > POOL_MIN and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(standby_slots(st)) == POOL_MIN
    deadline = time.monotonic() + 20
    while len(st.pids("airlock-shim")) > POOL_MIN and \
            time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(st.pids("airlock-shim")) == POOL_MIN
