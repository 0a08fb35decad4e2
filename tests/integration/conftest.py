"""Integration tests: a private Airlock stack (PostgreSQL, btrfs pool,
airlock-fcgi, nginx, airlock-controller) in a fresh temporary state
directory on free ports, driven through nginx like a user would.

Every test that makes sandboxes runs once per driver (`ns`, `vm`) through
the `driver` fixture, which the `sandbox` and `sandboxes` fixtures use:
one code path, and where the drivers legitimately differ the assertion
branches on `driver` and says why. A driver that GET /v1/info does not
list as usable on this host makes its tests *skipped*, with the reason.

Environment:
  AIRLOCK_TEST_BUILD     binaries to test (default <repo>/build-san)
  AIRLOCK_TEST_VM_CACHE  a directory prepared with scripts/vm-kernel.sh
                         (it holds vm/kernel/ and vm/initrd.img); copied
                         into the fresh state directory before `up`, so
                         the guest kernel is not downloaded for every run
  AIRLOCK_VM_TEMPLATE_CACHE  built VM template snapshots (vm/tmplcache.h);
                         default: a directory of this test session, so
                         only the first stack boots a guest for minimal
  AIRLOCK_PG_PRISTINE    a fresh initdb (stack.sh); default: one of this
                         test session, so only the first stack runs initdb

Every stack of a session shares one host CA (the first stack's keys/ca.*,
copied into later state dirs before `up`): its templates then have the
same root filesystem, and their VM snapshots come from the cache. A
module about CA generation passes seed_ca=False to running_stack.
"""
import atexit
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from datetime import datetime

import pytest
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STACK = os.path.join(REPO, "scripts", "stack.sh")
BUILD = os.environ.get("AIRLOCK_TEST_BUILD", os.path.join(REPO, "build-san"))
# Leases network slots and stands gateways alone (netslot_tool.c).
NETSLOT_TOOL = os.path.join(BUILD, "netslot-tool")
RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
TIMEOUT = (5, 60)  # connect, read
DRIVERS = ("ns", "vm")
# vm sandboxes have a fixed guest RAM size (the template snapshot's).
VM_MEMORY_MB = 256


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_time(s):
    assert isinstance(s, str) and RFC3339.match(s), f"not RFC 3339: {s!r}"
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def assert_error(resp, status, code=None):
    """The API's error shape with the expected status."""
    assert resp.status_code == status, (
        f"expected {status}, got {resp.status_code}: {resp.text[:500]}")
    body = resp.json()
    assert isinstance(body.get("error"), dict), body
    assert isinstance(body["error"].get("code"), str) and body["error"]["code"]
    assert isinstance(body["error"].get("message"), str)
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


class Event:
    def __init__(self, name, data, t):
        self.name = name
        self.raw = data
        self.t = t  # client-side receive time (time.monotonic())
        try:
            self.data = json.loads(data) if data else {}
        except ValueError:
            self.data = None

    def __repr__(self):
        return f"Event({self.name!r}, {self.raw!r}, t={self.t:.3f})"


def sse_events(resp):
    """Parse a text/event-stream response read incrementally; every event
    carries the time its last byte arrived at the client."""
    buf = b""
    for chunk in resp.iter_content(chunk_size=None):
        now = time.monotonic()
        buf += chunk
        buf = buf.replace(b"\r\n", b"\n")
        while b"\n\n" in buf:
            block, buf = buf.split(b"\n\n", 1)
            name, data = "message", []
            for line in block.decode("utf-8").split("\n"):
                if line.startswith(":") or not line:
                    continue
                field, _, value = line.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                if field == "event":
                    name = value
                elif field == "data":
                    data.append(value)
            if name == "message" and not data:
                continue
            yield Event(name, "\n".join(data), now)


