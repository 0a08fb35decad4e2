"""Snapshots and fork (issue 25): a named snapshot of a running sandbox,
which goes on; a new sandbox from a snapshot; a fork into several
children, each diverging on its own; another project's snapshot is 404;
a snapshot a suspended sandbox needs cannot be deleted."""
import os

from conftest import TIMEOUT, assert_error, exec_json


def post(api, path, body=None):
    return api.post(f"{api.base}{path}", json=body, timeout=TIMEOUT)


def sh(api, sid, script):
    return exec_json(api, sid, ["sh", "-c", script])


def test_named_snapshot_and_sandbox_from_it(stack, api, sandboxes, driver):
    sid = sandboxes.create()["id"]
    sh(api, sid, "echo one > /root/f; sync")
    r = post(api, f"/v1/sandboxes/{sid}/snapshots", {"name": "first"})
    assert r.status_code == 201, r.text
    snap = r.json()
    assert snap["status"] == "ready" and snap["name"] == "first", snap
    assert snap["sandbox_id"] == sid and snap["kind"] == "named"
    assert snap["memory"] is (driver == "vm"), snap
    # The sandbox goes on, and what it writes now is not in the snapshot.
    sb = api.get(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT).json()
    assert sb["state"] == "running" and sb["operation"] is None, sb
    sh(api, sid, "echo two > /root/f")
    r = api.get(f"{api.base}/v1/sandboxes/{sid}/snapshots", timeout=TIMEOUT)
    assert r.status_code == 200
    assert [s["id"] for s in r.json()["snapshots"]] == [snap["id"]]
    r = api.get(f"{api.base}/v1/snapshots/{snap['id']}", timeout=TIMEOUT)
    assert r.status_code == 200 and r.json()["id"] == snap["id"]
    # A second snapshot of the same name is refused.
    r = post(api, f"/v1/sandboxes/{sid}/snapshots", {"name": "first"})
    assert r.status_code in (409, 400), r.text

    child = sandboxes.create(snapshot=snap["id"])
    assert child["id"] != sid
    assert child["template"] == "minimal" and child["driver"] == driver
    assert sh(api, child["id"], "cat /root/f")["stdout"] == "one\n"
    assert sh(api, sid, "cat /root/f")["stdout"] == "two\n"

    # Deleting the snapshot keeps the sandbox made from it.
    r = api.delete(f"{api.base}/v1/snapshots/{snap['id']}", timeout=TIMEOUT)
    assert r.status_code == 204, r.text
    assert not os.path.exists(os.path.join(stack.state, "pool", "snapshots",
                                           snap["id"]))
    assert api.get(f"{api.base}/v1/snapshots/{snap['id']}",
                   timeout=TIMEOUT).status_code == 404
    assert sh(api, child["id"], "cat /root/f")["stdout"] == "one\n"


def test_fork_children_diverge(api, sandboxes, driver):
    parent = sandboxes.create()["id"]
    sh(api, parent, "echo parent > /root/who; sync")
    # A vm's children get its memory: the parent's processes run on.
    sleeper = sh(api, parent, "sleep 600 >/dev/null 2>&1 & echo $!")
    spid = sleeper["stdout"].strip()
    r = post(api, f"/v1/sandboxes/{parent}/fork", {"count": 3})
    assert r.status_code == 201, r.text
    out = r.json()
    assert out["parent"] == parent and out["snapshot"]
    kids = out["sandboxes"]
    assert len(kids) == 3 and all("id" in k for k in kids), kids
    sandboxes.ids.extend(k["id"] for k in kids)
    ids = {k["id"] for k in kids}
    assert len(ids) == 3 and parent not in ids
    for k in kids:
        assert k["state"] == "running"
        assert sh(api, k["id"], "cat /root/who")["stdout"] == "parent\n"
        alive = sh(api, k["id"], f"kill -0 {spid} && echo alive || true")
        assert (alive["stdout"] == "alive\n") is (driver == "vm"), alive
        sh(api, k["id"], f"echo {k['id']} > /root/who")
    for k in kids:
        assert sh(api, k["id"], "cat /root/who")["stdout"] == k["id"] + "\n"
        assert sh(api, k["id"], "hostname")["stdout"].strip() == k["id"]
    assert sh(api, parent, "cat /root/who")["stdout"] == "parent\n"


def test_fork_and_snapshot_requests_are_checked(api, sandboxes):
    sid = sandboxes.create()["id"]
    for body in ({"count": 0}, {"count": 11}, {"count": "2"}, {"x": 1}):
        assert_error(post(api, f"/v1/sandboxes/{sid}/fork", body), 400,
                     "invalid_request")
    assert_error(post(api, f"/v1/sandboxes/{sid}/snapshots", {"name": 5}),
                 400, "invalid_request")
    assert_error(post(api, "/v1/sandboxes",
                      {"snapshot": "nosuchsnapshot000000"}), 404, "not_found")
    assert_error(post(api, "/v1/sandboxes",
                      {"snapshot": "nosuchsnapshot000000",
                       "template": "minimal"}), 400, "invalid_request")
    assert_error(post(api, "/v1/sandboxes/nosuchsandbox0000000/fork",
                      {"count": 1}), 404, "not_found")
    assert api.get(f"{api.base}/v1/snapshots/nosuchsnapshot000000",
                   timeout=TIMEOUT).status_code == 404


def test_snapshot_of_a_suspended_sandbox_is_kept(api, sandboxes, driver):
    sid = sandboxes.create()["id"]
    body = {"memory": False} if driver == "ns" else {}
    r = post(api, f"/v1/sandboxes/{sid}/suspend", body)
    assert r.status_code == 200, r.text
    snap = r.json()["snapshot"]
    r = api.delete(f"{api.base}/v1/snapshots/{snap}", timeout=TIMEOUT)
    assert_error(r, 409, "conflict")
    # A suspended sandbox forks from the snapshot it resumes from.
    r = post(api, f"/v1/sandboxes/{sid}/fork", {"count": 1})
    assert r.status_code == 201, r.text
    assert r.json()["snapshot"] == snap
    sandboxes.ids.extend(k["id"] for k in r.json()["sandboxes"] if "id" in k)
    assert r.json()["sandboxes"][0]["state"] == "running"


def test_snapshots_per_sandbox_are_bounded(api, sandboxes):
    """What a sandbox's snapshots may take of the host's disk is bounded:
    it keeps at most 16 named ones; the 17th is refused until one is
    deleted."""
    sid = sandboxes.create()["id"]
    made = []
    for i in range(16):
        r = post(api, f"/v1/sandboxes/{sid}/snapshots", {"name": f"s{i}"})
        assert r.status_code == 201, (i, r.text)
        made.append(r.json()["id"])
    r = post(api, f"/v1/sandboxes/{sid}/snapshots", {"name": "one-more"})
    assert_error(r, 429, "quota_exceeded")
    assert "16" in r.json()["error"]["message"]
    r = api.delete(f"{api.base}/v1/snapshots/{made[0]}", timeout=TIMEOUT)
    assert r.status_code == 204
    r = post(api, f"/v1/sandboxes/{sid}/snapshots", {"name": "one-more"})
    assert r.status_code == 201, r.text
