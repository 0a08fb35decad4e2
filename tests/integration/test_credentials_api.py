"""Credentials (issue 11, the store): /v1/credentials CRUD and its
validation, tenancy (a member key manages its project's credentials and
sees the global ones; another project's are answered like unknown ones;
only admins make or change global ones), the effective set of a sandbox
by scope precedence (through build*/cred-tool, which calls what the
controller's channel calls), master key rotation, the audit log, the env
placeholders a sandbox gets, and the value nowhere: not in an answer, a
log, a file of the state dir (keys/ aside: keys, not values) or a
pg_dump, where only its ciphertext is."""
import base64
import json
import os
import secrets
import subprocess
import threading
import time

import pytest
import requests

from conftest import TIMEOUT, Sandboxes, assert_error, exec_json
from test_templates import follow, submit
from test_tenancy import make_key, make_project


def secret():
    return "sekrit-" + secrets.token_hex(16)


def body(name, value, **kw):
    b = {"name": name, "value": value,
         "inject": {"hosts": ["api.example.test"],
                    "header": "Authorization",
                    "format": "Bearer {value}"}}
    b.update(kw)
    return b


def post(s, b):
    return s.post(f"{s.base}/v1/credentials", json=b, timeout=TIMEOUT)


def cred_url(s, ref):
    return f"{s.base}/v1/credentials/{ref}"


class World:
    def __init__(self, stack, api):
        self.stack = stack
        self.api = api
        self.project = {p: make_project(api, f"c{p}") for p in "ab"}
        self.key = {}
        self.key_id = {}
        for p in "ab":
            k, self.key[p] = make_key(stack, api, self.project[p])
            self.key_id[p] = k["id"]
        # Every value any test stored: none may show up anywhere.
        self.values = []

    def value(self):
        v = secret()
        self.values.append(v)
        return v

    def template_of_a(self):
        """A private template of project a (built once), not minimal."""
        if getattr(self, "_tmpl_a", None) is None:
            name = f"ctmpl-{secrets.token_hex(3)}"
            r = submit(self.key["a"], name, "FROM minimal\nENV C=1\n")
            assert r.status_code == 202, r.text
            ev = follow(self.key["a"], r.json()["build_id"], seconds=600)
            assert ev[-1].data["status"] == "succeeded", ev
            self._tmpl_a = name
        return self._tmpl_a


@pytest.fixture(scope="module")
def world(stack, api):
    return World(stack, api)


def all_answers_free(w, resp):
    for v in w.values:
        assert v not in resp.text, "a credential value in an API answer"


