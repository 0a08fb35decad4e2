"""Health, authentication, templates, the sandbox resource and the error
shape, through nginx."""
import json
import uuid

import requests

from conftest import TIMEOUT, VM_MEMORY_MB, assert_error, parse_time

MISSING = "doesnotexist0000000x"


def test_health_needs_no_key(stack):
    r = requests.get(stack.url("/v1/health"), timeout=TIMEOUT)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json() == {"status": "ok"}


def test_health_over_https(stack):
    cert = f"{stack.state}/nginx/cert.pem"
    r = requests.get(f"https://localhost:{stack.https_port}/v1/health",
                     verify=cert, timeout=TIMEOUT)
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_no_key_is_401(stack):
    r = requests.get(stack.url("/v1/sandboxes"), timeout=TIMEOUT)
    assert_error(r, 401)


def test_wrong_key_is_401(stack):
    for headers in ({"Authorization": "Bearer " + "x" * 40},
                    {"X-API-Key": "not-the-key"},
                    {"Authorization": "Basic " + stack.key}):
        r = requests.get(stack.url("/v1/sandboxes"), headers=headers,
                         timeout=TIMEOUT)
        assert_error(r, 401)


def test_both_header_styles_work(stack):
    for headers in ({"Authorization": f"Bearer {stack.key}"},
                    {"X-API-Key": stack.key}):
        r = requests.get(stack.url("/v1/templates"), headers=headers,
                         timeout=TIMEOUT)
        assert r.status_code == 200, r.text


def test_wrong_key_everywhere(stack):
    h = {"X-API-Key": "wrong"}
    assert_error(requests.post(stack.url("/v1/sandboxes"), headers=h,
                               json={"template": "minimal"}, timeout=TIMEOUT), 401)
    assert_error(requests.post(stack.url(f"/v1/sandboxes/{MISSING}/exec"),
                               headers=h, json={"cmd": ["true"]},
                               timeout=TIMEOUT), 401)
    assert_error(requests.get(stack.url(f"/v1/sandboxes/{MISSING}/files"),
                              headers=h, params={"path": "/etc/passwd"},
                              timeout=TIMEOUT), 401)


def test_templates_list(api):
    r = api.get(api.base + "/v1/templates", timeout=TIMEOUT)
    assert r.status_code == 200
    names = [t["name"] for t in r.json()["templates"]]
    assert "minimal" in names


