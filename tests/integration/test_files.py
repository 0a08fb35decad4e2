"""Files in and out of a sandbox, path validation, and attempts to reach
host files through `..` and symlinks."""
import hashlib
import os
import secrets
import socket
import time

import pytest
import requests

from conftest import TIMEOUT, assert_error, exec_json, mem_kib, shim_of


def files_url(api, sid):
    return f"{api.base}/v1/sandboxes/{sid}/files"


def put(api, sid, path, data):
    return api.put(files_url(api, sid), params={"path": path}, data=data,
                   timeout=TIMEOUT)


def get(api, sid, path, **params):
    return api.get(files_url(api, sid), params={"path": path, **params},
                   timeout=TIMEOUT)


def test_put_get_roundtrip_binary(api, sandbox):
    data = bytes(range(256)) * 1000 + b"tail"
    r = put(api, sandbox["id"], "/tmp/blob.bin", data)
    assert r.status_code == 201, r.text
    r = get(api, sandbox["id"], "/tmp/blob.bin")
    assert r.status_code == 200
    assert r.content == data
    # The command side sees the same bytes.
    res = exec_json(api, sandbox["id"], ["sh", "-c", "wc -c < /tmp/blob.bin"])
    assert res["stdout"].strip() == str(len(data))


def test_put_creates_parents_and_list(api, sandbox):
    r = put(api, sandbox["id"], "/work/a/b/c/hello.txt", b"hello\n")
    assert r.status_code == 201, r.text
    r = put(api, sandbox["id"], "/work/a/b/c/second.txt", b"22")
    assert r.status_code == 201
    res = exec_json(api, sandbox["id"], ["cat", "/work/a/b/c/hello.txt"])
    assert res["stdout"] == "hello\n"

    r = get(api, sandbox["id"], "/work/a/b/c", list="1")
    assert r.status_code == 200, r.text
    entries = {e["name"]: e for e in r.json()["entries"]}
    assert set(entries) == {"hello.txt", "second.txt"}
    assert entries["hello.txt"]["type"] == "file"
    assert entries["hello.txt"]["size"] == 6
    assert entries["second.txt"]["size"] == 2

    r = get(api, sandbox["id"], "/work/a", list="1")
    entries = {e["name"]: e for e in r.json()["entries"]}
    assert entries["b"]["type"] == "dir"


def test_put_overwrites_and_empty_file(api, sandbox):
    assert put(api, sandbox["id"], "/tmp/ow.txt", b"first version").status_code == 201
    assert put(api, sandbox["id"], "/tmp/ow.txt", b"v2").status_code == 201
    assert get(api, sandbox["id"], "/tmp/ow.txt").content == b"v2"
    assert put(api, sandbox["id"], "/tmp/empty", b"").status_code == 201
    r = get(api, sandbox["id"], "/tmp/empty")
    assert r.status_code == 200 and r.content == b""


def test_large_file_roundtrip(api, sandbox):
    data = os.urandom(8 << 20)
    assert put(api, sandbox["id"], "/tmp/large", data).status_code == 201
    r = get(api, sandbox["id"], "/tmp/large")
    assert r.status_code == 200
    assert r.content == data


# ------------------------------------------------------------ atomic, streamed


class Body:
    """n pseudo-random bytes as a file-like request body: requests sends
    it with a Content-Length and reads it in chunks, so the test never
    holds the whole file."""
    def __init__(self, n, seed=b"airlock"):
        self.block = b"".join(hashlib.sha256(seed + bytes([i])).digest()
                              for i in range(256)) * 8  # 64 KiB
        self.n = n
        self.pos = 0

    def __len__(self):
        return self.n - self.pos

    def read(self, k=-1):
        k = self.n - self.pos if k is None or k < 0 else min(k, self.n - self.pos)
        out = bytearray()
        while len(out) < k:
            o = (self.pos + len(out)) % len(self.block)
            out += self.block[o:o + k - len(out)]
        self.pos += k
        return bytes(out)

    def sha256(self):
        h, b = hashlib.sha256(), Body(self.n)
        b.block = self.block
        while (c := b.read(1 << 20)):
            h.update(c)
        return h.hexdigest()


