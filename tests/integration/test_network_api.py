"""The network API: "network" on create, PUT /v1/sandboxes/{id}/network,
the egress log (GET /v1/sandboxes/{id}/egress) fed by the gateways'
decision files, and the egress policy's status in GET /v1/info.

The decisions are written by build*/egress-tool through the gateway's own
writer (core/net/egress.h) into the stack's run/egress/, as a gateway would;
the controller ingests them. ns sandboxes only: nothing here depends on
the driver (the setting is a row and a frame to the shim)."""
import json
import os
import secrets
import subprocess
import time

import pytest
import requests

from conftest import RFC3339, TIMEOUT, assert_error


def session(stack, key):
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {key}"
    s.base = stack.base
    return s


@pytest.fixture(scope="module")
def other(stack, api):
    """A member key of a project of its own."""
    name = f"net-{secrets.token_hex(3)}"
    r = api.post(f"{api.base}/v1/projects", json={"name": name},
                 timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    r = api.post(f"{api.base}/v1/keys",
                 json={"project": name, "role": "member", "name": "net"},
                 timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    return session(stack, r.json()["key"])


@pytest.fixture(scope="module")
def made(api):
    ids = []
    yield ids
    for i in ids:
        try:
            api.delete(f"{api.base}/v1/sandboxes/{i}", timeout=TIMEOUT)
        except requests.RequestException:
            pass


def create(api, made, **body):
    body.setdefault("template", "minimal")
    body.setdefault("driver", "ns")
    r = api.post(f"{api.base}/v1/sandboxes", json=body, timeout=TIMEOUT)
    if r.status_code == 201:
        made.append(r.json()["id"])
    return r


def test_create_with_network_is_stored_and_shown(api, made):
    r = create(api, made, network={
        "mode": "none", "allow": ["PyPI.org.", "*.GitHubUserContent.com"],
        "deny": ["evil.example"]})
    assert r.status_code == 201, r.text
    want = {"mode": "none",
            "allow": ["pypi.org", "*.githubusercontent.com"],
            "deny": ["evil.example"]}
    assert r.json()["network"] == want
    g = api.get(f"{api.base}/v1/sandboxes/{r.json()['id']}", timeout=TIMEOUT)
    assert g.status_code == 200
    assert g.json()["network"] == want


def test_create_default_network_is_allowlist_with_nothing_allowed(api, made):
    # Lists left out are empty.
    r = create(api, made, network={"mode": "none"})
    assert r.status_code == 201, r.text
    assert r.json()["network"] == {"mode": "none", "allow": [], "deny": []}
    # No "network" at all: the documented default, which lets nothing
    # out until an allow list says so.
    r = create(api, made)
    assert r.status_code == 201, r.text
    want = {"mode": "allowlist", "allow": [], "deny": []}
    assert r.json()["network"] == want
    sid = r.json()["id"]
    r = api.get(f"{api.base}/v1/sandboxes", timeout=TIMEOUT)
    assert r.status_code == 200
    listed = {sb["id"]: sb for sb in r.json()["sandboxes"]}
    assert listed[sid]["network"] == want


BAD_NETWORKS = [
    ("closed", "network must be an object"),
    ({"allow": ["a.com"]}, "network.mode is required"),
    ({"mode": "closed"}, "network.mode must be"),
    ({"mode": "open", "ports": [80]}, "unknown member"),
    ({"mode": "open", "allow": "a.com"}, "network.allow must be an array"),
    ({"mode": "open", "allow": ["a.com", 7]},
     "network.allow[1] must be a string"),
    ({"mode": "allowlist", "allow": ["a..com"]}, "network.allow[0]:"),
    ({"mode": "allowlist", "deny": ["a*.com"]}, "network.deny[0]:"),
    ({"mode": "allowlist", "allow": ["b\u00fccher.de"]}, "punycode"),
    ({"mode": "allowlist", "allow": ["10.0.0.1:80"]}, "network.allow[0]:"),
    ({"mode": "allowlist", "allow": [f"a{i}.com" for i in range(257)]},
     "more than 256 entries"),
]


@pytest.mark.parametrize("network,message", BAD_NETWORKS)
def test_create_bad_network_is_400_saying_why(api, made, network, message):
    r = create(api, made, network=network)
    err = assert_error(r, 400, "invalid_request")
    assert message in err["message"], err


def test_put_network(api, made, other):
    r = create(api, made, network={"mode": "none"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    url = f"{api.base}/v1/sandboxes/{sid}/network"
    # Another project's key: exactly like an unknown id.
    r = other.put(url, json={"mode": "open"}, timeout=TIMEOUT)
    e1 = assert_error(r, 404, "not_found")
    r = api.put(f"{api.base}/v1/sandboxes/nosuchsandbox/network",
                json={"mode": "open"}, timeout=TIMEOUT)
    assert_error(r, 404, "not_found")
    assert "nosuch" not in e1["message"]
    # Bad bodies: 400 with the reason, nothing changed.
    # (The body is the network object: a string is not a body.)
    for network, message in BAD_NETWORKS[1:] + [
            ("closed", "request body must be an object")]:
        r = api.put(url, json=network, timeout=TIMEOUT)
        err = assert_error(r, 400, "invalid_request")
        assert message in err["message"], (network, err)
    r = api.put(url, data=b"{", timeout=TIMEOUT)
    assert_error(r, 400, "invalid_request")
    # Created with mode none: no gateway runs, so only none applies.
    r = api.put(url, json={"mode": "allowlist", "allow": ["pypi.org"]},
                timeout=TIMEOUT)
    err = assert_error(r, 409, "conflict")
    assert "only mode none" in err["message"], err
    r = api.get(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
    assert r.json()["network"] == {"mode": "none", "allow": [], "deny": []}
    # none with other lists: recorded, no gateway asked.
    r = api.put(url, json={"mode": "none", "deny": ["X.example"]},
                timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json() == {"network": {"mode": "none", "allow": [],
                                    "deny": ["x.example"]},
                        "gateway": False}
    r = api.get(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
    assert r.json()["network"]["deny"] == ["x.example"]
    # The other project's key still sees nothing of it.
    assert_error(other.get(f"{api.base}/v1/sandboxes/{sid}",
                           timeout=TIMEOUT), 404)


def egress_dir(stack, sid=None):
    d = os.path.join(stack.state, "run", "egress")
    return os.path.join(d, sid) if sid else d


def write_decisions(stack, sid, n, at_ms):
    p = subprocess.run(
        [os.path.join(stack.build, "egress-tool"),
         os.path.join(stack.state, "run"), sid, str(n), str(at_ms)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=60, env=stack.env)
    assert p.returncode == 0, p.stdout
    assert "dropped=0 suppressed=0" in p.stdout, p.stdout


def wait_ingested(stack, sid, timeout=30):
    d = egress_dir(stack, sid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [f for f in os.listdir(d) if not f.startswith(".")] \
            if os.path.isdir(d) else []
        if not left:
            return
        time.sleep(0.1)
    pytest.fail(f"egress files not ingested within {timeout}s: {left}")


def test_egress_ingested_and_listed_newest_first(stack, api, made, other):
    r = create(api, made, network={"mode": "none"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    at0 = int(time.time() * 1000) - 60000
    write_decisions(stack, sid, 600, at0)
    # 600 records: files of at most 256.
    files = os.listdir(egress_dir(stack, sid))
    assert len([f for f in files if not f.startswith(".")]) >= 1
    wait_ingested(stack, sid)
    url = f"{api.base}/v1/sandboxes/{sid}/egress"
    got, before, pages = [], None, 0
    while True:
        q = {"limit": 250}
        if before:
            q["before"] = before
        r = api.get(url, params=q, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        body = r.json()
        pages += 1
        assert len(body["egress"]) <= 250
        got += body["egress"]
        before = body["next"]
        if before is None:
            break
        assert pages < 10
    assert pages == 3
    assert len(got) == 600
    assert body["counts"] == {"allowed": 300, "denied": 300, "dropped": 0}
    # Newest first: record 599 (the latest at_ms) leads.
    names = [e["name"] for e in got]
    assert names == [f"host{i}.example" for i in range(599, -1, -1)]
    first = got[0]
    assert RFC3339.match(first["at"]), first
    assert first == {"at": first["at"], "allow": False,
                     "reason": "not allowed", "protocol": "https",
                     "name": "host599.example", "port": 443,
                     "method": "GET", "path": "/p/599"}
    assert got[1]["allow"] is True and got[1]["reason"] == "allow list"
    # Scoped: another project's key gets the 404 of an unknown id.
    assert_error(other.get(url, timeout=TIMEOUT), 404, "not_found")
    # Bad cursors and limits.
    assert_error(api.get(url, params={"before": "x"}, timeout=TIMEOUT), 400)
    assert_error(api.get(url, params={"limit": 0}, timeout=TIMEOUT), 400)
    assert_error(api.get(url, params={"limit": 1001}, timeout=TIMEOUT), 400)
    assert_error(api.get(url, params={"color": 1}, timeout=TIMEOUT), 400)


def test_bad_egress_files_go_to_bad(stack, api, made):
    r = create(api, made, network={"mode": "none"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    d = egress_dir(stack, sid)
    os.makedirs(d, mode=0o700, exist_ok=True)
    good = {"at_ms": int(time.time() * 1000), "sandbox": sid, "allow": True,
            "reason": "ok", "protocol": "dns", "name": "good.example",
            "port": 0}
    forged = dict(good, sandbox="someoneelse", name="forged.example")
    cases = {
        "00000000000000000001": "not json\n",
        "00000000000000000002": json.dumps(good) + "\n" +
                                json.dumps(forged) + "\n",
        "00000000000000000003": json.dumps(dict(good, port=70000)) + "\n",
        "00000000000000000004": json.dumps(good) + "\n",
        # Past what a timestamp holds (it would hold back every batch).
        "00000000000000000005": json.dumps(dict(good, at_ms=2**62)) + "\n",
        # A gateway that had to drop decisions says how many.
        "00000000000000000006": json.dumps(dict(
            good, at_ms=good["at_ms"] - 1000, allow=False, reason="dropped",
            protocol="none", name="", dropped=7)) + "\n",
    }
    for name, text in cases.items():
        with open(os.path.join(d, "." + name + ".tmp"), "w") as f:
            f.write(text)
        os.rename(os.path.join(d, "." + name + ".tmp"),
                  os.path.join(d, name))
    wait_ingested(stack, sid)
    bad = set(os.listdir(os.path.join(egress_dir(stack), "bad")))
    names = list(cases)
    for name in names[:3] + names[4:5]:
        assert f"{sid}.{name}" in bad, bad
    for name in (names[3], names[5]):
        assert f"{sid}.{name}" not in bad, bad
    r = api.get(f"{api.base}/v1/sandboxes/{sid}/egress", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    # Only the good files' records; none of a bad file's.
    body = r.json()
    assert [e["name"] for e in body["egress"]] == ["good.example", ""]
    assert body["egress"][1]["dropped"] == 7
    assert body["egress"][1]["protocol"] == "none"
    assert "dropped" not in body["egress"][0]
    assert body["next"] is None
    assert body["counts"] == {"allowed": 1, "denied": 0, "dropped": 7}


def put_batch(d, name, text):
    with open(os.path.join(d, "." + name + ".tmp"), "w") as f:
        f.write(text)
    os.rename(os.path.join(d, "." + name + ".tmp"), os.path.join(d, name))


def test_egress_file_read_again_after_a_crash_is_recorded_once(stack, api,
                                                               made):
    """A controller that dies after committing a file's rows and before
    unlinking it finds the file again on its next start: the state is
    exactly "rows in, file still there", which this test makes by
    putting the same file back once it was ingested. The egress log and
    its counts take it once; a new file beside it still counts."""
    r = create(api, made, network={"mode": "none"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    d = egress_dir(stack, sid)
    os.makedirs(d, mode=0o700, exist_ok=True)
    at = int(time.time() * 1000)
    rec = {"at_ms": at, "sandbox": sid, "allow": True, "reason": "ok",
           "protocol": "https", "name": "a.example", "port": 443,
           "method": "GET", "path": "/"}
    text = json.dumps(rec) + "\n" + json.dumps(
        dict(rec, at_ms=at + 1, allow=False, reason="no",
             name="b.example")) + "\n"
    first = "%020d" % (at * 1000)
    url = f"{api.base}/v1/sandboxes/{sid}/egress"

    def listed():
        r = api.get(url, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        body = r.json()
        return [e["name"] for e in body["egress"]], body["counts"]

    put_batch(d, first, text)
    wait_ingested(stack, sid)
    once = (["b.example", "a.example"], {"allowed": 1, "denied": 1,
                                         "dropped": 0})
    assert listed() == once
    # The crash: the same file (name and bytes) is there again.
    put_batch(d, first, text)
    wait_ingested(stack, sid)
    assert listed() == once
    # Again, now beside a file the controller has not seen: that one
    # counts, the old one still does not.
    put_batch(d, first, text)
    put_batch(d, "%020d" % (at * 1000 + 1),
              json.dumps(dict(rec, at_ms=at + 2, name="c.example")) + "\n")
    wait_ingested(stack, sid)
    assert listed() == (["c.example", "b.example", "a.example"],
                        {"allowed": 2, "denied": 1, "dropped": 0})
    assert not [f for f in os.listdir(os.path.join(egress_dir(stack), "bad"))
                if f.startswith(sid)]


def test_info_shows_the_egress_policy(api, other):
    pol = egress_policy_once(api, lambda p: p.get("loaded"))
    assert pol is not None, "no egress policy status"
    assert pol["path"].endswith("/egress.lua"), pol
    assert pol["loaded"] is True, pol
    assert RFC3339.match(pol["loaded_at"]), pol
    assert pol["reload_error"] is None, pol
    # The operator's files are not a member's business.
    r = other.get(f"{api.base}/v1/info", timeout=TIMEOUT)
    assert r.status_code == 200
    assert "policies" not in r.json()


def test_cli_network_and_egress(stack, api, made):
    from test_templates import cli
    r = create(api, made, network={"mode": "none"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    p = cli(stack, "sandbox", "network", sid, "--mode", "none",
            "--deny", "Bad.Example", "--deny", "*.worse.example")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["network"] == {
        "mode": "none", "allow": [],
        "deny": ["bad.example", "*.worse.example"]}
    p = cli(stack, "sandbox", "network", sid, "--mode", "open")
    assert p.returncode == 1
    assert "only mode none" in p.stderr
    p = cli(stack, "sandbox", "network", sid, "--mode", "none",
            "--allow", "a..b")
    assert p.returncode == 1 and "network.allow[0]" in p.stderr, p.stderr
    write_decisions(stack, sid, 3, int(time.time() * 1000))
    wait_ingested(stack, sid)
    p = cli(stack, "sandbox", "egress", sid, "--limit", "2")
    assert p.returncode == 0, p.stderr
    page = json.loads(p.stdout)
    assert [e["name"] for e in page["egress"]] == ["host2.example",
                                                  "host1.example"]
    p = cli(stack, "sandbox", "egress", sid, "--before", page["next"])
    assert p.returncode == 0, p.stderr
    assert [e["name"] for e in json.loads(p.stdout)["egress"]] == [
        "host0.example"]
    assert cli(stack, "sandbox", "network", sid).returncode == 100


def egress_policy_once(s, settled, seconds=10):
    """The egress policy's status in /v1/info once settled(status) holds:
    the controller publishes it when it (re)loads the file, a moment after
    the stack starts or the file changes."""
    deadline = time.monotonic() + seconds
    while True:
        r = s.get(f"{s.base}/v1/info", timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        pol = r.json()["policies"].get("egress")
        if (pol is not None and settled(pol)) or \
                time.monotonic() > deadline:
            return pol
        time.sleep(0.1)


@pytest.fixture(scope="module")
def pstack(tmp_path_factory):
    """A stack whose egress policy is a copy the test may break."""
    from conftest import REPO, running_stack
    d = tmp_path_factory.mktemp("policies")
    src = os.path.join(REPO, "policies", "egress.lua")
    with open(src) as f:
        (d / "egress.lua").write_text(f.read())
    yield from running_stack(env={"AIRLOCK_POLICIES": str(d),
                                  "AIRLOCK_DRIVERS": "ns",
                                  "AIRLOCK_WARM_POOL": "0",
                                  "AIRLOCK_WARM_POOL_VM": "0"},
                             prefix="airlock-pol-")


def test_info_says_why_a_changed_policy_is_refused(pstack):
    s = session(pstack, pstack.key)
    path = os.path.join(pstack.env["AIRLOCK_POLICIES"], "egress.lua")
    pol = egress_policy_once(s, lambda p: p.get("loaded"))
    assert pol["path"] == path and pol["loaded"] is True, pol
    assert pol["reload_error"] is None and pol["reloads"] == 0, pol
    good = open(path).read()
    # A change with a mistake on line 3: the last good policy stays.
    with open(path, "w") as f:
        f.write("-- broken\n\nfunction egress(req) return allow(\n")
    os.utime(path, (time.time() + 5, time.time() + 5))
    pol = egress_policy_once(s, lambda p: p["reload_error"])
    assert pol["loaded"] is True, pol
    assert pol["reload_error"] and "egress.lua" in pol["reload_error"], pol
    assert RFC3339.match(pol["reload_error_at"]), pol
    print(f"\nrefused change: {pol['reload_error']!r}")
    # Fixed again: in use, the error gone.
    with open(path, "w") as f:
        f.write(good)
    os.utime(path, (time.time() + 10, time.time() + 10))
    pol = egress_policy_once(s, lambda p: p["reload_error"] is None)
    assert pol["reload_error"] is None and pol["reloads"] == 1, pol
    # Every worker answers from the one status the controller published.
    seen = {json.dumps(s.get(f"{s.base}/v1/info", timeout=TIMEOUT).json()[
        "policies"], sort_keys=True) for _ in range(16)}
    assert len(seen) == 1, seen
