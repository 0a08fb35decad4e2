"""Template builds through the API and the CLI (issue 4): POST
/v1/templates (multipart), the build log as SSE, sandboxes of the built
template, the layer cache, errors that name the Airlockfile line, and
deletion that is refused while the template is in use."""
import io
import json
import os
import signal
import socket
import subprocess
import tarfile
import threading
import time
import uuid

import pytest

from conftest import (TIMEOUT, Sandboxes, assert_error, cmdline, exec_json,
                      listener_pid, open_stream, pid_alive, sse_events)

APP = """FROM minimal
ENV GREETING="hello world" MODE=test
WORKDIR /app
COPY hello.sh /app/hello.sh
COPY conf/ /etc/app/
RUN ["/bin/sh", "-c", "chmod 0755 /app/hello.sh && echo built > /app/stamp"]
USER nobody
START sh -c "echo started > /tmp/started; exec sleep 100000"
READY test -f /tmp/started
"""

HELLO = '#!/bin/sh\necho "$GREETING from $(id -u) in $(pwd)"\n'


def tar_of(files):
    """A tar (bytes) of {relative path: text}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def submit(api, name, airlockfile, files=None, no_cache=False, context=None):
    """POST /v1/templates; the context is files ({path: text}) or
    context (a tar, bytes)."""
    parts = {"name": (None, name), "airlockfile": (None, airlockfile)}
    if files is not None:
        context = tar_of(files)
    if context is not None:
        parts["context"] = ("context.tar", context, "application/x-tar")
    if no_cache:
        parts["no_cache"] = (None, "true")
    # A large context takes a loaded host a while to take in.
    timeout = TIMEOUT if context is None or len(context) < (16 << 20) \
        else (5, 900)
    return api.post(f"{api.base}/v1/templates", files=parts, timeout=timeout)


def follow(api, build_id, seconds=600, logs=None):
    """The build's log events until its status event; logs: the log's
    path, if not the plain one."""
    logs = logs or f"/v1/templates/builds/{build_id}/logs"
    r = api.get(api.base + logs,
                headers={"Accept": "text/event-stream"}, stream=True,
                timeout=(5, seconds))
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/event-stream")
    events = []
    for ev in sse_events(r):
        events.append(ev)
        if ev.name == "status" and ev.data.get("status") in (
                "succeeded", "failed"):
            break
    r.close()
    assert events and events[-1].name == "status", events
    return events


def build(api, name, airlockfile, files=None, no_cache=False, context=None):
    r = submit(api, name, airlockfile, files, no_cache, context)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["name"] == name and body["build_id"]
    return body["build_id"], follow(api, body["build_id"])


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def delete_template(api, name):
    r = api.delete(f"{api.base}/v1/templates/{name}", timeout=TIMEOUT)
    assert r.status_code in (204, 404), r.text


class Templates:
    """Builds templates for one test and, afterwards, deletes their
    sandboxes and then them (a template in use cannot go), so that no
    template keeps warm-pool standbys busy for the rest of the run."""

    def __init__(self, api, driver):
        self.api = api
        self.names = []
        self.sandboxes = Sandboxes(api, driver)

    def build(self, prefix, airlockfile, files=None, no_cache=False,
              name=None):
        name = name or unique(prefix)
        if name not in self.names:
            self.names.append(name)
        bid, events = build(self.api, name, airlockfile, files, no_cache)
        return name, events

    def cleanup(self):
        self.sandboxes.cleanup()
        for name in self.names:
            delete_template(self.api, name)


@pytest.fixture
def templates(api):
    """Templates of one test; its sandboxes use the host's default
    driver unless the test sets templates.sandboxes.driver."""
    t = Templates(api, None)
    yield t
    t.cleanup()


@pytest.fixture(scope="module")
def app(api):
    """The APP template, built once for the module."""
    name = unique("app")
    bid, events = build(api, name, APP, {"hello.sh": HELLO,
                                         "conf/app.conf": "k=v\n"})
    status = events[-1].data
    assert status["status"] == "succeeded", events
    yield name, bid, events
    delete_template(api, name)


def test_build_log_streams_steps_and_status(app):
    _, _, events = app
    steps = [e.data for e in events if e.name == "step"]
    assert [s["step"] for s in steps] == list(range(1, len(steps) + 1))
    assert all(s["steps"] == len(steps) for s in steps)
    assert steps[0]["text"].startswith("FROM minimal")
    assert any(s["text"].startswith("RUN") and s["line"] == 6 for s in steps)
    assert events[-1].data["version"] >= 1


def test_template_details(api, app):
    name, _, _ = app
    r = api.get(f"{api.base}/v1/templates/{name}", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    t = r.json()
    assert t["name"] == name and t["version"] >= 1
    assert t["env"] == {"GREETING": "hello world", "MODE": "test"}
    assert t["workdir"] == "/app" and t["user"] == "nobody"
    assert t["start"][:2] == ["/bin/sh", "-c"]
    assert t["ready"] == ["/bin/sh", "-c", "test -f /tmp/started"]
    listed = api.get(f"{api.base}/v1/templates", timeout=TIMEOUT).json()
    assert name in [x["name"] for x in listed["templates"]]


def test_sandbox_of_built_template(api, app, sandboxes):
    name, _, _ = app
    sb = sandboxes.create(template=name)
    assert sb["template"] == name and sb["template_version"] >= 1
    res = exec_json(api, sb["id"], ["/app/hello.sh"])
    # ENV, WORKDIR and USER of the Airlockfile apply to every command.
    assert res["stdout"] == "hello world from 65534 in /app\n", res
    res = exec_json(api, sb["id"], ["sh", "-c",
                                    "cat /app/stamp /etc/app/app.conf; "
                                    "cat /tmp/started; "
                                    "ps | grep -c '[s]leep 100000'"])
    # RUN's and COPY's results, and START ran before READY let it through.
    assert res["stdout"] == "built\nk=v\nstarted\n1\n", res
    # A command may still choose its own cwd and user.
    res = exec_json(api, sb["id"], ["sh", "-c", "pwd; id -u"], cwd="/tmp",
                    user="root")
    assert res["stdout"] == "/tmp\n0\n"


def test_rebuild_is_cached(api, app):
    name, _, _ = app
    t0 = time.monotonic()
    bid, events = build(api, name, APP, {"hello.sh": HELLO,
                                         "conf/app.conf": "k=v\n"})
    seconds = time.monotonic() - t0
    assert events[-1].data["status"] == "succeeded", events
    fs_steps = [e.data for e in events if e.name == "step"
                and e.data["text"].split()[0] in ("RUN", "COPY")]
    assert fs_steps and all(s["cached"] for s in fs_steps), fs_steps
    # No command ran again.
    assert not [e for e in events if e.name == "output"]
    assert seconds < 60, seconds


def test_no_cache_rebuilds(api, app):
    name, _, _ = app
    _, events = build(api, name, APP, {"hello.sh": HELLO,
                                       "conf/app.conf": "k=v\n"},
                      no_cache=True)
    assert events[-1].data["status"] == "succeeded"
    runs = [e.data for e in events if e.name == "step"
            and e.data["text"].startswith("RUN")]
    assert runs and not any(s["cached"] for s in runs)


def test_sandboxes_keep_their_version(api, templates, driver):
    templates.sandboxes.driver = driver
    files = {"hello.sh": HELLO, "conf/app.conf": "k=v\n"}
    name, events = templates.build("ver", APP, files)
    assert events[-1].data["status"] == "succeeded"
    old = templates.sandboxes.create(template=name)
    changed = APP.replace("hello world", "hello again")
    _, events = templates.build("ver", changed, files, name=name)
    assert events[-1].data["status"] == "succeeded"
    new = templates.sandboxes.create(template=name)
    assert new["template_version"] > old["template_version"]
    assert exec_json(api, old["id"], ["sh", "-c", "echo $GREETING"]
                     )["stdout"] == "hello world\n"
    assert exec_json(api, new["id"], ["sh", "-c", "echo $GREETING"]
                     )["stdout"] == "hello again\n"


def test_delete_refused_while_in_use(api, templates, driver):
    templates.sandboxes.driver = driver
    name, events = templates.build("del", "FROM minimal\nRUN true\n")
    assert events[-1].data["status"] == "succeeded"
    sb = templates.sandboxes.create(template=name)
    r = api.delete(f"{api.base}/v1/templates/{name}", timeout=TIMEOUT)
    assert_error(r, 409)
    assert api.delete(f"{api.base}/v1/sandboxes/{sb['id']}",
                      timeout=TIMEOUT).status_code == 204
    r = api.delete(f"{api.base}/v1/templates/{name}", timeout=TIMEOUT)
    assert r.status_code == 204, r.text
    assert_error(api.get(f"{api.base}/v1/templates/{name}", timeout=TIMEOUT),
                 404)
    r = api.post(f"{api.base}/v1/sandboxes", json={"template": name},
                 timeout=TIMEOUT)
    assert_error(r, 404)


def test_failing_run_names_its_line_and_leaves_no_template(api, templates):
    name, events = templates.build("fail",
                      "FROM minimal\nENV A=1\nRUN echo before; exit 3\n"
                      "RUN echo never\n")
    status = events[-1].data
    assert status["status"] == "failed"
    assert status["line"] == 3
    out = "".join(e.data.get("data", "") for e in events
                  if e.name == "output")
    assert "before" in out and "never" not in out
    assert_error(api.get(f"{api.base}/v1/templates/{name}", timeout=TIMEOUT),
                 404)


@pytest.mark.parametrize("airlockfile,line", [
    ("FROM minimal\nRUN true\nFROBNICATE x\n", 3),
    ("FROM minimal\nCOPY ../etc/passwd /x\n", 2),
    ("FROM minimal\nCOPY /etc/passwd /x\n", 2),
    ("RUN true\n", 1),
    ("FROM no-such-template-here\n", 1),
])
def test_invalid_airlockfile_is_400_naming_the_line(api, airlockfile, line):
    r = submit(api, unique("bad"), airlockfile, {"x": "y"})
    err = assert_error(r, 400)
    assert f"line {line}" in err["message"], err


@pytest.mark.parametrize("name", ["builds", "Bad", "-x", "a" * 64, "a/b"])
def test_bad_template_name_is_400(api, name):
    assert_error(submit(api, name, "FROM minimal\n"), 400)


def test_malformed_multipart_is_400(api):
    r = api.post(f"{api.base}/v1/templates", data=b"--x\r\nnope",
                 headers={"Content-Type": "multipart/form-data; boundary=x"},
                 timeout=TIMEOUT)
    assert_error(r, 400)
    r = api.post(f"{api.base}/v1/templates", json={"name": "x"},
                 timeout=TIMEOUT)
    assert_error(r, 400)


def test_run_cannot_reach_the_host(api, templates):
    """A RUN step is a sandbox like any other: the host's loopback is not
    its loopback, and nothing else is routed."""
    seen = []
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                seen.append(conn)
            except OSError:
                pass

    t = threading.Thread(target=accept)
    t.start()
    try:
        _, events = templates.build(
            "net", f"FROM minimal\nRUN nc -w 3 127.0.0.1 {port} </dev/null\n")
    finally:
        stop.set()
        t.join()
        srv.close()
    assert events[-1].data["status"] == "failed", events
    assert events[-1].data["line"] == 2
    assert seen == []


def test_unknown_build_is_404(api):
    assert_error(api.get(f"{api.base}/v1/templates/builds/nosuchbuild",
                         timeout=TIMEOUT), 404)
    assert_error(api.get(f"{api.base}/v1/templates/builds/nosuchbuild/logs",
                         timeout=TIMEOUT), 404)


def cli(stack, *args):
    env = dict(os.environ, AIRLOCK_URL=stack.base,
               AIRLOCK_API_KEY=stack.key or "")
    return subprocess.run([os.path.join(stack.build, "airlock"), *args],
                          env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=600)


def test_cli_build_shows_progress_and_output(stack, api, tmp_path):
    d = tmp_path / "clitpl"
    d.mkdir()
    (d / "Airlockfile").write_text(
        "FROM minimal\nCOPY data.txt /data.txt\nRUN cat /data.txt\n")
    (d / "data.txt").write_text("payload-from-context\n")
    name = unique("cli")
    p = cli(stack, "template", "build", str(d), "--name", name)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "step 1/3" in p.stdout and "step 3/3" in p.stdout
    assert "payload-from-context" in p.stdout
    assert f"built template {name} version" in p.stdout
    try:
        # Again: every step cached.
        p = cli(stack, "template", "build", str(d), "--name", name)
        assert p.returncode == 0
        assert "step 3/3 (cached)" in p.stdout
    finally:
        delete_template(api, name)


def test_cli_build_failure_exits_nonzero_with_line(stack, tmp_path):
    d = tmp_path / "clifail"
    d.mkdir()
    (d / "Airlockfile").write_text("FROM minimal\n\nRUN echo oops >&2; false\n")
    p = cli(stack, "template", "build", str(d), "--name", unique("clif"))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "oops" in p.stderr
    assert "line 3" in p.stderr


def test_chatty_start_command_does_not_disturb_the_sandbox(stack, api,
                                                           templates, driver):
    """START's output is nobody's request: it is dropped, and it must not
    confuse a standby's claim (the vm driver talks to the agent there)."""
    templates.sandboxes.driver = driver
    name, events = templates.build(
        "chatty", "FROM minimal\n"
        "START sh -c 'while :; do echo tick; echo tock >&2; sleep 0.01; done'\n")
    assert events[-1].data["status"] == "succeeded", events
    # Wait for standbys of it, so the first create claims one.
    pool = os.path.join(stack.state, "run", "pool")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not [
            n for n in os.listdir(pool) if n.startswith(f"{name}.{driver}.")]:
        time.sleep(0.2)
    assert [n for n in os.listdir(pool) if n.startswith(f"{name}.{driver}.")]
    for i in range(3):
        sb = templates.sandboxes.create(template=name)
        res = exec_json(api, sb["id"], ["hostname"])
        assert res["stdout"] == sb["id"] + "\n", res
        assert "tick" not in res["stdout"] and "tock" not in res["stderr"]
        if i == 0:
            # It was a standby, claimed (not a cold start after a failed
            # claim, which would hide a broken claim).
            with open(os.path.join(stack.state, "log", "shim.log")) as f:
                assert f"is now sandbox {sb['id']}" in f.read()


