"""The shims hold no PostgreSQL connection, and no transition is lost when
PostgreSQL or the controller goes away while sandboxes change state.

A shim is told what to run by whoever starts it and reports ready to it
(fcgi records the sandbox running); the transitions it makes on its own
(its sandbox's init died, it was stopped, it was destroyed) go to the
spool in run/events, which the controller records in PostgreSQL and only
then removes. So while PostgreSQL is down, or the controller is, those
events wait on disk, and afterwards every row says what is true: a
sandbox is running exactly when its shim is, each end recorded once.

20 sandboxes of four fates each time: kept running, deleted through the
API, init killed (error), shim stopped by SIGTERM (deleted, by the shim's
own word only), expired (deleted by the controller), plus creates during
the outage (each 201, or a clean 503 that leaves nothing). And a start
whose worker died before recording it is not left running unseen."""
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import children, pid_alive, running_stack, shim_of

# One fcgi worker (16 threads, so at most 16 connections of its own): the
# connection count below is then bounded whatever the sandbox count.
FCGI_THREADS = 16


@pytest.fixture(scope="module")
def dstack():
    yield from running_stack(env={
        "AIRLOCK_DRIVERS": "ns", "AIRLOCK_DEFAULT_DRIVER": "ns",
        "AIRLOCK_WARM_POOL": "2", "AIRLOCK_WARM_POOL_VM": "0",
        "AIRLOCK_FCGI_WORKERS": "1",
    }, prefix="airlock-durable-")


def psql(st, query):
    p = subprocess.run(
        ["psql", "-h", f"{st.state}/run/pg", "-U", "airlock", "-d",
         "airlock", "-XtAq", "-F", "|", "-c", query],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=60)
    assert p.returncode == 0, p.stderr
    return [line.split("|") for line in p.stdout.splitlines() if line]


def rows(st, ids):
    got = dict(psql(st, "SELECT id, state FROM sandboxes WHERE id IN (%s)"
                    % ",".join(f"'{i}'" for i in ids)))
    return {i: got.get(i) for i in ids}


def ends(st, sid):
    """The event rows that ended sandbox sid: (event, to_state, detail)."""
    return [tuple(r) for r in psql(
        st, "SELECT event, to_state, coalesce(detail, '') FROM sandbox_events"
            f" WHERE sandbox_id = '{sid}' AND to_state IN ('error', 'deleted')"
            " ORDER BY id")]


def spooled(st):
    d = f"{st.state}/run/events"
    try:
        return sorted(n for n in os.listdir(d) if not n.startswith(".")
                      and n != "bad")
    except FileNotFoundError:
        return []


def session(st):
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {st.key}"
    return s


def create(st, n, **body):
    body.setdefault("template", "minimal")

    def one(_):
        r = session(st).post(f"{st.base}/v1/sandboxes", json=body,
                             timeout=120)
        assert r.status_code == 201, r.text
        return r.json()["id"]
    with ThreadPoolExecutor(max_workers=4) as ex:
        return list(ex.map(one, range(n)))


def kill_init(st, sid):
    shim = shim_of(st, sid)
    assert shim is not None, sid
    agents = [p for p in children(shim)
              if open(f"/proc/{p}/comm").read().strip() == "airlock-agent"]
    assert agents, f"no init under the shim of {sid}"
    for p in agents:
        os.kill(p, signal.SIGKILL)
    return shim


def wait_gone(pids, seconds=30):
    deadline = time.monotonic() + seconds
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(p) for p in pids), pids


def delete(st, sid):
    """DELETE, asked again while the API cannot reach PostgreSQL."""
    deadline = time.monotonic() + 60
    while True:
        r = session(st).delete(f"{st.base}/v1/sandboxes/{sid}", timeout=60)
        if r.status_code in (204, 404) or time.monotonic() > deadline:
            return r
        assert r.status_code == 503, r.text
        assert r.headers.get("Retry-After"), r.headers
        time.sleep(0.5)


def try_create(st):
    r = session(st).post(f"{st.base}/v1/sandboxes",
                         json={"template": "minimal"}, timeout=120)
    if r.status_code == 201:
        return r.json()["id"], None
    assert r.status_code == 503, r.text
    assert r.headers.get("Retry-After", "").isdigit(), r.headers
    assert r.json()["error"]["code"], r.text
    return None, r


def live_shims(st, ids):
    return {i for i in ids if shim_of(st, i) is not None}


def churn(st, outage_begin, outage_end, api_works_in_outage):
    """Twenty sandboxes change state across an outage; afterwards every
    row is true. Returns what was seen in the spool during the outage."""
    keep = create(st, 5)
    doomed = create(st, 5)
    failing = create(st, 4)
    stopped = create(st, 3)
    expiring = create(st, 3, timeout=3)
    everyone = keep + doomed + failing + stopped + expiring
    assert set(rows(st, everyone).values()) == {"running"}

    outage_begin()
    try:
        shims = [kill_init(st, i) for i in failing]
        for i in stopped:
            pid = shim_of(st, i)
            os.kill(pid, signal.SIGTERM)
            shims.append(pid)
        wait_gone(shims)
        # The shims ended on their own: their ends wait in the spool,
        # nobody has recorded them.
        during = spooled(st)
        for i in failing + stopped:
            assert [n for n in during if n.startswith(i + ".")], (i, during)
        made = []
        for _ in range(3):
            sid, _ = try_create(st)
            if sid is not None:
                made.append(sid)
        if api_works_in_outage:
            for i in doomed:
                assert delete(st, i).status_code == 204
        time.sleep(4)  # the expiring ones are past their time
    finally:
        outage_end()
    for i in doomed:
        assert delete(st, i).status_code in (204, 404)

    want = {**{i: "running" for i in keep + made},
            **{i: "deleted" for i in doomed + stopped + expiring},
            **{i: "error" for i in failing}}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = rows(st, list(want))
        if got == want and not spooled(st):
            break
        time.sleep(0.5)
    assert rows(st, list(want)) == want
    assert spooled(st) == [], "events left unrecorded"
    # True: running exactly where a shim runs.
    assert live_shims(st, list(want)) == set(keep + made)
    # Each end recorded once, by whoever saw it.
    for i in failing:
        e = ends(st, i)
        assert len(e) == 1 and e[0][:2] == ("fail", "error"), e
        assert "killed by signal 9" in e[0][2] or "agent" in e[0][2], e
    for i in stopped:
        assert ends(st, i) == [("delete", "deleted",
                                "shim stopped by signal 15")]
    for i in doomed + expiring:
        e = ends(st, i)
        assert len(e) == 1 and e[0][:2] == ("delete", "deleted"), e
    # No start left half-recorded anywhere (a refused create included).
    assert psql(st, "SELECT id FROM sandboxes WHERE state = 'creating'") \
        == []
    for i in keep + made:
        assert delete(st, i).status_code == 204
    return during


