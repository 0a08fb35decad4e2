"""Tenancy: projects, keys with a role, what a key sees and may touch, and
the quotas of a project.

Two projects (a, b) with a member key each and the stack's admin key. The
tenancy table runs every /v1 endpoint with each key against each
project's objects (one ns sandbox, one template and one build per
project, made once for the module) and checks the status; another
project's object must be answered exactly like an unknown id."""
import concurrent.futures
import os
import secrets
import subprocess
import threading
import time

import pytest
import requests

from conftest import REPO, TIMEOUT, assert_error, cmdline, sse_events
from test_templates import cli, follow, submit

KEYS = ("a", "b", "admin")
OWNERS = ("a", "b")


def session(stack, key):
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {key}"
    s.base = stack.base
    return s


def unique(prefix):
    return f"{prefix}-{secrets.token_hex(3)}"


def make_project(api, prefix):
    name = unique(prefix)
    r = api.post(f"{api.base}/v1/projects", json={"name": name},
                 timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    assert r.json()["name"] == name
    return name


def make_key(stack, api, project, role="member"):
    r = api.post(f"{api.base}/v1/keys",
                 json={"project": project, "role": role,
                       "name": f"{role} of {project}"}, timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    k = r.json()
    assert k["project"] == project and k["role"] == role
    assert k["key"].startswith("al_") and len(k["key"]) == 51
    return k, session(stack, k["key"])


def create(s, **body):
    body.setdefault("template", "minimal")
    body.setdefault("driver", "ns")
    return s.post(f"{s.base}/v1/sandboxes", json=body, timeout=TIMEOUT)


class World:
    """The two projects, their keys and objects."""

    def __init__(self, stack, api):
        self.api = api
        self.project = {}
        self.key = {"admin": api}
        self.sandbox = {}
        self.template = {}
        self.build = {}
        for p in OWNERS:
            self.project[p] = make_project(api, f"t{p}")
            _, self.key[p] = make_key(stack, api, self.project[p])
        for p in OWNERS:
            r = create(self.key[p], timeout=1800)
            assert r.status_code == 201, r.text
            self.sandbox[p] = r.json()["id"]
            assert r.json()["project"] == self.project[p]
            name = unique(f"tpl{p}")
            r = submit(self.key[p], name, "FROM minimal\nENV OWNER=" + p + "\n")
            assert r.status_code == 202, r.text
            self.template[p] = name
            self.build[p] = r.json()["build_id"]
            ev = follow(self.key[p], self.build[p], seconds=300)
            assert ev[-1].data["status"] == "succeeded", ev

    def cleanup(self):
        for p in OWNERS:
            self.api.delete(f"{self.api.base}/v1/sandboxes/{self.sandbox[p]}",
                            timeout=TIMEOUT)
            self.api.delete(f"{self.api.base}/v1/templates/{self.template[p]}",
                            timeout=TIMEOUT)


@pytest.fixture(scope="module")
def world(stack, api):
    w = World(stack, api)
    yield w
    w.cleanup()


def sees(key, owner):
    return key == "admin" or key == owner


# Per-object requests: (name, method, path, kwargs, status when allowed).
# {sid}, {tpl}, {build} are the owner's objects.
OBJECT_REQUESTS = [
    ("sandbox get", "GET", "/v1/sandboxes/{sid}", {}, 200),
    ("exec json", "POST", "/v1/sandboxes/{sid}/exec",
     {"json": {"cmd": ["true"]}, "headers": {"Accept": "application/json"}},
     200),
    ("exec sse", "POST", "/v1/sandboxes/{sid}/exec",
     {"json": {"cmd": ["true"]}, "headers": {"Accept": "text/event-stream"}},
     200),
    ("files put", "PUT", "/v1/sandboxes/{sid}/files",
     {"params": {"path": "/tmp/t"}, "data": b"x"}, 201),
    ("files get", "GET", "/v1/sandboxes/{sid}/files",
     {"params": {"path": "/etc/hostname"}}, 200),
    ("files list", "GET", "/v1/sandboxes/{sid}/files",
     {"params": {"path": "/", "list": "1"}}, 200),
    ("egress list", "GET", "/v1/sandboxes/{sid}/egress", {}, 200),
    # none applies whether or not the sandbox has a gateway.
    ("network put", "PUT", "/v1/sandboxes/{sid}/network",
     {"json": {"mode": "none"}}, 200),
    ("template get", "GET", "/v1/templates/{tpl}", {}, 200),
    ("build get", "GET", "/v1/templates/builds/{build}", {}, 200),
    ("build logs", "GET", "/v1/templates/builds/{build}/logs",
     {"headers": {"Accept": "text/event-stream"}}, 200),
]
UNKNOWN = {"sid": "nosuchsandbox0000000", "tpl": "no-such-template-x",
           "build": "nosuchbuild000000000"}


def fill(path, ids):
    return path.format(**ids)


def ids_of(world, owner):
    return {"sid": world.sandbox[owner], "tpl": world.template[owner],
            "build": world.build[owner]}


def same_as_unknown(world, key, method, path, kw, ids, resp):
    """resp (404) reads like the answer for an unknown id."""
    other = world.key[key].request(method, world.api.base + fill(path, UNKNOWN),
                                   timeout=TIMEOUT, **kw)
    got = assert_error(resp, 404, "not_found")
    want = assert_error(other, 404, "not_found")
    for k in ("sid", "tpl", "build"):
        got["message"] = got["message"].replace(ids[k], UNKNOWN[k])
    assert got == want


@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("req", OBJECT_REQUESTS, ids=lambda r: r[0])
def test_tenancy_table(world, req, key, owner):
    name, method, path, kw, ok = req
    ids = ids_of(world, owner)
    r = world.key[key].request(method, world.api.base + fill(path, ids),
                               timeout=TIMEOUT, **kw)
    if sees(key, owner):
        assert r.status_code == ok, f"{name} by {key}: {r.status_code} {r.text}"
    else:
        same_as_unknown(world, key, method, path, kw, ids, r)


@pytest.mark.parametrize("key", ("a", "b"))
def test_delete_of_another_projects_objects_is_404(world, key):
    other = "b" if key == "a" else "a"
    s = world.key[key]
    ids = ids_of(world, other)
    for path in ("/v1/sandboxes/{sid}", "/v1/templates/{tpl}"):
        r = s.delete(world.api.base + fill(path, ids), timeout=TIMEOUT)
        same_as_unknown(world, key, "DELETE", path, {}, ids, r)
    # Still there for its owner.
    o = world.key[other]
    assert o.get(f"{o.base}/v1/sandboxes/{ids['sid']}",
                 timeout=TIMEOUT).status_code == 200
    assert o.get(f"{o.base}/v1/templates/{ids['tpl']}",
                 timeout=TIMEOUT).status_code == 200


@pytest.mark.parametrize("key", KEYS)
def test_lists_show_what_the_key_sees(world, key):
    s = world.key[key]
    listed = {x["id"] for x in s.get(f"{s.base}/v1/sandboxes",
                                     timeout=TIMEOUT).json()["sandboxes"]}
    tpls = {t["name"]: t for t in s.get(f"{s.base}/v1/templates",
                                        timeout=TIMEOUT).json()["templates"]}
    assert "minimal" in tpls and tpls["minimal"]["public"] is True
    for owner in OWNERS:
        assert (world.sandbox[owner] in listed) == sees(key, owner)
        assert (world.template[owner] in tpls) == sees(key, owner)


def test_admin_filters_lists_by_project(world):
    api = world.api
    for owner in OWNERS:
        p = world.project[owner]
        sbs = api.get(f"{api.base}/v1/sandboxes", params={"project": p},
                      timeout=TIMEOUT).json()["sandboxes"]
        assert [x["id"] for x in sbs] == [world.sandbox[owner]]
        tpls = api.get(f"{api.base}/v1/templates", params={"project": p},
                       timeout=TIMEOUT).json()["templates"]
        assert [t["name"] for t in tpls] == [world.template[owner]]
        keys = api.get(f"{api.base}/v1/keys", params={"project": p},
                       timeout=TIMEOUT).json()["keys"]
        assert [k["project"] for k in keys] == [p]
    # A member asking for another project's list gets none of it.
    s = world.key["a"]
    sbs = s.get(f"{s.base}/v1/sandboxes",
                params={"project": world.project["b"]},
                timeout=TIMEOUT).json()["sandboxes"]
    assert sbs == []


def test_create_from_another_projects_template_is_404(world):
    r = create(world.key["a"], template=world.template["b"])
    want = create(world.key["a"], template="no-such-template-x")
    got = assert_error(r, 404, "not_found")
    exp = assert_error(want, 404, "not_found")
    assert got["message"].replace(world.template["b"], "no-such-template-x") \
        == exp["message"]


def test_create_naming_a_project(world):
    api, a = world.api, world.key["a"]
    pa, pb = world.project["a"], world.project["b"]
    # An admin creates in any project, with that project's templates.
    r = create(api, project=pb, template=world.template["b"], timeout=60)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    try:
        assert r.json()["project"] == pb
        assert_error(a.get(f"{a.base}/v1/sandboxes/{sid}", timeout=TIMEOUT),
                     404)
    finally:
        api.delete(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
    assert_error(create(api, project=pa, template=world.template["b"]), 404)
    assert_error(create(api, project="no-such-project"), 400)
    assert_error(create(api, project="Bad Name"), 400)
    # A member names its own project only.
    assert_error(create(a, project=pb), 403, "forbidden")
    r = create(a, project=pa, timeout=60)
    assert r.status_code == 201, r.text
    a.delete(f"{a.base}/v1/sandboxes/{r.json()['id']}", timeout=TIMEOUT)


def test_member_build_gets_its_project(world):
    s = world.key["a"]
    t = s.get(f"{s.base}/v1/templates/{world.template['a']}",
              timeout=TIMEOUT).json()
    assert t["project"] == world.project["a"] and t["public"] is False
    b = s.get(f"{s.base}/v1/templates/builds/{world.build['a']}",
              timeout=TIMEOUT).json()
    assert b["project"] == world.project["a"]


def test_rebuilds_keep_the_owner(world):
    name = world.template["a"]
    for who in ("a", "admin"):
        s = world.key[who]
        r = submit(s, name, f"FROM minimal\nENV BY={who}\n")
        assert r.status_code == 202, r.text
        ev = follow(s, r.json()["build_id"], seconds=300)
        assert ev[-1].data["status"] == "succeeded", ev
    t = world.key["a"].get(f"{world.api.base}/v1/templates/{name}",
                           timeout=TIMEOUT).json()
    assert t["project"] == world.project["a"] and t["public"] is False
    assert t["version"] == 3 and t["env"].get("BY") == "admin", t
    assert_error(world.key["b"].get(f"{world.api.base}/v1/templates/{name}",
                                    timeout=TIMEOUT), 404)


@pytest.mark.parametrize("key", ("a", "b"))
def test_public_templates_usable_not_changeable_by_members(world, key):
    s = world.key[key]
    t = s.get(f"{s.base}/v1/templates/minimal", timeout=TIMEOUT)
    assert t.status_code == 200 and t.json()["public"] is True
    assert_error(s.delete(f"{s.base}/v1/templates/minimal", timeout=TIMEOUT),
                 403, "forbidden")
    e = assert_error(submit(s, "minimal", "FROM minimal\nENV X=1\n"), 409)
    assert "public" in e["message"]
    # Names are unique across projects.
    other = "b" if key == "a" else "a"
    assert_error(submit(s, world.template[other], "FROM minimal\n"), 409)
    # Another project's template is no base for a build either.
    e = assert_error(submit(s, unique("x"),
                            f"FROM {world.template[other]}\n"), 400)
    assert "unknown template" in e["message"]


ADMIN_REQUESTS = [
    ("GET", "/v1/projects", {}),
    ("POST", "/v1/projects", {"json": {"name": "nope-by-member"}}),
    ("GET", "/v1/projects/default", {}),
    ("PUT", "/v1/projects/default/quota", {"json": {"running_sandboxes": 0}}),
    ("PUT", "/v1/templates/minimal/warm_pool", {"json": {"ns_max": 64}}),
    ("GET", "/v1/keys", {}),
    ("POST", "/v1/keys", {"json": {"project": "default", "role": "admin",
                                   "name": "escalate"}}),
    ("DELETE", "/v1/keys/1", {}),
]


@pytest.mark.parametrize("key", ("a", "b"))
@pytest.mark.parametrize("req", ADMIN_REQUESTS, ids=lambda r: r[0] + r[1])
def test_admin_endpoints_are_forbidden_to_members(world, key, req):
    method, path, kw = req
    r = world.key[key].request(method, world.api.base + path, timeout=TIMEOUT,
                               **kw)
    assert_error(r, 403, "forbidden")


@pytest.mark.parametrize("path", [r[1] for r in ADMIN_REQUESTS
                                  if r[0] == "GET"])
def test_admin_endpoints_answer_admins(world, path):
    r = world.api.get(world.api.base + path, timeout=TIMEOUT)
    assert r.status_code == 200, r.text


def test_key_list_never_shows_a_key(stack, api):
    project = make_project(api, "tk")
    k, _ = make_key(stack, api, project)
    r = api.get(f"{api.base}/v1/keys", timeout=TIMEOUT)
    assert r.status_code == 200
    assert k["key"] not in r.text
    for entry in r.json()["keys"]:
        assert set(entry) == {"id", "name", "project", "role", "created_at"}
    mine = [e for e in r.json()["keys"] if e["id"] == k["id"]]
    assert mine and mine[0]["project"] == project


def test_bad_project_and_key_requests(api):
    assert_error(api.post(f"{api.base}/v1/projects", json={"name": "Bad!"},
                          timeout=TIMEOUT), 400)
    assert_error(api.post(f"{api.base}/v1/projects", json={"name": "default"},
                          timeout=TIMEOUT), 409)
    for body in ({"project": "default", "role": "root", "name": "x"},
                 {"project": "no-such-project", "role": "member", "name": "x"},
                 {"role": "member", "name": "x"},
                 {"project": "default", "role": "member"},
                 {"project": "default", "name": "x", "extra": 1}):
        assert_error(api.post(f"{api.base}/v1/keys", json=body,
                              timeout=TIMEOUT), 400)
    assert_error(api.delete(f"{api.base}/v1/keys/999999999", timeout=TIMEOUT),
                 404)
    assert_error(api.put(f"{api.base}/v1/projects/no-such-project/quota",
                         json={"memory_mb": 1}, timeout=TIMEOUT), 404)
    for body in ({}, {"memory_mb": -1}, {"memory_mb": "1"}, {"nope": 1}):
        assert_error(api.put(f"{api.base}/v1/projects/default/quota",
                             json=body, timeout=TIMEOUT), 400)


def test_deleted_key_is_refused_on_the_next_request(stack, api, world):
    k, s = make_key(stack, api, world.project["a"])
    assert s.get(f"{s.base}/v1/sandboxes", timeout=TIMEOUT).status_code == 200
    r = api.delete(f"{api.base}/v1/keys/{k['id']}", timeout=TIMEOUT)
    assert r.status_code == 204, r.text
    assert_error(s.get(f"{s.base}/v1/sandboxes", timeout=TIMEOUT), 401)
    assert_error(api.delete(f"{api.base}/v1/keys/{k['id']}", timeout=TIMEOUT),
                 404)


def test_deleted_keys_streams_end(stack, api, world):
    k, s = make_key(stack, api, world.project["a"])
    sid = world.sandbox["a"]
    with s.post(f"{s.base}/v1/sandboxes/{sid}/exec",
                json={"cmd": ["sleep", "60"]},
                headers={"Accept": "text/event-stream"}, stream=True,
                timeout=TIMEOUT) as r:
        assert r.status_code == 200, r.text
        events = sse_events(r)
        assert next(events).name == "start"
        t0 = time.monotonic()
        assert api.delete(f"{api.base}/v1/keys/{k['id']}",
                          timeout=TIMEOUT).status_code == 204
        rest = list(events)
        took = time.monotonic() - t0
    assert took < 5, f"stream ran {took:.1f} s after its key was deleted"
    assert rest and rest[-1].name == "error", rest
    assert rest[-1].data["code"] == "unauthorized"


def test_deleted_keys_build_log_ends(stack, api, world):
    k, s = make_key(stack, api, world.project["a"])
    r = submit(s, unique("slow"), "FROM minimal\nRUN sleep 15\n")
    assert r.status_code == 202, r.text
    with s.get(f"{s.base}/v1/templates/builds/{r.json()['build_id']}/logs",
               headers={"Accept": "text/event-stream"}, stream=True,
               timeout=TIMEOUT) as logs:
        assert logs.status_code == 200
        events = sse_events(logs)
        assert next(events).name == "step"
        t0 = time.monotonic()
        assert api.delete(f"{api.base}/v1/keys/{k['id']}",
                          timeout=TIMEOUT).status_code == 204
        rest = list(events)
        took = time.monotonic() - t0
    assert took < 5, f"build log ran {took:.1f} s after its key was deleted"
    assert all(e.name != "status" for e in rest), rest
    assert rest and rest[-1].name == "error", rest
    assert rest[-1].data["code"] == "unauthorized"


def test_existing_rows_belong_to_default(stack, api):
    keys = api.get(f"{api.base}/v1/keys", params={"project": "default"},
                   timeout=TIMEOUT).json()["keys"]
    assert any(k["role"] == "admin" for k in keys)
    t = api.get(f"{api.base}/v1/templates/minimal", timeout=TIMEOUT).json()
    assert t["project"] == "default" and t["public"] is True
    r = create(api, timeout=60)
    assert r.status_code == 201, r.text
    assert r.json()["project"] == "default"
    api.delete(f"{api.base}/v1/sandboxes/{r.json()['id']}", timeout=TIMEOUT)


def test_migration_moves_existing_rows_to_default(stack):
    """Rows written under 001-003 are in project default after 004; done
    in a scratch schema of the stack's database."""
    schema = "mig_" + secrets.token_hex(4)
    sql = os.path.join(REPO, "core", "model", "sql")
    conn = f"host={stack.state}/run/pg dbname=airlock user=airlock"
    script = [f"CREATE SCHEMA {schema};", f"SET search_path = {schema};"]
    for f in ("001_init.sql", "002_vm.sql", "003_templates.sql"):
        script.append(open(os.path.join(sql, f)).read())
    script.append("""
INSERT INTO api_keys (name, key_hash, is_admin) VALUES
  ('old-admin', repeat('a', 64), true), ('old-user', repeat('b', 64), false);
INSERT INTO sandboxes (id, template, driver, state, memory_bytes, pids_max,
  cpu_shares, expires_at) VALUES ('old', 'minimal', 'ns', 'running', 1, 1, 1,
  now());
INSERT INTO template_builds (id, name, status) VALUES ('oldb', 'minimal',
  'succeeded');
""")
    script.append(open(os.path.join(sql, "004_tenancy.sql")).read())
    script.append("""
SELECT 'keys', string_agg(name || ':' || project || ':' || role, ','
  ORDER BY name) FROM api_keys;
SELECT 'sandboxes', string_agg(id || ':' || project, ',') FROM sandboxes;
SELECT 'templates', string_agg(name || ':' || project || ':' || public, ',')
  FROM templates;
SELECT 'builds', string_agg(id || ':' || project, ',') FROM template_builds;
""")
    script.append(f"DROP SCHEMA {schema} CASCADE;")
    p = subprocess.run(["psql", conn, "-X", "-q", "-tA", "-F", "|",
                        "-v", "ON_ERROR_STOP=1"], input="\n".join(script),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout
    got = dict(line.split("|", 1) for line in p.stdout.split("\n") if "|" in line)
    assert got["keys"] == "old-admin:default:admin,old-user:default:member"
    assert got["sandboxes"] == "old:default"
    assert got["templates"] == "minimal:default:true"
    assert got["builds"] == "oldb:default"


def test_cli_projects_and_keys(stack, api):
    import json
    name = unique("tcli")
    p = cli(stack, "project", "create", name)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["name"] == name
    p = cli(stack, "project", "ls")
    assert p.returncode == 0 and name in p.stdout
    p = cli(stack, "project", "quota", name, "running_sandboxes=3",
            "memory_mb=default", "cpus=2.5")
    assert p.returncode == 0, p.stderr
    q = json.loads(p.stdout)
    assert q["quota"]["running_sandboxes"] == 3
    assert q["quota"]["cpus"] == 2.5
    assert "memory_mb" in q["quota_defaults"]
    p = cli(stack, "key", "create", "--project", name, "--name", "ci")
    assert p.returncode == 0, p.stderr
    k = json.loads(p.stdout)
    assert k["role"] == "member" and k["key"].startswith("al_")
    p = cli(stack, "key", "ls", "--project", name)
    assert p.returncode == 0 and k["key"] not in p.stdout
    assert [x["id"] for x in json.loads(p.stdout)["keys"]] == [k["id"]]
    # The new key is a member: the admin commands are refused.
    env_key = dict(os.environ, AIRLOCK_URL=stack.base,
                   AIRLOCK_API_KEY=k["key"])
    p = subprocess.run([os.path.join(stack.build, "airlock"), "project",
                        "ls"], env=env_key, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    assert p.returncode == 1 and "403" in p.stderr, p.stderr
    p = cli(stack, "key", "rm", str(k["id"]))
    assert p.returncode == 0, p.stderr
    p = subprocess.run([os.path.join(stack.build, "airlock"), "ls"],
                       env=env_key, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    assert p.returncode == 1 and "401" in p.stderr, p.stderr
    assert cli(stack, "key", "create", "--project", name).returncode == 100


# ------------------------------------------------------------ quotas


def quota(api, project, **q):
    r = api.put(f"{api.base}/v1/projects/{project}/quota", json=q,
                timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


def delete_all(api, project):
    for sb in api.get(f"{api.base}/v1/sandboxes", params={"project": project},
                      timeout=TIMEOUT).json()["sandboxes"]:
        api.delete(f"{api.base}/v1/sandboxes/{sb['id']}", timeout=TIMEOUT)


def test_quota_defaults_and_reset(stack, api):
    project = make_project(api, "tqd")
    p = api.get(f"{api.base}/v1/projects/{project}", timeout=TIMEOUT).json()
    assert len(p["quota_defaults"]) == 7
    p = quota(api, project, memory_mb=1234)
    assert p["quota"]["memory_mb"] == 1234
    assert "memory_mb" not in p["quota_defaults"]
    p = quota(api, project, memory_mb=None)
    assert "memory_mb" in p["quota_defaults"]
    assert p["quota"]["memory_mb"] != 1234


def test_concurrent_creates_do_not_overshoot(stack, api):
    project = make_project(api, "tqc")
    k, s = make_key(stack, api, project)
    quota(api, project, running_sandboxes=2)
    try:
        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            rs = list(pool.map(lambda _: create(session(stack, k["key"]),
                                                timeout=120), range(32)))
        codes = sorted(r.status_code for r in rs)
        assert codes == [201, 201] + [429] * 30, [r.text for r in rs]
        e = assert_error(next(r for r in rs if r.status_code == 429), 429,
                         "quota_exceeded")
        assert e["message"] == "running sandboxes: 2 of 2"
        # A client in a burst is told when to look again (a sandbox's
        # end frees the place; core/model/project.h AL_QUOTA_RETRY_S).
        assert all(r.headers.get("Retry-After") == "5" for r in rs
                   if r.status_code == 429)
    finally:
        delete_all(api, project)
    # Deleted sandboxes free their places.
    r = create(s, timeout=60)
    assert r.status_code == 201, r.text
    delete_all(api, project)


def test_create_rate_has_retry_after(stack, api):
    project = make_project(api, "tqr")
    _, s = make_key(stack, api, project)
    quota(api, project, creates_per_minute=1)
    try:
        assert create(s, timeout=60).status_code == 201
        r = create(s, timeout=60)
        e = assert_error(r, 429, "quota_exceeded")
        assert e["message"] == "creates per minute: 1 of 1"
        assert 1 <= int(r.headers["Retry-After"]) <= 60
    finally:
        delete_all(api, project)


def test_memory_quota(stack, api):
    project = make_project(api, "tqm")
    _, s = make_key(stack, api, project)
    quota(api, project, memory_mb=300)
    try:
        assert create(s, memory_mb=200, timeout=60).status_code == 201
        e = assert_error(create(s, memory_mb=200, timeout=60), 429,
                         "quota_exceeded")
        assert e["message"] == "memory: 200 of 300 MiB in use, 200 MiB asked"
        assert create(s, memory_mb=100, timeout=60).status_code == 201
    finally:
        delete_all(api, project)


def test_disk_quota(stack, api):
    """A project's sandboxes' disk limits together (disk_mb) stay within
    its disk quota; a deleted sandbox gives its share back."""
    project = make_project(api, "tqd")
    _, s = make_key(stack, api, project)
    quota(api, project, disk_mb=300)
    try:
        r = create(s, disk_mb=200, timeout=60)
        assert r.status_code == 201, r.text
        e = assert_error(create(s, disk_mb=200, timeout=60), 429,
                         "quota_exceeded")
        assert e["message"] == "disk: 200 of 300 MiB in use, 200 MiB asked"
        assert create(s, disk_mb=100, timeout=60).status_code == 201
        d = s.delete(f"{s.base}/v1/sandboxes/{r.json()['id']}",
                     timeout=TIMEOUT)
        assert d.status_code in (200, 204), d.text
        assert create(s, disk_mb=200, timeout=60).status_code == 201
    finally:
        delete_all(api, project)


def test_cpu_quota(stack, api):
    """A project's live sandboxes' cpus together stay within its cpus
    quota (fractions to the thousandth); 429 with Retry-After past it; a
    deleted sandbox gives its share back."""
    project = make_project(api, "tqp")
    _, s = make_key(stack, api, project)
    p = quota(api, project, cpus=1.5)
    assert p["quota"]["cpus"] == 1.5
    assert "cpus" not in p["quota_defaults"]
    try:
        first = create(s, cpus=1, timeout=60)
        assert first.status_code == 201, first.text
        assert create(s, cpus=0.25, timeout=60).status_code == 201
        r = create(s, cpus=0.5, timeout=60)
        e = assert_error(r, 429, "quota_exceeded")
        assert e["message"] == "cpus: 1.25 of 1.5 in use, 0.5 asked"
        assert r.headers.get("Retry-After") == "5"
        # The default (1 CPU) counts too.
        e = assert_error(create(s, timeout=60), 429, "quota_exceeded")
        assert e["message"] == "cpus: 1.25 of 1.5 in use, 1 asked"
        assert create(s, cpus=0.25, timeout=60).status_code == 201
        d = s.delete(f"{s.base}/v1/sandboxes/{first.json()['id']}",
                     timeout=TIMEOUT)
        assert d.status_code in (200, 204), d.text
        assert create(s, timeout=60).status_code == 201
    finally:
        delete_all(api, project)
    # null: the operator's default (AIRLOCK_QUOTA_CPUS, 100) again.
    p = quota(api, project, cpus=None)
    assert p["quota"]["cpus"] == 100 and "cpus" in p["quota_defaults"]
    r = api.put(f"{api.base}/v1/projects/{project}/quota",
                json={"cpus": 0.0001}, timeout=TIMEOUT)
    assert "'cpus'" in assert_error(r, 400, "invalid_request")["message"]


def test_build_quota(stack, api):
    project = make_project(api, "tqb")
    _, s = make_key(stack, api, project)
    quota(api, project, concurrent_builds=0)
    e = assert_error(submit(s, unique("q"), "FROM minimal\n"), 429,
                     "quota_exceeded")
    assert e["message"] == "concurrent builds: 0 of 0"


def test_stream_quota(world):
    """Two slots: two streams hold one each (a stream taking more than
    its own would make the second fail), a third is refused."""
    api, s, sid = world.api, world.key["a"], world.sandbox["a"]
    quota(api, world.project["a"], concurrent_streams=2)
    started = [threading.Event(), threading.Event()]
    held = [{}, {}]

    def hold(i):
        with s.post(f"{s.base}/v1/sandboxes/{sid}/exec",
                    json={"cmd": ["sleep", "4"]},
                    headers={"Accept": "text/event-stream"}, stream=True,
                    timeout=TIMEOUT) as r:
            held[i]["status"] = r.status_code
            events = sse_events(r)
            if r.status_code == 200:
                held[i]["first"] = next(events).name
            started[i].set()
            held[i]["events"] = [e.name for e in events]

    threads = [threading.Thread(target=hold, args=(i,)) for i in range(2)]
    try:
        for t in threads:
            t.start()
        assert all(e.wait(30) for e in started)
        assert [h["status"] for h in held] == [200, 200], held
        r = s.post(f"{s.base}/v1/sandboxes/{sid}/exec", json={"cmd": ["true"]},
                   headers={"Accept": "text/event-stream"}, timeout=TIMEOUT)
        e = assert_error(r, 429, "quota_exceeded")
        assert e["message"] == "concurrent streams: 2 of 2"
        # A JSON exec is no stream.
        r = s.post(f"{s.base}/v1/sandboxes/{sid}/exec", json={"cmd": ["true"]},
                   headers={"Accept": "application/json"}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        for t in threads:
            t.join(30)
        assert all(h["events"][-1] == "exit" for h in held), held
        # The slots are free again.
        r = s.post(f"{s.base}/v1/sandboxes/{sid}/exec", json={"cmd": ["true"]},
                   headers={"Accept": "text/event-stream"}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
    finally:
        for t in threads:
            t.join(30)
        quota(api, world.project["a"], concurrent_streams=None)


def builder_of(build_id):
    """The pid of the airlock-builder running build_id (not its log
    streamer), or None."""
    for d in os.listdir("/proc"):
        if d.isdigit() and cmdline(d).split()[1:3] == ["--build", build_id]:
            return int(d)
    return None


def test_build_log_streams_hold_stream_leases(stack, api):
    """A build's log stream takes one of its project's stream slots, as
    an exec stream does, and gives it back once it ends: when its
    client leaves, and when the builder is killed under it."""
    project = make_project(api, "tbl")
    _, s = make_key(stack, api, project)
    r = create(s, timeout=120)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    sse = {"Accept": "text/event-stream"}

    def exec_stream():
        return s.post(f"{s.base}/v1/sandboxes/{sid}/exec",
                      json={"cmd": ["true"]}, headers=sse, timeout=TIMEOUT)

    quota(api, project, concurrent_streams=1)
    b = submit(s, unique("lease"), "FROM minimal\nRUN sleep 60\n")
    assert b.status_code == 202, b.text
    bid = b.json()["build_id"]
    url = f"{s.base}/v1/templates/builds/{bid}/logs"
    try:
        for end in ("client leaves", "builder killed"):
            with s.get(url, headers=sse, stream=True,
                       timeout=TIMEOUT) as logs:
                assert logs.status_code == 200, logs.text
                events = sse_events(logs)
                assert next(events).name == "step"
                # The one slot is the log stream's.
                e = assert_error(exec_stream(), 429, "quota_exceeded")
                assert e["message"] == "concurrent streams: 1 of 1"
                e = assert_error(s.get(url, headers=sse, timeout=TIMEOUT),
                                 429, "quota_exceeded")
                if end == "builder killed":
                    pid = builder_of(bid)
                    assert pid is not None, "no builder runs the build"
                    os.kill(pid, 9)
                    rest = list(events)
                    assert rest and rest[-1].name == "error", rest
            # Ended: the slot is free again.
            deadline = time.monotonic() + 10
            while True:
                r = exec_stream()
                if r.status_code == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert r.status_code == 200, f"after {end}: {r.text}"
    finally:
        pid = builder_of(bid)
        if pid is not None:
            os.kill(pid, 9)
        quota(api, project, concurrent_streams=None)
        s.delete(f"{s.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)


def test_request_maxima(api):
    e = assert_error(create(api, memory_mb=1024 * 1024), 400)
    assert "16384" in e["message"] and "AIRLOCK_MAX_MEMORY_MB" in e["message"]