def test_deleted_templates_standbys_go(stack, api, templates, driver):
    """A deleted template's warm-pool standbys leave the pool as the
    delete answers (no create can claim one), and the controller ends
    their shims, machines and roots soon after; a create of it is 404."""
    name, events = templates.build("retired", "FROM minimal\nRUN true\n")
    assert events[-1].data["status"] == "succeeded", events[-1].data
    pool = os.path.join(stack.state, "run", "pool")

    def mine(d):
        try:
            return [n for n in os.listdir(d)
                    if n.startswith(f"{name}.{driver}.")]
        except FileNotFoundError:
            return []

    deadline = time.monotonic() + 60
    while not mine(pool):
        assert time.monotonic() < deadline, "no standby of the template"
        time.sleep(0.2)
    names = mine(pool)
    shims = [listener_pid(stack, os.path.join(pool, n)) for n in names]
    assert None not in shims, (names, shims)
    slots = [n[len(f"{name}.{driver}."):-len(".sock")] for n in names]
    delete_template(api, name)
    assert not mine(pool), mine(pool)
    assert_error(api.post(api.base + "/v1/sandboxes",
                          json={"template": name, "driver": driver},
                          timeout=TIMEOUT), 404)
    retired = os.path.join(pool, "retired")
    deadline = time.monotonic() + 30
    while [p for p in shims if pid_alive(p)] or mine(retired):
        assert time.monotonic() < deadline, (shims, mine(retired))
        time.sleep(0.2)
    for slot in slots:
        root = os.path.join(stack.state, "pool", "sandboxes", slot)
        assert not os.path.exists(root), root