def start_upload(api, sid, path, length):
    """A raw PUT that announces length bytes; the caller sends some and
    hangs up, like a client that dies mid-upload."""
    host, port = api.base.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)), timeout=30)
    s.sendall((f"PUT /v1/sandboxes/{sid}/files?path={path} HTTP/1.1\r\n"
               f"Host: {host}\r\n"
               f"Authorization: {api.headers['Authorization']}\r\n"
               f"Content-Length: {length}\r\n\r\n").encode())
    return s


def temp_files(api, sid, d):
    res = sh(api, sid, f"ls -a {d}")
    assert res["exit_code"] == 0, res
    return [n for n in res["stdout"].split() if n.startswith(".airlock-tmp")]


def wait_for(what, cond, timeout=30):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_aborted_upload_leaves_nothing(api, sandbox):
    sid = sandbox["id"]
    assert put(api, sid, "/root/aborted", b"older version").status_code == 201
    s = start_upload(api, sid, "/root/aborted", 50 << 20)
    chunk = Body(1 << 20).read()
    for _ in range(8):
        s.sendall(chunk)
    # Mid-upload the bytes are in a file beside the target, and the
    # target is still the old file.
    wait_for("the upload's temporary file",
             lambda: temp_files(api, sid, "/root"))
    assert get(api, sid, "/root/aborted").content == b"older version"
    s.close()
    wait_for("the aborted upload's temporary file to go",
             lambda: not temp_files(api, sid, "/root"))
    r = get(api, sid, "/root/aborted")
    assert r.status_code == 200 and r.content == b"older version"

    # A new path: nothing appears at all.
    s = start_upload(api, sid, "/root/never", 50 << 20)
    s.sendall(chunk)
    s.close()
    wait_for("the aborted upload's temporary file to go",
             lambda: not temp_files(api, sid, "/root"))
    assert_error(get(api, sid, "/root/never"), 404)
    # The sandbox goes on serving files.
    assert put(api, sid, "/root/after", b"ok").status_code == 201
    assert get(api, sid, "/root/after").content == b"ok"


def test_upload_the_sandbox_refuses_leaves_nothing(api, sandbox):
    """The agent refuses the path while the body is still coming: the
    answer is its error, and nothing is created."""
    sid = sandbox["id"]
    assert put(api, sid, "/tmp/plain", b"a file").status_code == 201
    r = api.put(files_url(api, sid), params={"path": "/tmp/plain/sub/x"},
                data=Body(4 << 20), timeout=TIMEOUT)
    assert_error(r, 422)
    assert get(api, sid, "/tmp/plain").content == b"a file"
    assert not temp_files(api, sid, "/tmp")


def test_upload_over_the_body_limit_is_413(api, sandbox):
    """nginx's client_max_body_size (256 MiB) refuses a bigger upload
    from its Content-Length, before any byte of it is read."""
    s = start_upload(api, sandbox["id"], "/tmp/huge", (256 << 20) + 1)
    with s, s.makefile("rb") as f:
        status = f.readline().split()
        assert status[1] == b"413", status
        while f.readline() not in (b"\r\n", b""):
            pass
        assert b'"too_large"' in f.readline()
    assert_error(get(api, sandbox["id"], "/tmp/huge"), 404)


