"""Files in and out of a sandbox, path validation, and attempts to reach
host files through `..` and symlinks."""
import os
import secrets

import pytest

from conftest import TIMEOUT, assert_error, exec_json


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