def builder_pid(bid, seconds=60):
    """The pid of the builder of build bid (not its log streamer)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if (argv[0].endswith(b"airlock-builder") and len(argv) > 2
                    and argv[1] == b"--build" and argv[2] == bid.encode()):
                return int(p)
        time.sleep(0.2)
    raise AssertionError("no builder process for the build")


def wait_running_step(api, bid, step):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        b = api.get(f"{api.base}/v1/templates/builds/{bid}",
                    timeout=TIMEOUT).json()
        if b["status"] == "running" and b["step"] >= step:
            return
        time.sleep(0.2)
    raise AssertionError(f"build {bid} never reached step {step}")


def open_log(api, bid, headers=None, seconds=120):
    r = api.get(f"{api.base}/v1/templates/builds/{bid}/logs",
                headers={"Accept": "text/event-stream", **(headers or {})},
                stream=True, timeout=(5, seconds))
    assert r.status_code == 200, r.text
    return r, sse_events(r)


def test_killed_builder_fails_its_build(api, templates):
    """A builder that dies mid-build (killed, host trouble) does not leave
    its build "running" for ever: a log stream open at the time ends with
    an error event, the controller marks the build failed, and the log
    read afterwards (from the stored log) ends with that status."""
    name = unique("killed")
    templates.names.append(name)
    r = submit(api, name, "FROM minimal\nRUN sleep 60\n")
    assert r.status_code == 202, r.text
    bid = r.json()["build_id"]
    pid = builder_pid(bid)
    # Let it reach the RUN step, then kill it.
    wait_running_step(api, bid, 2)
    resp, events = open_log(api, bid)
    try:
        assert next(events).name == "step"
        os.kill(pid, signal.SIGKILL)
        rest = list(events)
    finally:
        resp.close()
    assert rest and rest[-1].name == "error", rest
    assert "builder exited" in rest[-1].data["message"], rest[-1].data
    deadline = time.monotonic() + 120
    while True:
        b = api.get(f"{api.base}/v1/templates/builds/{bid}",
                    timeout=TIMEOUT).json()
        if b["status"] == "failed":
            break
        assert time.monotonic() < deadline, b
        time.sleep(0.5)
    assert b["error"], b
    events = follow(api, bid, seconds=30)
    assert events[0].name == "step", events
    assert events[-1].data["status"] == "failed", events[-1].data
    assert_error(api.get(f"{api.base}/v1/templates/{name}", timeout=TIMEOUT),
                 404)


TICKING = ("FROM minimal\nRUN [\"/bin/sh\", \"-c\", \"for i in 1 2 3 4 5 6; "
           "do echo line$i; sleep 0.5; done\"]\n")


def test_log_stream_survives_kill9_of_every_fcgi_worker(stack, api,
                                                          templates):
    """The log of a running build is carried by nginx from the builder:
    killing every API worker mid-stream loses none of it."""
    name = unique("tick")
    templates.names.append(name)
    r = submit(api, name, TICKING, no_cache=True)
    assert r.status_code == 202, r.text
    bid = r.json()["build_id"]
    resp, events = open_log(api, bid)
    try:
        seen = []
        for ev in events:
            seen.append(ev)
            if ev.name == "output":
                break
        killed = stack.kill9("airlock-fcgi")
        assert killed, "no airlock-fcgi to kill"
        assert not stack.pids("airlock-fcgi")
        for ev in events:
            seen.append(ev)
            if ev.name == "status":
                break
    finally:
        resp.close()
        stack.sh("start", "fcgi")
    out = "".join(e.data.get("data", "") for e in seen if e.name == "output")
    assert out == "".join(f"line{i}\n" for i in range(1, 7)), seen
    assert seen[-1].name == "status", seen
    assert seen[-1].data["status"] == "succeeded", seen[-1].data
    assert api.get(f"{api.base}/v1/health",
                   timeout=TIMEOUT).status_code == 200
    # The builder's log streamer goes a little after the builder, and
    # its socket and tokens with it.
    sock = os.path.join(stack.state, "run", "stream", f"build-{bid}.sock")
    deadline = time.monotonic() + 30
    while os.path.exists(sock) or any(
            f"--log-stream {bid}" in cmdline(p)
            for p in stack.pids("airlock-builder")):
        assert time.monotonic() < deadline, "the log streamer stayed"
        time.sleep(0.5)
    assert not os.path.exists(os.path.join(stack.state, "builds", bid,
                                           "stream-tokens"))


def test_finished_build_log_is_served_and_ends(api, app):
    """A client that asks after the build finished gets the stored log,
    the same events as those who watched it live, and the end."""
    name, bid, live = app
    again = follow(api, bid, seconds=30)
    assert [(e.name, e.data) for e in again] == \
        [(e.name, e.data) for e in live]


def test_many_log_streams_leave_the_api_answering(stack, api, templates):
    """50 clients following one build's log hold no API worker: health
    answers while they are open, and each gets the whole log."""
    name = unique("watched")
    templates.names.append(name)
    r = submit(api, name, "FROM minimal\nRUN sleep 6\n", no_cache=True)
    assert r.status_code == 202, r.text
    bid = r.json()["build_id"]
    wait_running_step(api, bid, 2)
    conns = []
    try:
        for i in range(50):
            c, resp = open_stream(stack, "GET",
                                  f"/v1/templates/builds/{bid}/logs")
            assert resp.status == 200, (i, resp.status, resp.read())
            first = resp.read(11)
            assert first == b"event: step", (i, first)
            conns.append((c, resp))
        t0 = time.monotonic()
        h = api.get(f"{api.base}/v1/health", timeout=10)
        assert h.status_code == 200, h.text
        assert time.monotonic() - t0 < 5
        b = api.get(f"{api.base}/v1/templates/builds/{bid}",
                    timeout=TIMEOUT).json()
        assert b["status"] == "running", b
        for c, resp in conns:
            rest = resp.read().decode()
            assert '"status":"succeeded"' in rest, rest[-300:]
    finally:
        for c, _ in conns:
            c.close()


def test_other_projects_key_cannot_read_a_build_log(api, app):
    name, bid, _ = app
    project = unique("tl")
    assert api.post(f"{api.base}/v1/projects", json={"name": project},
                    timeout=TIMEOUT).status_code == 201
    k = api.post(f"{api.base}/v1/keys",
                 json={"project": project, "role": "member", "name": "x"},
                 timeout=TIMEOUT).json()["key"]
    h = {"Authorization": f"Bearer {k}", "Accept": "text/event-stream"}
    assert_error(api.get(f"{api.base}/v1/templates/builds/{bid}/logs",
                         headers=h, timeout=TIMEOUT), 404, "not_found")
    assert_error(api.get(f"{api.base}/v1/templates/builds/{bid}",
                         headers=h, timeout=TIMEOUT), 404, "not_found")


def test_cli_sets_template_pool_bounds(stack):
    p = cli(stack, "template", "pool", "minimal", "ns_max=7")
    assert p.returncode == 0, p.stderr
    pool = json.loads(p.stdout)["warm_pool"]
    assert pool["ns_max"] == 7 and "ns_max" not in pool["defaults"]
    p = cli(stack, "template", "pool", "minimal", "ns_max=default")
    assert p.returncode == 0, p.stderr
    assert "ns_max" in json.loads(p.stdout)["warm_pool"]["defaults"]
    p = cli(stack, "template", "pool", "minimal", "ns_max")
    assert p.returncode == 100


def test_deleted_templates_spare_snapshots_go(stack, api, templates):
    """The controller makes spare snapshots of every template for the
    starts to take (core/sandbox/spare.h); a deleted template's go with it."""
    name, events = templates.build("spared", "FROM minimal\nRUN true\n")
    assert events[-1].data["status"] == "succeeded", events[-1].data
    d = os.path.join(stack.state, "pool", "spares")

    def mine():
        try:
            return [n for n in os.listdir(d) if n.startswith(name + ".")]
        except FileNotFoundError:
            return []

    deadline = time.monotonic() + 60
    while not mine():
        assert time.monotonic() < deadline, "no spare of the template"
        time.sleep(0.5)
    delete_template(api, name)
    deadline = time.monotonic() + 30
    while mine():
        assert time.monotonic() < deadline, mine()
        time.sleep(0.5)