def test_info(api):
    r = api.get(api.base + "/v1/info", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    info = r.json()
    assert isinstance(info["drivers"], list) and "ns" in info["drivers"]
    assert set(info["drivers"]) <= {"ns", "vm"}, info
    assert info["default_driver"] in info["drivers"], info
    # The accelerator is reported where the vm driver can run.
    if "vm" in info["drivers"]:
        assert info["vm_accel"] in ("kvm", "tcg"), info


def test_create_get_delete(api, sandboxes, driver, info):
    r = api.post(api.base + "/v1/sandboxes",
                 json=sandboxes.body(timeout=300, env={},
                                     metadata={"owner": "it",
                                               "purpose": "crud"}),
                 timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    sb = r.json()
    sandboxes.ids.append(sb["id"])
    assert isinstance(sb["id"], str) and sb["id"]
    assert sb["state"] == "running"
    assert sb["template"] == "minimal"
    assert sb["driver"] == driver
    if driver == "vm":
        # Each vm sandbox says which accelerator its QEMU runs under:
        # the one the host's probe chose.
        assert sb["accel"] == info["vm_accel"], sb
    else:
        assert "accel" not in sb, sb
    assert sb["metadata"] == {"owner": "it", "purpose": "crud"}
    created = parse_time(sb["created_at"])
    expires = parse_time(sb["expires_at"])
    lifetime = (expires - created).total_seconds()
    assert 295 <= lifetime <= 305, lifetime
    assert "env" not in sb

    r = api.get(f"{api.base}/v1/sandboxes/{sb['id']}", timeout=TIMEOUT)
    assert r.status_code == 200
    got = r.json()
    for k in ("id", "state", "template", "driver", "created_at",
              "expires_at", "metadata"):
        assert got[k] == sb[k], k
    if driver == "vm":
        assert got["accel"] == sb["accel"]

    r = api.delete(f"{api.base}/v1/sandboxes/{sb['id']}", timeout=TIMEOUT)
    assert r.status_code == 204
    assert r.content == b""
    assert_error(api.get(f"{api.base}/v1/sandboxes/{sb['id']}",
                         timeout=TIMEOUT), 404)
    ids = [s["id"] for s in api.get(api.base + "/v1/sandboxes",
                                    timeout=TIMEOUT).json()["sandboxes"]]
    assert sb["id"] not in ids
    # Deleting again: it is gone.
    assert_error(api.delete(f"{api.base}/v1/sandboxes/{sb['id']}",
                            timeout=TIMEOUT), 404)


def test_create_defaults(sandboxes):
    sb = sandboxes.create()
    assert sb["state"] == "running"
    lifetime = (parse_time(sb["expires_at"]) -
                parse_time(sb["created_at"])).total_seconds()
    assert 295 <= lifetime <= 305  # default timeout 300 s
    assert sb["metadata"] == {}


def test_list_and_filters(api, sandboxes):
    tag = uuid.uuid4().hex[:12]
    a = sandboxes.create(metadata={"suite": tag, "role": "a"})
    b = sandboxes.create(metadata={"suite": tag, "role": "b"})

    r = api.get(api.base + "/v1/sandboxes", timeout=TIMEOUT)
    assert r.status_code == 200
    listed = {s["id"]: s for s in r.json()["sandboxes"]}
    assert a["id"] in listed and b["id"] in listed
    assert listed[a["id"]]["metadata"] == {"suite": tag, "role": "a"}

    r = api.get(api.base + "/v1/sandboxes",
                params={"metadata.suite": tag}, timeout=TIMEOUT)
    assert r.status_code == 200
    assert sorted(s["id"] for s in r.json()["sandboxes"]) == sorted(
        [a["id"], b["id"]])

    r = api.get(api.base + "/v1/sandboxes",
                params={"metadata.suite": tag, "metadata.role": "b"},
                timeout=TIMEOUT)
    assert [s["id"] for s in r.json()["sandboxes"]] == [b["id"]]

    r = api.get(api.base + "/v1/sandboxes",
                params={"state": "running", "metadata.suite": tag},
                timeout=TIMEOUT)
    assert len(r.json()["sandboxes"]) == 2
    assert all(s["state"] == "running" for s in r.json()["sandboxes"])

    r = api.get(api.base + "/v1/sandboxes",
                params={"state": "paused", "metadata.suite": tag},
                timeout=TIMEOUT)
    assert r.status_code == 200
    assert r.json()["sandboxes"] == []

    r = api.get(api.base + "/v1/sandboxes",
                params={"metadata.suite": "no-such-" + tag}, timeout=TIMEOUT)
    assert r.json()["sandboxes"] == []


def test_memory_limit(sandboxes, driver):
    if driver == "vm":
        # Guest RAM is the template snapshot's: every vm sandbox has
        # 256 MiB, asking for that is fine, asking for more or less is
        # refused rather than silently ignored.
        assert sandboxes.create()["memory_mb"] == VM_MEMORY_MB
        assert sandboxes.create(memory_mb=VM_MEMORY_MB)["memory_mb"] == \
            VM_MEMORY_MB
        for mb in (128, 512):
            r = sandboxes.api.post(sandboxes.api.base + "/v1/sandboxes",
                                   json=sandboxes.body(memory_mb=mb),
                                   timeout=TIMEOUT)
            if r.status_code == 201:
                sandboxes.ids.append(r.json()["id"])
            assert_error(r, 400, "invalid_request")
    else:
        assert sandboxes.create(memory_mb=300)["memory_mb"] == 300


def test_unknown_driver_is_400(api):
    # (null is "absent" everywhere in this API: the default driver.)
    for d in ("kvm", "", "NS", 1, ["vm"]):
        r = api.post(api.base + "/v1/sandboxes",
                     json={"template": "minimal", "driver": d},
                     timeout=TIMEOUT)
        if r.status_code == 201:
            api.delete(f"{api.base}/v1/sandboxes/{r.json()['id']}",
                       timeout=TIMEOUT)
        assert_error(r, 400, "invalid_request")


def test_default_driver(api, info):
    """A create without "driver" gets the host's default driver."""
    assert info is not None, "GET /v1/info failed"
    r = api.post(api.base + "/v1/sandboxes", json={"template": "minimal"},
                 timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    sb = r.json()
    api.delete(f"{api.base}/v1/sandboxes/{sb['id']}", timeout=TIMEOUT)
    assert sb["driver"] == info["default_driver"]


def test_bad_json_is_400(api):
    r = api.post(api.base + "/v1/sandboxes", data=b"{not json",
                 headers={"Content-Type": "application/json"},
                 timeout=TIMEOUT)
    assert_error(r, 400)
    r = api.post(api.base + "/v1/sandboxes", data=b"[1,2]",
                 headers={"Content-Type": "application/json"},
                 timeout=TIMEOUT)
    assert_error(r, 400)


def test_bad_fields_are_400(api):
    for body in ({"template": 5},
                 {"template": "minimal", "timeout": "soon"},
                 {"template": "minimal", "timeout": -1},
                 {"template": "minimal", "env": ["A=1"]},
                 {"template": "minimal", "env": {"A": 1}},
                 {"template": "minimal", "metadata": "x"}):
        r = api.post(api.base + "/v1/sandboxes", json=body, timeout=TIMEOUT)
        assert_error(r, 400)


def post_raw(api, path, body):
    """body as written: json= could not name a member twice."""
    return api.post(api.base + path, data=body.encode(),
                    headers={"Content-Type": "application/json",
                             "Accept": "application/json"},
                    timeout=TIMEOUT)


def assert_repeated(r, name):
    assert_error(r, 400, "invalid_request")
    msg = r.json()["error"]["message"]
    assert f"'{name}'" in msg and "repeated" in msg, msg


def test_repeated_members_are_400(api):
    """json-c keeps the last of two members, a layer in front may keep
    the first: a body naming one twice, at any depth, is refused."""
    for body, name in (
            ('{"template":"minimal","template":"no-such"}', "template"),
            ('{"template":"minimal","tem\u0070late":"x"}', "template"),
            ('{"template":"minimal","env":{"A":"1","A":"2"}}', "A"),
            ('{"template":"minimal","network":{"mode":"allowlist",'
             '"allow":[{"host":"a.test","host":"b.test"}]}}', "host")):
        assert_repeated(post_raw(api, "/v1/sandboxes", body), name)
    r = api.get(api.base + "/v1/sandboxes", timeout=TIMEOUT)
    assert r.status_code == 200
    # Admin bodies too: a project's quota, a key.
    r = api.post(api.base + "/v1/projects", json={"name": "dup-q"},
                 timeout=TIMEOUT)
    assert r.status_code in (201, 409), r.text
    r = api.put(api.base + "/v1/projects/dup-q/quota",
                data=b'{"memory_mb":1,"memory_mb":9999999}',
                headers={"Content-Type": "application/json"},
                timeout=TIMEOUT)
    assert_repeated(r, "memory_mb")
    r = post_raw(api, "/v1/keys",
                 '{"project":"dup-q","role":"member","role":"admin"}')
    assert_repeated(r, "role")


def test_many_objects_are_413(api):
    """json-c spends ~800 bytes on each object: a 1 MiB body of {} held
    a worker at ~270 MB; more than 4096 objects and arrays are 413."""
    body = '{"template":"minimal","env":[' + ",".join(["{}"] * 200000) + "]}"
    r = post_raw(api, "/v1/sandboxes", body)
    assert_error(r, 413, "too_large")
    assert "4096 objects and arrays" in r.json()["error"]["message"]
    # Brackets in strings are text, not objects.
    r = post_raw(api, "/v1/sandboxes",
                 '{"template":"minimal","metadata":{"k":"' + "{" * 1000 +
                 '"},"timeout":"x"}')
    assert_error(r, 400, "invalid_request")
    assert "timeout" in r.json()["error"]["message"]


def test_repeated_query_parameter_is_400(api):
    for q, name in (("state=running&state=error", "state"),
                    ("metadata.a=1&metadata.a=2", "metadata.a"),
                    ("project=x&proj%65ct=y", "project")):
        req = api.prepare_request(requests.Request("GET", api.base))
        req.url = f"{api.base}/v1/sandboxes?{q}"  # as written, not requoted
        assert_repeated(api.send(req, timeout=TIMEOUT), name)
    # Distinct parameters still filter.
    r = api.get(api.base + "/v1/sandboxes?state=running&metadata.a=1",
                timeout=TIMEOUT)
    assert r.status_code == 200, r.text


def test_exec_bad_fields_are_400(api, sandbox):
    url = f"{api.base}/v1/sandboxes/{sandbox['id']}/exec"
    for body in ({"cmd": "echo hi"}, {"cmd": []}, {"cmd": [1, 2]},
                 {"cmd": ["true"], "timeout": "x"},
                 {"cmd": ["true"], "env": {"A": 1}},
                 {"cmd": ["true"], "cwd": 7}):
        r = api.post(url, json=body, headers={"Accept": "application/json"},
                     timeout=TIMEOUT)
        assert_error(r, 400)
    r = api.post(url, data=b"{\"cmd\":", timeout=TIMEOUT)
    assert_error(r, 400)
    # Issue 23: this ran echo x (the last cmd).
    path = f"/v1/sandboxes/{sandbox['id']}/exec"
    assert_repeated(post_raw(api, path, '{"cmd":["id"],"cmd":["echo","x"]}'),
                    "cmd")
    assert_repeated(post_raw(api, path, '{"\\u0063md":["id"],'
                                        '"cmd":["echo","x"]}'), "cmd")


def test_unknown_template_is_404(api):
    r = api.post(api.base + "/v1/sandboxes",
                 json={"template": "no-such-template"}, timeout=TIMEOUT)
    assert_error(r, 404)


def test_unknown_sandbox_is_404_everywhere(api):
    base = f"{api.base}/v1/sandboxes/{MISSING}"
    assert_error(api.get(base, timeout=TIMEOUT), 404)
    assert_error(api.delete(base, timeout=TIMEOUT), 404)
    assert_error(api.post(base + "/exec", json={"cmd": ["true"]},
                          headers={"Accept": "application/json"},
                          timeout=TIMEOUT), 404)
    assert_error(api.post(base + "/exec", json={"cmd": ["true"]},
                          headers={"Accept": "text/event-stream"},
                          timeout=TIMEOUT), 404)
    assert_error(api.put(base + "/files", params={"path": "/x"}, data=b"x",
                         timeout=TIMEOUT), 404)
    assert_error(api.get(base + "/files", params={"path": "/x"},
                         timeout=TIMEOUT), 404)
    assert_error(api.get(base + "/files", params={"path": "/", "list": "1"},
                         timeout=TIMEOUT), 404)


def test_unknown_path_is_404(api):
    assert_error(api.get(api.base + "/v1/nothing-here", timeout=TIMEOUT), 404)


def test_oversize_json_is_413(api, sandbox):
    big = json.dumps({"template": "minimal",
                      "metadata": {"k": "x" * (4 << 20)}})
    r = api.post(api.base + "/v1/sandboxes", data=big,
                 headers={"Content-Type": "application/json"},
                 timeout=TIMEOUT)
    assert_error(r, 413)
    r = api.post(f"{api.base}/v1/sandboxes/{sandbox['id']}/exec",
                 data=json.dumps({"cmd": ["true"], "stdin": "y" * (4 << 20)}),
                 headers={"Accept": "application/json"}, timeout=TIMEOUT)
    assert_error(r, 413)


def test_forwarded_for_reaches_the_log(stack, api):
    """Behind another proxy, the client named in X-Forwarded-For is the
    one the operator sees in the API log."""
    import os
    import time
    marker = "203.0.113.77"
    r = api.get(api.base + "/v1/templates",
                headers={"X-Forwarded-For": marker}, timeout=TIMEOUT)
    assert r.status_code == 200
    log = os.path.join(stack.state, "log", "fcgi.log")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(log, errors="replace") as f:
            if any(marker in line and "/v1/templates" in line for line in f):
                return
        time.sleep(0.2)
    raise AssertionError(f"{marker} not in {log}")