def proc_pids(state, name):
    """Processes running program `name` that belong to this stack."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{d}/exe")
            if exe.endswith(" (deleted)"):
                exe = exe[: -len(" (deleted)")]
            if os.path.basename(exe) != name:
                continue
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"AIRLOCK_STATE={state}".encode() in env:
            out.append(int(d))
    return out


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Stack:
    def __init__(self, state, build, http_port, https_port):
        self.state = state
        self.build = build
        self.http_port = http_port
        self.https_port = https_port
        self.base = f"http://127.0.0.1:{http_port}"
        self.env = dict(os.environ)
        self.env.update({
            "AIRLOCK_STATE": state,
            "AIRLOCK_BUILD": build,
            "AIRLOCK_HTTP_PORT": str(http_port),
            "AIRLOCK_HTTPS_PORT": str(https_port),
            # Sparse: what the tests write is what it takes. Big enough
            # that one project's part of it (AIRLOCK_POOL_PROJECT_PCT)
            # honours the 8 GiB disks test_disk asks for.
            "AIRLOCK_POOL_SIZE": "24G",
            "AIRLOCK_FCGI_WORKERS": "4",
            # A pool of fixed size, whose standbys a test can count and
            # claim; test_burst follows one that grows with the creates.
            "AIRLOCK_WARM_POOL_MAX": "2",
            # Daemons report sanitizer findings in their logs (checked by
            # test_zz_sanitizers) and keep running where they can. The
            # quarantine of freed memory is capped so that the memory
            # tests (test_files) see the programs' own memory, not 256
            # MiB of ASan's bookkeeping.
            "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:"
                            "quarantine_size_mb=8:"
                            f"log_path={state}/log/asan",
            "UBSAN_OPTIONS": f"print_stacktrace=1:log_path={state}/log/ubsan",
        })
        self.key = None

    def sh(self, *args, timeout=300, check=True):
        p = subprocess.run([STACK, *args], env=self.env, cwd=REPO,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(
                f"stack.sh {' '.join(args)} failed ({p.returncode}):\n{p.stdout}")
        return p

    def url(self, path):
        return self.base + path

    def pids(self, name):
        return proc_pids(self.state, name)

    def kill9(self, name):
        pids = self.pids(name)
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        return pids


def assert_refused_at_start(stack, tmp_path, env, says):
    """The controller and fcgi, started with env on top of the stack's
    (in a scratch state directory), stop at once: exit 100 with says in
    what they print."""
    env = dict(stack.env, AIRLOCK_STATE=str(tmp_path), **env)
    for prog, args in (("airlock-controller", []),
                       ("airlock-fcgi", ["--socket", str(tmp_path / "s")])):
        p = subprocess.run([os.path.join(stack.build, prog), *args], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=30)
        assert p.returncode == 100, (prog, p.returncode, p.stdout)
        assert says in p.stdout, (prog, p.stdout)


def seed_vm_kernel(state):
    """Copy a prepared guest kernel + initrd into a new state directory
    (what `make vm-kernel` would fetch there); stack.sh up then finds it
    up to date instead of downloading it again."""
    cache = os.environ.get("AIRLOCK_TEST_VM_CACHE")
    if not cache:
        return
    src = os.path.join(cache, "vm")
    if not os.path.isfile(os.path.join(src, "kernel", "vmlinuz")):
        return
    dst = os.path.join(state, "vm")
    os.makedirs(dst, exist_ok=True)
    shutil.copytree(os.path.join(src, "kernel"), os.path.join(dst, "kernel"),
                    dirs_exist_ok=True)
    if os.path.isfile(os.path.join(src, "initrd.img")):
        shutil.copy2(os.path.join(src, "initrd.img"), dst)


_session_dir = None
CA_FILES = ("ca.crt", "ca.key")


def session_dir():
    """A directory for this test session, removed when it ends."""
    global _session_dir
    if _session_dir is None:
        _session_dir = tempfile.mkdtemp(prefix="airlock-session-")
        atexit.register(shutil.rmtree, _session_dir, True)
    return _session_dir


def seed_ca_into(state):
    """Copy the session's host CA (modes kept) into a new state dir; False
    when there is none yet."""
    src = os.path.join(session_dir(), "ca")
    if not all(os.path.isfile(os.path.join(src, f)) for f in CA_FILES):
        return False
    dst = os.path.join(state, "keys")
    os.makedirs(dst, mode=0o700, exist_ok=True)
    for f in CA_FILES:
        shutil.copy2(os.path.join(src, f), dst)
    return True


def keep_ca(state):
    """The first stack's CA becomes the session's."""
    dst = os.path.join(session_dir(), "ca")
    src = os.path.join(state, "keys")
    if os.path.isdir(dst) or not all(
            os.path.isfile(os.path.join(src, f)) for f in CA_FILES):
        return
    tmp = tempfile.mkdtemp(dir=session_dir())
    for f in CA_FILES:
        shutil.copy2(os.path.join(src, f), tmp)
    os.rename(tmp, dst)


def _cleanup_state(stack, log):
    try:
        stack.sh("down", timeout=180, check=False)
    except Exception as e:  # keep tearing down
        log.append(f"stack.sh down: {e}")
    pool = os.path.join(stack.state, "pool")
    if os.path.ismount(pool):
        subprocess.run(["umount", "-l", pool], check=False)
    img = os.path.join(stack.state, "pool.img")
    out = subprocess.run(["losetup", "-j", img, "-O", "NAME", "-n"],
                         stdout=subprocess.PIPE, text=True, check=False).stdout
    for dev in out.split():
        subprocess.run(["losetup", "-d", dev], check=False)
    # For a failure to look into after the run: the stack's logs.
    keep = os.environ.get("AIRLOCK_TEST_KEEP_LOGS")
    if keep:
        shutil.copytree(os.path.join(stack.state, "log"), keep,
                        dirs_exist_ok=True)
    shutil.rmtree(stack.state, ignore_errors=True)


def running_stack(env=None, prefix="airlock-it-", seed_ca=True):
    """A stack in a fresh state directory, up until the generator is
    closed; env: variables on top of the defaults (operator settings);
    seed_ca: start with the session's CA instead of generating one."""
    state = tempfile.mkdtemp(prefix=prefix)
    st = Stack(state, BUILD, free_port(), free_port())
    st.env.setdefault("AIRLOCK_VM_TEMPLATE_CACHE",
                      os.path.join(session_dir(), "vm-templates"))
    st.env.setdefault("AIRLOCK_PG_PRISTINE",
                      os.path.join(session_dir(), "pg"))
    st.env.update(env or {})
    log = []
    try:
        seed_vm_kernel(state)
        seeded = seed_ca and seed_ca_into(state)
        p = st.sh("up", check=False)
        if p.returncode != 0:
            pytest.fail(f"stack did not start:\n{p.stdout}", pytrace=False)
        if seed_ca and not seeded:
            keep_ca(state)
        with open(os.path.join(state, "api-key")) as f:
            st.key = f.read().strip()
        assert st.key, "empty api-key file"
        yield st
    finally:
        _cleanup_state(st, log)