def test_chunked_upload(api, sandbox):
    """A body without a Content-Length (chunked; nginx buffers it whole
    before fcgi sees it) lands complete."""
    data = os.urandom(3 << 20)
    r = api.put(files_url(api, sandbox["id"]), params={"path": "/tmp/chunked"},
                data=(data[i:i + 65536] for i in range(0, len(data), 65536)),
                timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    assert r.request.headers.get("Transfer-Encoding") == "chunked"
    assert r.json()["bytes"] == len(data)
    assert get(api, sandbox["id"], "/tmp/chunked").content == data


# 200 MiB each way: under TCG a vm moves it in about 20 s.
BIG = 200 << 20
# Growth of a shim's or fcgi worker's peak RSS over its size before: its
# bounded queues (a few MiB) and, under ASan, the allocator's quarantine
# (conftest caps it at 8 MiB), but never the file.
MEM_GROWTH_MAX_KIB = 32 << 10


def test_big_file_streams_at_constant_memory(api, stack, sandbox):
    sid = sandbox["id"]
    shim = shim_of(stack, sid)
    assert shim is not None, "no shim serves the sandbox"
    procs = {"shim": [shim], "fcgi": stack.pids("airlock-fcgi")}
    assert procs["fcgi"], "no airlock-fcgi processes"
    before = {p: mem_kib(p) for ps in procs.values() for p in ps}

    body = Body(BIG)
    want = body.sha256()
    r = api.put(files_url(api, sid), params={"path": "/root/big"}, data=body,
                timeout=(5, 300))
    assert r.status_code == 201, r.text
    assert r.json()["bytes"] == BIG
    h, n = hashlib.sha256(), 0
    with api.get(files_url(api, sid), params={"path": "/root/big"},
                 stream=True, timeout=(5, 300)) as r:
        assert r.status_code == 200
        for c in r.iter_content(1 << 20):
            h.update(c)
            n += len(c)
    assert n == BIG
    assert h.hexdigest() == want, "the file came back different"
    # stat, not wc: reading 200 MiB again in a TCG guest can take minutes.
    res = sh(api, sid, "stat -c %s /root/big; rm -f /root/big")
    assert res["stdout"].strip() == str(BIG)

    for kind, ps in procs.items():
        for p in ps:
            after = mem_kib(p)
            grew = after["VmHWM"] - before[p]["VmRSS"]
            assert grew < MEM_GROWTH_MAX_KIB, \
                (f"{kind} {p} grew by {grew} KiB moving {BIG >> 20} MiB: "
                 f"{before[p]} -> {after}")


def test_missing_file_is_404(api, sandbox):
    assert_error(get(api, sandbox["id"], "/no/such/file"), 404)
    assert_error(get(api, sandbox["id"], "/no/such/dir", list="1"), 404)


@pytest.mark.parametrize("path", ["etc/passwd", "tmp/x", "", "./x"])
def test_relative_path_is_422(api, sandbox, path):
    assert_error(get(api, sandbox["id"], path), 422)
    assert_error(put(api, sandbox["id"], path, b"x"), 422)


@pytest.mark.parametrize("path", ["/../etc/hostname", "/tmp/../../etc/passwd",
                                  "/a/..", "/.."])
def test_dotdot_path_is_422(api, sandbox, path):
    assert_error(get(api, sandbox["id"], path), 422)
    assert_error(put(api, sandbox["id"], path, b"x"), 422)
    assert_error(get(api, sandbox["id"], path, list="1"), 422)


def raw_query(api, method, sid, query, data=None):
    """The query string as written: requests would requote pa%74h."""
    req = api.prepare_request(requests.Request(method, api.base, data=data))
    req.url = f"{files_url(api, sid)}?{query}"
    return api.send(req, timeout=TIMEOUT)


@pytest.mark.parametrize("query", ["path=/etc/hostname&path=/etc/passwd",
                                   "path=/etc/hostname&pa%74h=/etc/passwd",
                                   "path=/&list=1&path=/etc",
                                   "path=/etc/hostname&list=1&list=0"])
def test_repeated_parameter_is_400(api, sandbox, query):
    """Issue 23: the first path= was served; a layer in front reading
    the last would have checked another file."""
    name = "list" if "list=0" in query else "path"
    for method in ("GET", "PUT"):
        q = query if method == "GET" else query.replace("/etc/", "/tmp/r-")
        r = raw_query(api, method, sandbox["id"], q,
                      data=b"x" if method == "PUT" else None)
        assert_error(r, 400, "invalid_request")
        msg = r.json()["error"]["message"]
        assert f"'{name}'" in msg and "repeated" in msg, msg
    out = sh(api, sandbox["id"], "ls /tmp/r-* 2>/dev/null; true")["stdout"]
    assert out == "", f"a refused upload wrote {out!r}"


def test_missing_path_parameter(api, sandbox):
    r = api.get(files_url(api, sandbox["id"]), timeout=TIMEOUT)
    assert r.status_code in (400, 422)
    assert "error" in r.json()


# ------------------------------------------------------------ escapes


@pytest.fixture
def canary(stack):
    """A file on the host, in the test's state directory, that no
    sandbox may read or change."""
    secret = "canary-" + secrets.token_hex(16)
    d = os.path.join(stack.state, "canary-" + secrets.token_hex(4))
    os.makedirs(d)
    path = os.path.join(d, "secret.txt")
    with open(path, "w") as f:
        f.write(secret)
    yield path, secret
    with open(path) as f:
        assert f.read() == secret, "the host canary was modified"
    assert os.listdir(d) == ["secret.txt"], "a file appeared in the host dir"


def sh(api, sid, script):
    return exec_json(api, sid, ["sh", "-c", script])


def assert_not_leaked(resp, secret):
    assert secret.encode() not in resp.content, "host file content leaked"


def test_symlink_to_host_path_is_not_followed_out(api, sandbox, canary):
    path, secret = canary
    sid = sandbox["id"]
    d = os.path.dirname(path)
    res = sh(api, sid, f"mkdir -p /esc && ln -sf {path} /esc/file && "
                       f"ln -sfn {d} /esc/dir && ln -sfn / /esc/root && "
                       f"ln -sfn ../../../../../../.. /esc/up")
    assert res["exit_code"] == 0, res
    for p in ("/esc/file", "/esc/dir/secret.txt", f"/esc/root{path}",
              f"/esc/up{path}"):
        r = get(api, sid, p)
        assert_not_leaked(r, secret)
        assert r.status_code in (403, 404, 422), (p, r.status_code)
    r = get(api, sid, "/esc/dir", list="1")
    assert_not_leaked(r, secret)
    if r.status_code == 200:
        names = [e["name"] for e in r.json()["entries"]]
        assert "secret.txt" not in names


def test_write_through_symlink_stays_inside(api, sandbox, canary):
    path, secret = canary
    sid = sandbox["id"]
    d = os.path.dirname(path)
    sh(api, sid, f"mkdir -p /w && ln -sf {path} /w/file && "
                 f"ln -sfn {d} /w/dir")
    put(api, sid, "/w/file", b"pwned")
    put(api, sid, "/w/dir/new.txt", b"pwned")
    put(api, sid, "/w/dir/../dir/secret.txt", b"pwned")
    # The canary fixture checks the host file and directory on teardown;
    # check now too, so the failure names this test.
    with open(path) as f:
        assert f.read() == secret
    assert os.listdir(d) == ["secret.txt"]


def test_proc_root_symlink(api, sandbox, canary):
    path, secret = canary
    sid = sandbox["id"]
    sh(api, sid, f"ln -sfn /proc/1/root/ /p1root; "
                 f"ln -sf /proc/1/root{path} /p1file")
    for p in ("/p1file", f"/p1root{path}", f"/proc/1/root{path}",
              f"/proc/self/root{path}"):
        r = get(api, sid, p)
        assert_not_leaked(r, secret)
    put(api, sid, "/p1file", b"pwned")
    with open(path) as f:
        assert f.read() == secret


def test_commands_cannot_see_host_files(api, sandbox, canary):
    path, secret = canary
    sid = sandbox["id"]
    res = sh(api, sid, f"cat {path}; cat /proc/1/root{path}; "
                       f"ls {os.path.dirname(path)}; echo pwned > {path}; "
                       f"true")
    assert secret not in res["stdout"] + res["stderr"]
    with open(path) as f:
        assert f.read() == secret


def test_etc_hostname_symlink(api, sandbox):
    with open("/etc/hostname", "rb") as f:
        host_hostname = f.read()
    sid = sandbox["id"]
    sh(api, sid, "ln -sf /etc/hostname /hn")
    inside = sh(api, sid, "cat /etc/hostname 2>/dev/null; true")["stdout"]
    r = get(api, sid, "/hn")
    if r.status_code == 200:
        # Whatever is read is the sandbox's own file.
        assert r.content == inside.encode()
    put(api, sid, "/hn", b"pwned\n")
    with open("/etc/hostname", "rb") as f:
        assert f.read() == host_hostname