def test_create_list_get_rotate_delete(world):
    s = world.key["a"]
    v = world.value()
    r = post(s, body("github", v, rate_limit={"requests": 100,
                                               "per_seconds": 60}))
    assert r.status_code == 201, r.text
    c = r.json()
    all_answers_free(world, r)
    assert "value" not in c
    assert c["id"].startswith("cr_") and c["name"] == "github"
    assert c["project"] == world.project["a"]
    assert c["scope"] == {"project": True}
    assert c["inject"] == {"hosts": ["api.example.test"],
                           "header": "Authorization",
                           "format": "Bearer {value}"}
    assert c["rate_limit"] == {"requests": 100, "per_seconds": 60}
    assert c["version"] == 1

    r = s.get(f"{s.base}/v1/credentials", timeout=TIMEOUT)
    assert r.status_code == 200
    all_answers_free(world, r)
    assert c["id"] in [x["id"] for x in r.json()["credentials"]]

    for ref in ("github", c["id"]):
        r = s.get(cred_url(s, ref), timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        assert r.json() == c

    # The same (project, name, scope) again: 409.
    r = post(s, body("github", world.value()))
    assert_error(r, 409)

    v2 = world.value()
    r = s.put(cred_url(s, "github"), json={"value": v2}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    all_answers_free(world, r)
    assert r.json()["version"] == 2
    assert r.json()["inject"] == c["inject"]
    assert r.json()["rate_limit"] == c["rate_limit"]
    # A rotation may change the injection and drop the rate limit.
    r = s.put(cred_url(s, c["id"]),
              json={"value": v2, "rate_limit": None,
                    "inject": {"hosts": ["*.example.test"]}},
              timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["version"] == 3 and got["rate_limit"] is None
    assert got["inject"] == {"hosts": ["*.example.test"], "header": None,
                             "format": "{value}"}

    r = s.delete(cred_url(s, "github"), timeout=TIMEOUT)
    assert r.status_code == 204, r.text
    assert_error(s.get(cred_url(s, c["id"]), timeout=TIMEOUT), 404)
    assert_error(s.delete(cred_url(s, c["id"]), timeout=TIMEOUT), 404)


@pytest.mark.parametrize("bad,what", [
    ({"name": "Git Hub"}, "name"),
    ({"name": ""}, "name"),
    ({"name": "x" * 65}, "name"),
    ({"value": ""}, "value"),
    ({"value": "a\r\nX-Evil: 1"}, "value"),
    ({"value": None}, "value"),
    ({"inject": {"hosts": []}}, "hosts"),
    ({"inject": {"hosts": ["*"]}}, "hosts"),
    ({"inject": {"hosts": ["bad host"]}}, "hosts"),
    ({"inject": {"hosts": ["a.test"], "header": "Bad Header"}}, "header"),
    ({"inject": {"hosts": ["a.test"], "header": "Host"}}, "header"),
    ({"inject": {"hosts": ["a.test"], "format": "Bearer"}}, "format"),
    ({"inject": {"hosts": ["a.test"], "format": "{value}{value}"}},
     "format"),
    ({"inject": {"hosts": ["a.test"], "extra": 1}}, "extra"),
    ({"rate_limit": {"requests": 0, "per_seconds": 60}}, "rate_limit"),
    ({"rate_limit": {"requests": 10}}, "rate_limit"),
    ({"scope": {"template": "node", "project": True}}, "scope"),
    ({"scope": {"metadata": {}}}, "metadata"),
    ({"scope": {"sandbox": "Not An Id"}}, "sandbox"),
    ({"scope": {"galaxy": True}}, "scope"),
    ({"colour": "blue"}, "colour"),
])
def test_validation(world, bad, what):
    s = world.key["a"]
    v = world.value()
    b = body("valid-name", v)
    b.update(bad)
    r = post(s, b)
    assert_error(r, 400, "invalid_request")
    assert what in r.json()["error"]["message"]
    all_answers_free(world, r)


def test_body_size_limit(world):
    s = world.key["a"]
    r = post(s, body("big", "v" * (70 * 1024)))
    assert_error(r, 413)
    r = post(s, body("big", "v" * 9000))
    assert_error(r, 400)


def test_tenancy(world, api):
    a, b = world.key["a"], world.key["b"]
    r = post(a, body("tenant", world.value()))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    # Another project's key: exactly like an unknown one, and audited.
    for ref in (cid, "tenant"):
        assert_error(b.get(cred_url(b, ref), timeout=TIMEOUT), 404)
        assert_error(b.put(cred_url(b, ref), json={"value": "x"},
                           timeout=TIMEOUT), 404)
        assert_error(b.delete(cred_url(b, ref), timeout=TIMEOUT), 404)
    r = b.get(f"{b.base}/v1/credentials", timeout=TIMEOUT)
    assert cid not in [x["id"] for x in r.json()["credentials"]]
    r = b.get(f"{b.base}/v1/credentials?project={world.project['a']}",
              timeout=TIMEOUT)
    assert cid not in [x["id"] for x in r.json()["credentials"]]
    # A member names no other project and makes no global credential.
    r = post(b, body("x", world.value(), project=world.project["a"]))
    assert_error(r, 403)
    r = post(b, body("x", world.value(), scope={"global": True}))
    assert_error(r, 403)
    # Admins: global ones, and any project's.
    r = post(api, body("tenant-global", world.value(),
                       scope={"global": True}))
    assert r.status_code == 201, r.text
    g = r.json()
    assert g["project"] is None and g["scope"] == {"global": True}
    r = post(api, body("for-b", world.value(), project=world.project["b"]))
    assert r.status_code == 201 and r.json()["project"] == world.project["b"]
    assert_error(post(api, body("x", world.value(), project="no-such-proj")),
                 404, "not_found")
    # Members see the global one, cannot change it.
    r = b.get(cred_url(b, "tenant-global"), timeout=TIMEOUT)
    assert r.status_code == 200 and r.json()["id"] == g["id"]
    assert_error(b.put(cred_url(b, g["id"]), json={"value": "x"},
                       timeout=TIMEOUT), 403)
    assert_error(b.delete(cred_url(b, g["id"]), timeout=TIMEOUT), 403)
    assert api.get(cred_url(api, cid), timeout=TIMEOUT).status_code == 200
    r = api.get(f"{api.base}/v1/audit?credential={cid}", timeout=TIMEOUT)
    assert r.status_code == 200
    fails = [x for x in r.json()["audit"] if x["action"] == "failed_access"]
    assert len(fails) == 3, r.json()
    assert all(x["key_id"] == world.key_id["b"] and x["decision"] == "deny"
               for x in fails)
    r = api.get(f"{api.base}/v1/audit?credential=tenant", timeout=TIMEOUT)
    assert len([x for x in r.json()["audit"]
                if x["action"] == "failed_access"]) == 3
    # b's key sees the rows about its own project only.
    r = b.get(f"{b.base}/v1/audit", timeout=TIMEOUT)
    assert all(x["project"] == world.project["b"] for x in r.json()["audit"])
    r = a.get(f"{a.base}/v1/audit?credential=tenant", timeout=TIMEOUT)
    assert [x["action"] for x in r.json()["audit"]] == ["create"]


def effective(stack, sid):
    env = dict(stack.env)
    env["AIRLOCK_DB"] = (f"host={stack.state}/run/pg dbname=airlock"
                         " user=airlock")
    p = subprocess.run([os.path.join(stack.build, "cred-tool"), "effective",
                        sid], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    return {c["name"]: c for c in json.loads(p.stdout)["creds"]}


def test_scope_must_exist_and_be_seen(world, api):
    """A sandbox or template scope names what the credential's project
    sees, else 404 like any reference to another project's object
    (issue 23: these were 201 and never applied)."""
    a, b = world.key["a"], world.key["b"]
    sbs = Sandboxes(a, "ns")
    try:
        mine = sbs.create(timeout=600)["id"]
        tmpl = world.template_of_a()
        for key, scope in ((b, {"sandbox": mine}),
                           (a, {"sandbox": "nosuchsandbox0000000"}),
                           (b, {"template": tmpl}),
                           (a, {"template": "no-such-template"})):
            r = post(key, body("scoped", world.value(), scope=scope))
            assert_error(r, 404, "not_found")
        # An admin's credential for b: a's sandbox is not b's either.
        r = post(api, body("scoped", world.value(), scope={"sandbox": mine},
                           project=world.project["b"]))
        assert_error(r, 404, "not_found")
        # What the project sees: its sandbox, its template, a public one.
        for scope in ({"sandbox": mine}, {"template": tmpl},
                      {"template": "minimal"}):
            r = post(a, body(f"scoped-{secrets.token_hex(3)}", world.value(),
                             scope=scope))
            assert r.status_code == 201, r.text
            assert r.json()["scope"] == scope
    finally:
        sbs.cleanup()


def test_precedence_env_and_rotation(world, stack, api):
    s = world.key["a"]
    proj = world.project["a"]
    tmpl = "minimal"
    # "prec" at each level; "solo" only globally; "other" for another
    # template; "other-proj" in b.
    vals = {k: world.value() for k in
            ("global", "project", "template", "metadata", "metadata2",
             "sandbox", "solo", "other", "otherproj")}
    assert post(api, body("prec", vals["global"],
                          scope={"global": True})).status_code == 201
    assert post(api, body("solo", vals["solo"],
                          scope={"global": True})).status_code == 201
    assert post(s, body("prec", vals["project"])).status_code == 201
    assert post(s, body("prec", vals["template"],
                        scope={"template": tmpl})).status_code == 201
    assert post(s, body("prec", vals["metadata"],
                        scope={"metadata": {"team": "x"}})).status_code == 201
    assert post(s, body("prec", vals["metadata2"],
                        scope={"metadata": {"team": "x", "env": "ci"}})
                ).status_code == 201
    assert post(s, body("tmpl-only", vals["other"],
                        scope={"template": world.template_of_a()})
                ).status_code == 201
    assert post(world.key["b"], body("b-only", vals["otherproj"])
                ).status_code == 201

    sbs = Sandboxes(s, "ns")
    try:
        plain = sbs.create(timeout=600)
        meta = sbs.create(timeout=600, metadata={"team": "x", "env": "ci"},
                          env={"AIRLOCK_CRED_PREC": "mine"})
        got = effective(stack, plain["id"])
        # Other tests' credentials of the project apply as well.
        assert {"prec", "solo"} <= set(got)
        assert "tmpl-only" not in got and "b-only" not in got
        assert got["prec"]["value"] == vals["template"]
        assert got["prec"]["scope"] == "template"
        assert got["solo"]["value"] == vals["solo"]
        assert got["solo"]["scope"] == "global"
        got = effective(stack, meta["id"])
        # The metadata match with more keys wins.
        assert got["prec"]["value"] == vals["metadata2"]
        assert got["prec"]["hosts"] == ["api.example.test"]
        assert got["prec"]["header"] == "Authorization"
        assert got["prec"]["format"] == "Bearer {value}"
        # Scope "sandbox" for that one id beats everything.
        r = post(s, body("prec", vals["sandbox"],
                         scope={"sandbox": meta["id"]}))
        assert r.status_code == 201, r.text
        assert effective(stack, meta["id"])["prec"]["value"] == \
            vals["sandbox"]
        assert effective(stack, plain["id"])["prec"]["value"] == \
            vals["template"]

        # Placeholders in the environment, never the value; the
        # request's own AIRLOCK_CRED_PREC is replaced.
        for sb in (plain, meta):
            out = exec_json(s, sb["id"], ["env"])["stdout"]
            assert "AIRLOCK_CRED_PREC=airlock-cred:prec\n" in out
            assert "AIRLOCK_CRED_SOLO=airlock-cred:solo\n" in out
            assert "B_ONLY" not in out and "TMPL_ONLY" not in out
            for v in world.values:
                assert v not in out
        r = s.get(f"{s.base}/v1/sandboxes/{meta['id']}", timeout=TIMEOUT)
        all_answers_free(world, r)

        # Master key rotation while the stack runs: every value still
        # opens, sealed with the new key; the old key file goes.
        keys = os.path.join(stack.state, "keys")
        before = sorted(f for f in os.listdir(keys) if f.startswith("master"))
        p = stack_controller(stack, "--rotate-master-key")
        assert p.returncode == 0, p.stdout
        after = sorted(f for f in os.listdir(keys) if f.startswith("master"))
        assert len(after) == 1 and after != before, (before, after)
        assert oct(os.stat(os.path.join(keys, after[0])).st_mode & 0o777) \
            == "0o600"
        got = effective(stack, meta["id"])
        assert got["prec"]["value"] == vals["sandbox"]
        assert got["solo"]["value"] == vals["solo"]
        r = s.get(f"{s.base}/v1/credentials", timeout=TIMEOUT)
        n = int(after[0].split("-")[1].split(".")[0])
        assert {c["master_key"] for c in r.json()["credentials"]} == {n}
        # Written after the rotation: sealed with the new key too.
        v = world.value()
        own = [c for c in r.json()["credentials"] if c["project"]]
        r = s.put(cred_url(s, own[0]["id"]), json={"value": v},
                  timeout=TIMEOUT)
        assert r.status_code == 200 and r.json()["master_key"] == n
    finally:
        sbs.cleanup()


def stack_controller(stack, *args):
    env = dict(stack.env)
    env["AIRLOCK_DB"] = (f"host={stack.state}/run/pg dbname=airlock"
                         " user=airlock")
    env.setdefault("AIRLOCK_SQL_DIR", os.path.join(
        os.path.dirname(__file__), "..", "..", "core", "model", "sql"))
    env.setdefault("AIRLOCK_LIBEXEC", stack.build)
    return subprocess.run([os.path.join(stack.build, "airlock-controller"),
                           *args], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120,
                          env=env)


def test_audit_filters_and_paging(world, api):
    s = world.key["a"]
    t0 = int(time.time()) - 1
    names = [f"aud-{i}" for i in range(5)]
    for n in names:
        assert post(s, body(n, world.value())).status_code == 201
    assert s.put(cred_url(s, "aud-0"), json={"value": world.value()},
                 timeout=TIMEOUT).status_code == 200
    assert s.delete(cred_url(s, "aud-1"), timeout=TIMEOUT).status_code == 204
    r = s.get(f"{s.base}/v1/audit?credential=aud-0", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    rows = r.json()["audit"]
    assert [x["action"] for x in rows] == ["rotate", "create"]
    assert all(x["key_id"] == world.key_id["a"] and
               x["project"] == world.project["a"] for x in rows)
    r = s.get(f"{s.base}/v1/audit?credential=aud-1", timeout=TIMEOUT)
    assert [x["action"] for x in r.json()["audit"]] == ["delete", "create"]
    # Paged newest first, two at a time, since t0.
    seen, before = [], ""
    for _ in range(10):
        r = s.get(f"{s.base}/v1/audit", params={"since": str(t0),
                                                "limit": 2,
                                                "before": before},
                  timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["audit"]) <= 2
        seen += page["audit"]
        if page["next"] is None:
            break
        before = page["next"]
    mine = [x for x in seen if (x["credential"] or "").startswith("aud-")]
    assert len(mine) == 7, mine
    assert [x["id"] for x in seen] == sorted((x["id"] for x in seen),
                                             reverse=True)
    future = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                           time.gmtime(time.time() + 3600))
    r = s.get(f"{s.base}/v1/audit?since={future}", timeout=TIMEOUT)
    assert r.status_code == 200 and r.json()["audit"] == []
    assert_error(s.get(f"{s.base}/v1/audit?since=yesterday",
                       timeout=TIMEOUT), 400)
    assert_error(s.get(f"{s.base}/v1/audit?before=nonsense",
                       timeout=TIMEOUT), 400)
    assert_error(s.get(f"{s.base}/v1/audit?colour=1", timeout=TIMEOUT), 400)
    # Admin: every project's rows, or one project's.
    r = api.get(f"{api.base}/v1/audit?project={world.project['b']}",
                timeout=TIMEOUT)
    assert all(x["project"] == world.project["b"] for x in r.json()["audit"])


def run_cli(stack, *args, stdin=None):
    env = dict(os.environ, AIRLOCK_URL=stack.base, AIRLOCK_API_KEY=stack.key)
    return subprocess.run([os.path.join(stack.build, "airlock"), *args],
                          input=stdin, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)


def test_cli(world, stack, tmp_path):
    v = world.value()
    p = run_cli(stack, "credential", "create", "cli-cred", "--host",
                "a.example.test", "--host", "*.b.example.test", "--header",
                "X-Token", "--scope", "metadata:team=x,env=ci", "--rate",
                "5/10", "--project", world.project["a"], stdin=v + "\n")
    assert p.returncode == 0, p.stderr
    c = json.loads(p.stdout)
    assert c["scope"] == {"metadata": {"team": "x", "env": "ci"}}
    assert c["inject"]["hosts"] == ["a.example.test", "*.b.example.test"]
    assert c["rate_limit"] == {"requests": 5, "per_seconds": 10}
    assert v not in p.stdout + p.stderr
    f = tmp_path / "v"
    v2 = world.value()
    f.write_text(v2)
    p = run_cli(stack, "credential", "rotate", c["id"], "--value-file",
                str(f), "--rate", "none")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["version"] == 2
    assert json.loads(p.stdout)["rate_limit"] is None
    p = run_cli(stack, "credential", "show", c["id"])
    assert p.returncode == 0 and json.loads(p.stdout)["id"] == c["id"]
    p = run_cli(stack, "credential", "ls", "--project", world.project["a"])
    assert c["id"] in p.stdout and v2 not in p.stdout
    p = run_cli(stack, "audit", "--credential", "cli-cred", "--limit", "5")
    assert p.returncode == 0, p.stderr
    assert [x["action"] for x in json.loads(p.stdout)["audit"]] == \
        ["rotate", "create"]
    p = run_cli(stack, "credential", "delete", c["id"])
    assert p.returncode == 0, p.stderr
    p = run_cli(stack, "credential", "show", c["id"])
    assert p.returncode == 1 and "404" in p.stderr
    p = run_cli(stack, "credential", "create", "x", "--host", "a.test",
                stdin="")
    assert p.returncode != 0


def psql(stack, sql):
    p = subprocess.run(["psql", "-h", f"{stack.state}/run/pg", "-U", "airlock",
                        "-d", "airlock", "-At", "-c", sql],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_audit_retention(world, stack):
    """The controller deletes rows older than AIRLOCK_AUDIT_RETENTION_DAYS
    (90 by default) on its reconcile clock, and keeps younger ones."""
    tag = secrets.token_hex(4)
    psql(stack, "INSERT INTO audit_log (at, action, credential) VALUES"
         f" (now() - interval '91 days', 'use', 'old-{tag}'),"
         f" (now() - interval '89 days', 'use', 'young-{tag}')")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        left = psql(stack, "SELECT credential FROM audit_log WHERE"
                    f" credential LIKE '%-{tag}' ORDER BY 1")
        if left == f"young-{tag}":
            break
        time.sleep(1)
    assert left == f"young-{tag}"


def encodings(v):
    return [v.encode(), base64.b64encode(v.encode()),
            v.encode().hex().encode()]


def test_rotation_under_concurrent_puts(world, stack):
    """PUTs that rotate values while `--rotate-master-key` runs, three
    credentials one writer each and a fourth with four writers at once:
    every PUT answers 200; each single-writer credential ends with the
    value of its last PUT, the shared one with one of the values PUT;
    all are sealed with a key that still exists and open (cred-tool
    reads them as the gateway's channel would)."""
    s = world.key["a"]
    names = [f"conc{i}" for i in range(4)]
    ids = {}
    for n in names:
        r = post(s, body(n, world.value()))
        assert r.status_code == 201, r.text
        ids[n] = r.json()["id"]
    last = {}
    statuses = []
    stop = threading.Event()

    def writer(n, w):
        while not stop.is_set():
            v = world.value()
            r = s.put(cred_url(s, ids[n]), json={"value": v},
                      timeout=TIMEOUT)
            statuses.append(r.status_code)
            if r.status_code == 200:
                last[(n, w)] = v

    jobs = [(n, 0) for n in names] + [(names[3], w) for w in (1, 2, 3)]
    threads = [threading.Thread(target=writer, args=j) for j in jobs]
    for t in threads:
        t.start()
    try:
        p = stack_controller(stack, "--rotate-master-key")
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert p.returncode == 0, p.stdout
    assert len(statuses) > 20 and set(statuses) == {200}, \
        (len(statuses), set(statuses))
    keys = os.path.join(stack.state, "keys")
    have = {int(f.split("-")[1].split(".")[0]) for f in os.listdir(keys)
            if f.startswith("master")}
    r = s.get(f"{s.base}/v1/credentials", timeout=TIMEOUT)
    used = {c["master_key"] for c in r.json()["credentials"]
            if c["name"] in names}
    assert used <= have, (used, have)
    sbs = Sandboxes(s, "ns")
    try:
        got = effective(stack, sbs.create(timeout=600)["id"])
    finally:
        sbs.cleanup()
    for n in names[:3]:
        assert got[n]["value"] == last[(n, 0)], n
    assert got[names[3]]["value"] in {last[(names[3], w)] for w in range(4)}


def test_zz_value_nowhere(world, stack, tmp_path):
    """Last: every value any test stored, in no file of the state dir but
    the keys (logs, nginx temp files, PostgreSQL's data and WAL, the
    pool), and a pg_dump shows ciphertext only."""
    assert world.values
    needles = [e for v in world.values for e in encodings(v)]
    pattern = tmp_path / "needles"
    pattern.write_bytes(b"\n".join(needles) + b"\n")
    # grep -F matches every needle in one pass; keys/ holds keys, not
    # values. Not -a: on a file it takes for binary, grep still matches
    # (byte-wise, under LC_ALL=C) but skips its holes, and the pool image
    # is a 16 GiB sparse file (-a read every zero of it: 8 minutes here).
    p = subprocess.run(["grep", "-rlF", "-D", "skip", "--exclude-dir=keys",
                        "-f", str(pattern), stack.state],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env={**os.environ, "LC_ALL": "C"}, timeout=1200)
    assert p.stdout == b"", p.stdout
    # Only files that went while grep walked may fail to open, and the
    # network slots' namespace mounts (run/net/<i>.gw|guest) hold no data.
    netns = os.path.join(stack.state, "run", "net") + "/"
    errs = [x for x in p.stderr.decode().splitlines()
            if "No such file or directory" not in x and
            not (x.startswith("grep: " + netns) and
                 x.endswith("Invalid argument"))]
    assert p.returncode in (1, 2) and errs == [], (p.returncode, errs)
    # grep got as far as every file: the logs at the least were read.
    logs = os.listdir(os.path.join(stack.state, "log"))
    assert "fcgi.log" in logs, logs
    dump = subprocess.run(
        ["pg_dump", "-h", f"{stack.state}/run/pg", "-U", "airlock",
         "-d", "airlock", "--data-only", "-t", "credentials"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert dump.returncode == 0, dump.stderr
    assert b"COPY public.credentials" in dump.stdout
    assert b"\\\\x" in dump.stdout  # the ciphertexts, as bytea hex
    for n in needles:
        assert n not in dump.stdout


def test_env_placeholder_each_driver(world, sandboxes):
    """Both drivers: the placeholder in the sandbox's environment (a cold
    start or a claimed standby alike), never the value."""
    s = world.key["a"]
    v = world.value()
    name = f"drv-{sandboxes.driver}"
    r = post(s, body(name, v, scope={"metadata": {"drv": sandboxes.driver}}))
    assert r.status_code == 201, r.text
    sandboxes.api = s
    sb = sandboxes.create(timeout=600, metadata={"drv": sandboxes.driver})
    out = exec_json(s, sb["id"], ["env"])["stdout"]
    var = "AIRLOCK_CRED_DRV_" + sandboxes.driver.upper()
    assert f"{var}=airlock-cred:{name}\n" in out
    assert v not in out