def api_session(stack, key=None):
    """A requests session on stack's API with key (default: the admin
    key); s.base is the API's URL."""
    s = requests.Session()
    # A kept-alive connection the server closes just as a request goes
    # out ends in "Remote end closed connection without response"; HTTP
    # clients resend idempotent requests on a new connection then (RFC
    # 9112, 9.3.1). Only GET and HEAD, once: nothing else is resent.
    retry = Retry(total=1, connect=1, read=1, status=0, redirect=0,
                  allowed_methods=frozenset({"GET", "HEAD"}),
                  raise_on_status=False)
    s.mount("http://", HTTPAdapter(max_retries=retry))
    s.mount("https://", HTTPAdapter(max_retries=retry))
    s.headers["Authorization"] = f"Bearer {key or stack.key}"
    s.base = stack.base
    return s


def info_of(api):
    """GET /v1/info, or None when the stack does not answer it (then
    test_api.test_info fails, and only ns, which every host has, runs)."""
    r = api.get(api.base + "/v1/info", timeout=TIMEOUT)
    if r.status_code != 200:
        return None
    return r.json()


@pytest.fixture(scope="session")
def stack():
    yield from running_stack()


@pytest.fixture(scope="session")
def api(stack):
    return api_session(stack)


@pytest.fixture(scope="session")
def info(api):
    return info_of(api)