def reload_nginx(stack):
    ngx = f"{stack.state}/nginx"
    subprocess.run(["nginx", "-p", f"{ngx}/", "-c", f"{ngx}/nginx.conf",
                    "-e", f"{stack.state}/log/nginx-error.log", "-s",
                    "reload"], check=True, timeout=30)


def location_block(text, head):
    """The nginx block that starts with head, through its closing brace."""
    start = text.index(head)
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    raise AssertionError(f"{head} has no end")


def test_api_under_a_path_prefix(stack, api):
    """operations.md's "Under a path prefix": the /v1/ location's body
    under /airlock/ with AIRLOCK_PREFIX set. The workers route the
    prefixed paths, and the build log URL a build answers with carries the
    prefix (without one, it is the plain path) and streams the log."""
    name = unique("prefix")
    r = submit(api, name, "FROM minimal\nRUN true\n")
    assert r.status_code == 202, r.text
    plain = r.json()
    assert plain["logs"] == f"/v1/templates/builds/{plain['build_id']}/logs"
    follow(api, plain["build_id"])

    conf = f"{stack.state}/nginx/airlock.conf"
    original = open(conf).read()
    block = location_block(original, "location /v1/ {")
    assert 'fastcgi_param AIRLOCK_PREFIX    "";' in block
    prefixed = block.replace("location /v1/ {", "location /airlock/ {", 1) \
        .replace('fastcgi_param AIRLOCK_PREFIX    "";',
                 "fastcgi_param AIRLOCK_PREFIX /airlock/;")
    try:
        with open(conf, "a") as f:
            f.write("\n" + prefixed + "\n")
        reload_nginx(stack)
        deadline = time.monotonic() + 30
        while True:
            r = api.get(f"{api.base}/airlock/v1/health", timeout=TIMEOUT)
            if r.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert r.status_code == 200 and r.json() == {"status": "ok"}, r.text
        r = api.get(f"{api.base}/airlock/v1/templates/{name}",
                    timeout=TIMEOUT)
        assert r.status_code == 200 and r.json()["name"] == name, r.text
        parts = {"name": (None, name), "airlockfile": (None,
                 "FROM minimal\nRUN echo again\n")}
        r = api.post(f"{api.base}/airlock/v1/templates", files=parts,
                     timeout=TIMEOUT)
        assert r.status_code == 202, r.text
        body = r.json()
        logs = body["logs"]
        assert logs == f"/airlock/v1/templates/builds/{body['build_id']}/logs"
        events = follow(api, body["build_id"], logs=logs)
        assert events[-1].data["status"] == "succeeded", events
    finally:
        with open(conf, "w") as f:
            f.write(original)
        reload_nginx(stack)
        delete_template(api, name)
