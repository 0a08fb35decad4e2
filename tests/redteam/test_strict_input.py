"""Strict input (issue 23): a request that reads one way to a layer in
front of the API and another way to the API. A member key of project A
sends JSON bodies naming a member twice (json-c keeps the last one, a
proxy or WAF may keep the first), query strings naming a parameter twice
(plain and percent-encoded), and credentials scoped to project B's
sandbox, to a sandbox that does not exist and to B's private template.
Each attempt is a row of the table and fails when it was accepted."""
import json
import secrets

import pytest
import requests

from conftest import it

TIMEOUT = it.TIMEOUT


def member(stack, api, prefix):
    """A new project and a member key of it: (project, session)."""
    name = f"{prefix}-{secrets.token_hex(3)}"
    r = api.post(f"{api.base}/v1/projects", json={"name": name},
                 timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    r = api.post(f"{api.base}/v1/keys",
                 json={"project": name, "role": "member",
                       "name": f"member of {name}"}, timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    return name, it.api_session(stack, r.json()["key"])


def private_template(s, name):
    """Build FROM minimal as s's project (private to it)."""
    parts = {"name": (None, name),
             "airlockfile": (None, "FROM minimal\nENV STRICT=1\n")}
    r = s.post(f"{s.base}/v1/templates", files=parts, timeout=TIMEOUT)
    assert r.status_code == 202, r.text
    bid = r.json()["build_id"]
    r = s.get(f"{s.base}/v1/templates/builds/{bid}/logs",
              headers={"Accept": "text/event-stream"}, stream=True,
              timeout=(5, 600))
    assert r.status_code == 200, r.text
    status = None
    for ev in it.sse_events(r):
        if ev.name == "status" and ev.data.get("status") in ("succeeded",
                                                              "failed"):
            status = ev.data["status"]
            break
    r.close()
    assert status == "succeeded", f"build of {name}: {status}"


class Tenants:
    """A (the attacker) and B (the victim), each with an ns sandbox; B
    with a private template."""

    def __init__(self, stack, api):
        self.api = api
        self.a, self.sa = member(stack, api, "strict-a")
        self.b, self.sb = member(stack, api, "strict-b")
        self.boxes = {}
        for p, s in (("a", self.sa), ("b", self.sb)):
            r = s.post(f"{s.base}/v1/sandboxes",
                       json={"template": "minimal", "driver": "ns",
                             "timeout": 1800}, timeout=TIMEOUT)
            assert r.status_code == 201, r.text
            self.boxes[p] = r.json()["id"]
        self.b_template = f"strict-b-{secrets.token_hex(3)}"
        private_template(self.sb, self.b_template)

    def cleanup(self):
        for sid in self.boxes.values():
            self.api.delete(f"{self.api.base}/v1/sandboxes/{sid}",
                            timeout=TIMEOUT)
        self.api.delete(f"{self.api.base}/v1/templates/{self.b_template}",
                        timeout=TIMEOUT)


@pytest.fixture(scope="module")
def tenants(stack, api, info):
    if "ns" not in it.usable_drivers(info):
        pytest.skip(f"driver 'ns' is not usable on this host: {info!r}")
    t = Tenants(stack, api)
    yield t
    t.cleanup()


def raw(s, method, path, body):
    """body as bytes, exactly as written (json= would keep one member)."""
    return s.request(method, f"{s.base}{path}", data=body.encode(),
                     headers={"Content-Type": "application/json",
                              "Accept": "application/json"},
                     timeout=TIMEOUT)


def refused_400(r, name):
    """An invalid_request naming the repeated member or parameter."""
    try:
        e = r.json()["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return r.status_code == 400 and e.get("code") == "invalid_request" and \
        f"'{name}'" in e.get("message", "") and \
        "repeated" in e.get("message", "")


def row(r):
    return f"{r.status_code} {r.text.strip()[:150]}"


def test_duplicate_member_on_create(rt, tenants):
    """The create body with the driver twice: a proxy allowing only "ns"
    by the first would let "vm" through to us."""
    s = tenants.sa
    r = raw(s, "POST", "/v1/sandboxes",
            '{"template":"minimal","driver":"ns","timeout":60,'
            '"metadata":{"owner":"a","owner":"b"}}')
    if r.status_code == 201:
        s.delete(f"{s.base}/v1/sandboxes/{r.json()['id']}", timeout=TIMEOUT)
    ok = refused_400(r, "owner")
    assert not rt.record("create naming a metadata member twice", "api",
                         "400 naming it", row(r), not ok), r.text
    r = raw(s, "POST", "/v1/sandboxes",
            '{"template":"minimal","driver":"ns","timeout":60,'
            '"tim\\u0065out":86400}')
    if r.status_code == 201:
        s.delete(f"{s.base}/v1/sandboxes/{r.json()['id']}", timeout=TIMEOUT)
    ok = refused_400(r, "timeout")
    assert not rt.record("create naming timeout twice (once escaped)",
                         "api", "400 naming it", row(r), not ok), r.text


@pytest.mark.parametrize("body,name", [
    ('{"cmd":["id"],"cmd":["echo","x"]}', "cmd"),
    ('{"\\u0063md":["id"],"cmd":["echo","x"]}', "cmd"),
    ('{"cmd":["sh","-c","echo $V"],"env":{"V":"1","V":"2"}}', "V"),
])
def test_duplicate_member_on_exec(rt, tenants, body, name):
    """Issue 23's exec: last wins in json-c, so this ran echo x."""
    r = raw(tenants.sa, "POST",
            f"/v1/sandboxes/{tenants.boxes['a']}/exec", body)
    ok = refused_400(r, name)
    assert not rt.record(f"exec {body}", "api", "400 naming it", row(r),
                         not ok), r.text


@pytest.mark.parametrize("path,body,name", [
    ("/v1/sandboxes/{sid}/network", '{"mode":"none","mode":"open"}',
     "mode"),
    ("/v1/credentials",
     '{"name":"dup","value":"v","inject":{"hosts":["a.test"],'
     '"header":"X-A","header":"Authorization"}}', "header"),
])
def test_duplicate_member_on_other_bodies(rt, tenants, path, body, name):
    s = tenants.sa
    method = "PUT" if path.endswith("/network") else "POST"
    r = raw(s, method, path.format(sid=tenants.boxes["a"]), body)
    ok = refused_400(r, name)
    assert not rt.record(f"{method} {path.split('/')[-1]} {body[:60]}",
                         "api", "400 naming it", row(r), not ok), r.text


def send_raw_query(s, method, path_and_query, data=None):
    """The query string as written: requests would otherwise decode
    %74 back to t before sending."""
    req = s.prepare_request(requests.Request(method, f"{s.base}/x",
                                             data=data))
    req.url = f"{s.base}{path_and_query}"
    return s.send(req, timeout=TIMEOUT)


@pytest.mark.parametrize("query", [
    "path=/etc/hostname&path=/etc/passwd",
    "path=/etc/hostname&pa%74h=/etc/passwd",
])
def test_repeated_path_on_files(rt, tenants, query):
    """A layer in front checking the first path= while we serve the
    last (or the other way round) reads one file for another."""
    s, sid = tenants.sa, tenants.boxes["a"]
    r = send_raw_query(s, "GET", f"/v1/sandboxes/{sid}/files?{query}")
    ok = refused_400(r, "path")
    assert not rt.record(f"files GET ?{query}", "api", "400 naming path",
                         row(r), not ok), r.text
    put = query.replace("/etc/hostname", "/tmp/first").replace(
        "/etc/passwd", "/tmp/second")
    r = send_raw_query(s, "PUT", f"/v1/sandboxes/{sid}/files?{put}",
                       data=b"written")
    ok = refused_400(r, "path")
    # Neither path was written.
    out = it.exec_json(s, sid, ["sh", "-c",
                                "ls /tmp/first /tmp/second 2>/dev/null"])
    ok = ok and out["stdout"].strip() == ""
    assert not rt.record(f"files PUT ?{put}", "api",
                         "400 naming path, nothing written",
                         f"{row(r)}; ls: {out['stdout'].strip()!r}",
                         not ok), r.text


@pytest.mark.parametrize("path,name", [
    ("/v1/sandboxes?state=running&state=error", "state"),
    ("/v1/sandboxes?project={b}&project={a}", "project"),
    ("/v1/sandboxes/{sid}/egress?limit=1&limit=1000", "limit"),
    ("/v1/credentials?project={a}&proj%65ct={b}", "project"),
])
def test_repeated_parameter_on_lists(rt, tenants, path, name):
    s = tenants.sa
    p = path.format(a=tenants.a, b=tenants.b, sid=tenants.boxes["a"])
    r = send_raw_query(s, "GET", p)
    ok = refused_400(r, name)
    assert not rt.record(f"GET {p}", "api", f"400 naming {name}", row(r),
                         not ok), r.text


def cred(name, scope):
    return {"name": name, "value": "sekrit-" + secrets.token_hex(8),
            "scope": scope,
            "inject": {"hosts": ["api.example.test"],
                       "header": "Authorization",
                       "format": "Bearer {value}"}}


@pytest.mark.parametrize("what", ["b's sandbox", "a missing sandbox",
                                  "b's private template"])
def test_credential_scope_out_of_reach(rt, tenants, what):
    """A's member key scoping a credential to what A cannot see: 404,
    as any other reference to another project's object."""
    s = tenants.sa
    scope = {"b's sandbox": {"sandbox": tenants.boxes["b"]},
             "a missing sandbox": {"sandbox": "nosuchsandbox0000000"},
             "b's private template": {"template": tenants.b_template}}[what]
    r = s.post(f"{s.base}/v1/credentials",
               json=cred("x" + secrets.token_hex(3), scope),
               timeout=TIMEOUT)
    if r.status_code == 201:
        s.delete(f"{s.base}/v1/credentials/{r.json()['id']}",
                 timeout=TIMEOUT)
    ok = r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    assert not rt.record(f"credential scoped to {what}", "api",
                         "404 not_found", row(r), not ok), r.text


def test_credential_scope_in_reach_works(rt, tenants):
    """What A sees stays usable: its own sandbox, a public template."""
    s = tenants.sa
    for scope in ({"sandbox": tenants.boxes["a"]}, {"template": "minimal"}):
        r = s.post(f"{s.base}/v1/credentials",
                   json=cred("ok" + secrets.token_hex(3), scope),
                   timeout=TIMEOUT)
        ok = r.status_code == 201 and r.json()["scope"] == scope
        assert rt.works(f"credential scoped to {json.dumps(scope)}", "api",
                        row(r), ok), r.text