def private_stack(env, prefix, seed_ca=True):
    """The fixtures stack, api and info of a module that runs a stack of
    its own (env: its operator settings), for the module to bind by those
    names: conftest's driver, sandboxes and sandbox then use its stack.

        stack, api, info = private_stack({"AIRLOCK_X": "1"}, "airlock-x-")
    """
    @pytest.fixture(scope="module", name="stack")
    def private_stack_():
        yield from running_stack(env=env, prefix=prefix, seed_ca=seed_ca)

    @pytest.fixture(scope="module", name="api")
    def private_api(stack):
        return api_session(stack)

    @pytest.fixture(scope="module", name="info")
    def private_info(api):
        return info_of(api)

    return private_stack_, private_api, private_info


# Network slots, namespaces and nftables rules are root's to make.
needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="network slots and namespaces need "
                                "root")


def usable_drivers(info):
    if info is None:
        return ["ns"]
    d = info.get("drivers")
    return list(d) if isinstance(d, list) else []


@pytest.fixture(scope="module", params=DRIVERS)
def driver(request, info):
    """The driver every sandbox of the test is made with. A driver the
    host cannot run is a skip with the reason, never a pass."""
    name = request.param
    drivers = usable_drivers(info)
    if name not in drivers:
        pytest.skip(f"driver {name!r} is not usable on this host: "
                    f"GET /v1/info answered {info!r}")
    return name


class Sandboxes:
    """Creates sandboxes and deletes whatever a test left behind."""

    def __init__(self, api, driver=None):
        self.api = api
        self.driver = driver
        self.ids = []

    def body(self, **body):
        """A create body for this driver."""
        if "snapshot" not in body:  # a snapshot has its template
            body.setdefault("template", "minimal")
        if self.driver is not None:
            body.setdefault("driver", self.driver)
        return body

    def create(self, **body):
        body = self.body(**body)
        r = self.api.post(self.api.base + "/v1/sandboxes", json=body,
                          timeout=TIMEOUT)
        assert r.status_code == 201, f"create: {r.status_code} {r.text}"
        sb = r.json()
        self.ids.append(sb["id"])
        if self.driver is not None:
            assert sb.get("driver") == self.driver, sb
        return sb

    def cleanup(self):
        for i in self.ids:
            try:
                self.api.delete(f"{self.api.base}/v1/sandboxes/{i}",
                                timeout=TIMEOUT)
            except requests.RequestException:
                pass


@pytest.fixture
def sandboxes(api, driver):
    s = Sandboxes(api, driver)
    yield s
    s.cleanup()


@pytest.fixture(scope="module")
def sandbox(api, driver):
    """One running sandbox of `driver`, shared by the tests of a module."""
    s = Sandboxes(api, driver)
    sb = s.create(timeout=1800)
    yield sb
    s.cleanup()


def exec_json(api, sid, cmd, http_timeout=TIMEOUT, **kw):
    """Run cmd to its end (kw: the exec body's other members); a command
    that may run past a minute (node under TCG) needs a longer
    http_timeout (connect, read)."""
    body = {"cmd": cmd, **kw}
    r = api.post(f"{api.base}/v1/sandboxes/{sid}/exec", json=body,
                 headers={"Accept": "application/json"},
                 timeout=http_timeout)
    if r.status_code != 200:
        # Say why the sandbox is not running, when it is not.
        g = api.get(f"{api.base}/v1/sandboxes/{sid}", timeout=TIMEOUT)
        why = g.json().get("error") if g.status_code == 200 else g.text
        raise AssertionError(f"exec {cmd}: {r.status_code} {r.text} "
                             f"(sandbox: {why})")
    return r.json()


def exec_sse(api, sid, cmd, **kw):
    """Run cmd with an event stream; returns the list of events."""
    body = {"cmd": cmd, **kw}
    with api.post(f"{api.base}/v1/sandboxes/{sid}/exec", json=body,
                  headers={"Accept": "text/event-stream"}, stream=True,
                  timeout=TIMEOUT) as r:
        assert r.status_code == 200, f"exec {cmd}: {r.status_code} {r.text}"
        assert r.headers.get("Content-Type", "").startswith(
            "text/event-stream"), r.headers
        return list(sse_events(r))


# ------------------------------------------------------------ processes