def test_postgres_restart_loses_no_transition(dstack):
    st = dstack
    churn(st, lambda: st.sh("stop", "pg"), lambda: st.sh("start", "pg"),
          api_works_in_outage=False)


def test_controller_kill_loses_no_transition(dstack):
    st = dstack

    def begin():
        assert st.kill9("airlock-controller")

    def end():
        st.sh("start", "controller")
    churn(st, begin, end, api_works_in_outage=True)


def pg_server_peers(st):
    """Inodes of the client ends of every connection to this stack's
    PostgreSQL (from the server sockets' peers)."""
    path = f"{st.state}/run/pg/.s.PGSQL.5432"
    out = subprocess.run(["ss", "-x", "-n"], stdout=subprocess.PIPE,
                         text=True, check=True).stdout
    peers = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[4] == path:
            peers.add(f[7])
    return peers


def socket_inodes(pid):
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out.add(link[8:-1])
    return out


def test_shims_hold_no_database_connection(dstack):
    st = dstack
    ids = create(st, 24)
    try:
        shims = st.pids("airlock-shim")
        assert len(shims) >= 24
        clients = psql(st, "SELECT count(*) FROM pg_stat_activity WHERE"
                           " backend_type = 'client backend' AND datname ="
                           " 'airlock' AND pid <> pg_backend_pid()")
        # fcgi's threads and the controller, not one per sandbox.
        assert int(clients[0][0]) <= FCGI_THREADS + 2, clients
        peers = pg_server_peers(st)
        # The check sees connections where there are some...
        ctl = st.pids("airlock-controller")
        assert ctl and socket_inodes(ctl[0]) & peers
        # ...and none in any shim.
        for pid in shims:
            assert not socket_inodes(pid) & peers, pid
    finally:
        for i in ids:
            delete(st, i)


def test_start_never_recorded_is_destroyed(dstack):
    """A worker that dies between the shim's ready report and recording
    it leaves a row in creating with a live shim; nobody was told of the
    sandbox, so the controller's reconcile destroys it (and records the
    delete the shim spools)."""
    st = dstack
    sid = create(st, 1)[0]
    shim = shim_of(st, sid)
    assert shim is not None
    # What such a worker leaves: the row still creating, its start long
    # past the grace the controller gives a start in progress.
    psql(st, "UPDATE sandboxes SET state = 'creating', created_at = now()"
             f" - interval '5 minutes' WHERE id = '{sid}'")
    deadline = time.monotonic() + 40  # a reconcile pass is every 10 s
    while time.monotonic() < deadline:
        if rows(st, [sid])[sid] == "deleted" and not pid_alive(shim):
            break
        time.sleep(0.5)
    assert rows(st, [sid])[sid] == "deleted"
    assert not pid_alive(shim)
    assert [e[:2] for e in ends(st, sid)] == [("delete", "deleted")]


def test_event_refused_alone_is_put_aside(dstack):
    """An event PostgreSQL refuses while its connection works (here: a
    constraint made for the test) goes to run/events/bad/ and does not hold
    back the events spooled with it; the sandbox's row is then put right by
    the reconcile once the database takes it."""
    st = dstack
    a, b = create(st, 2)
    psql(st, "ALTER TABLE sandbox_events ADD CONSTRAINT test_refuse CHECK"
             f" (sandbox_id <> '{a}') NOT VALID")
    try:
        assert st.kill9("airlock-controller")
        wait_gone([kill_init(st, a), kill_init(st, b)])
        deadline = time.monotonic() + 30
        while len([n for n in spooled(st) if n.startswith((a, b))]) < 2:
            assert time.monotonic() < deadline, spooled(st)
            time.sleep(0.1)
        st.sh("start", "controller")
        deadline = time.monotonic() + 30
        while rows(st, [b])[b] != "error" or spooled(st):
            assert time.monotonic() < deadline, (rows(st, [a, b]),
                                                 spooled(st))
            time.sleep(0.2)
        bad = os.listdir(f"{st.state}/run/events/bad")
        assert any(n.startswith(a + ".") for n in bad), bad
        assert not any(n.startswith(b + ".") for n in bad), bad
        assert [e[1] for e in ends(st, b)] == ["error"], ends(st, b)
        assert ends(st, a) == []
    finally:
        psql(st, "ALTER TABLE sandbox_events DROP CONSTRAINT IF EXISTS"
                 " test_refuse")
        st.sh("start", "controller")
    # The reconcile finds a's shim gone and nothing of it in the spool.
    deadline = time.monotonic() + 40
    while rows(st, [a])[a] != "error":
        assert time.monotonic() < deadline, rows(st, [a])
        time.sleep(0.5)