def open_stream(stack, method, path, body=None):
    """An SSE request on a connection of its own, straight to the
    stack's nginx: (connection, response), status not checked."""
    c = http.client.HTTPConnection("127.0.0.1", stack.http_port, timeout=60)
    headers = {"Authorization": f"Bearer {stack.key}",
               "Accept": "text/event-stream"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    c.request(method, path, body, headers)
    return c, c.getresponse()


def listener_pid(stack, path):
    """The airlock-shim listening on unix socket path (via the socket's
    inode in /proc/net/unix and the shims' fd tables), or None."""
    # Accepted connections carry the listener's path too (and linger
    # here for a moment after they close), so every inode with the path
    # counts: the process holding any of them is the server.
    inodes = set()
    with open("/proc/net/unix") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 8 and parts[7] == path:
                inodes.add(f"socket:[{parts[6]}]")
    if not inodes:
        return None
    for pid in stack.pids("airlock-shim"):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            # A shim taking connections closes fds as this reads them:
            # one gone is no reason to pass over its process.
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return pid
            except OSError:
                continue
    return None


def shim_of(stack, sid):
    return listener_pid(stack, os.path.join(stack.state, "run", "sbx",
                                            f"{sid}.sock"))


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            out.append(int(d))
    return out


def dir_bytes(path):
    """Bytes of the files under path (what a log directory holds)."""
    total = 0
    for root, _, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(root, n)).st_size
            except OSError:
                pass
    return total


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        out += kids
        todo += kids
    return out


def is_qemu(pid):
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    return os.path.basename(exe).startswith("qemu-system")


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def cgroup_path(ctrl, leaf, v1_file, v2_file):
    """A file of airlock's cgroup leaf: v2's when that layout is in use,
    else v1's under controller ctrl."""
    v2 = f"/sys/fs/cgroup/airlock/{leaf}/{v2_file}"
    if os.path.exists(v2):
        return v2
    return f"/sys/fs/cgroup/{ctrl}/airlock/{leaf}/{v1_file}"


def cgroup_pids(ctrl, leaf):
    """The pids in a cgroup leaf (v1: of controller ctrl)."""
    with open(cgroup_path(ctrl, leaf, "tasks", "cgroup.procs")) as f:
        return {int(p) for p in f.read().split()}


def mem_kib(pid):
    """VmRSS and VmHWM of a process, KiB (the benches use it too)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def qemu_pids(stack):
    """Every QEMU of this stack: its command line names a path in the
    stack's state directory (disk image, memory file, sockets)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and is_qemu(int(d)) and \
                stack.state + "/" in cmdline(int(d)):
            out.append(int(d))
    return out


def qemu_of(stack, sid):
    """The QEMU process of vm sandbox sid: a descendant of the shim that
    serves run/sbx/<sid>.sock, else the QEMU whose command line holds the
    sandbox's rootfs path."""
    root = os.path.join(stack.state, "pool", "sandboxes", sid) + "/"
    for attempt in range(3):
        shim = shim_of(stack, sid)
        if shim is not None:
            q = [p for p in descendants(shim) if is_qemu(p)]
            if q:
                return q[0]
        for p in qemu_pids(stack):
            if root in cmdline(p):
                return p
        time.sleep(0.2)
    return None


def qemu_log_copier(pid):
    """The process that copies a sandbox QEMU's stdout (a pipe) into its
    capped qemu.log (core/vm/machine.c, capped_log_pipe), or None."""
    try:
        out = os.readlink(f"/proc/{pid}/fd/1")
    except OSError:
        return None
    if not out.startswith("pipe:"):
        return None
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == pid:
            continue
        try:
            if os.readlink(f"/proc/{d}/fd/0") == out:
                return int(d)
        except OSError:
            continue
    return None


def qemu_rundir(pid):
    """The run directory of a QEMU (its log, qemu.log, is its stdout, or
    its log copier's), or None."""
    copier = qemu_log_copier(pid)
    try:
        log = os.readlink(f"/proc/{copier or pid}/fd/1")
    except OSError:
        return None
    return os.path.dirname(log) if log.endswith("/qemu.log") else None
