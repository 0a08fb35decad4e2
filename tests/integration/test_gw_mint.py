"""The host CA and the mint service (issue 10, TLS): the controller
serves STATE/run/mint.sock to root and to gateway uids only, answers a
leaf that verifies strictly against STATE/keys/ca.crt for the name asked,
rate-limits each gateway uid, and every template the stack builds trusts
the CA (both drivers)."""
import os
import socket
import stat
import struct
import subprocess
import tempfile
import time
import traceback

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from conftest import exec_json

GW_UID_BASE = 1900065536  # AL_UIDRANGE_GW_BASE (core/host/uidrange.h)
AL_EPERM, AL_EINVAL, AL_EQUOTA = 3, 1, 17  # core/base/err.h


def spki():
    key = ec.generate_private_key(ec.SECP256R1())
    return key.public_key().public_bytes(
        serialization.Encoding.DER,
        serialization.PublicFormat.SubjectPublicKeyInfo)


def request(name, key):
    n = name.encode()
    return b"ALM1" + bytes([len(n)]) + n + struct.pack(">H", len(key)) + key


def ask(path, payload):
    """(status, data) of one request over the socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        buf = b""
        while True:
            chunk = s.recv(8192)
            if not chunk:
                break
            buf += chunk
    assert buf[:4] == b"ALM1", buf
    status = buf[4]
    (n,) = struct.unpack(">H", buf[5:7])
    assert len(buf) == 7 + n
    return status, buf[7:]


def ask_as(uid, path, payloads):
    """Statuses of the payloads, asked in order by a child running as uid."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            out = bytes(ask(path, p)[0] for p in payloads)
            os.write(w, out)
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        out += chunk
    os.close(r)
    _, st = os.waitpid(pid, 0)
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0
    return list(out)


def openssl_verify(ca, der, name):
    with tempfile.NamedTemporaryFile(suffix=".der") as f:
        f.write(der)
        f.flush()
        pem = subprocess.run(["openssl", "x509", "-inform", "DER", "-in",
                              f.name], check=True, capture_output=True).stdout
    with tempfile.NamedTemporaryFile(suffix=".pem") as f:
        f.write(pem)
        f.flush()
        return subprocess.run(
            ["openssl", "verify", "-x509_strict", "-purpose", "sslserver",
             "-verify_hostname", name, "-CAfile", ca, f.name],
            capture_output=True, text=True)


@pytest.fixture(scope="module")
def mint_sock(stack):
    path = os.path.join(stack.state, "run", "mint.sock")
    deadline = time.monotonic() + 10
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.1)
    return path


def test_ca_on_disk_with_its_modes(stack):
    keys = os.path.join(stack.state, "keys")
    k = os.stat(os.path.join(keys, "ca.key"))
    c = os.stat(os.path.join(keys, "ca.crt"))
    assert stat.S_IMODE(k.st_mode) == 0o600 and k.st_uid == 0
    assert stat.S_IMODE(c.st_mode) == 0o644
    text = subprocess.run(["openssl", "x509", "-noout", "-text", "-in",
                           os.path.join(keys, "ca.crt")], check=True,
                          capture_output=True, text=True).stdout
    assert "Airlock sandbox CA" in text
    assert "CA:TRUE, pathlen:0" in text
    assert "Certificate Sign, CRL Sign" in text


def test_mint_serves_a_strictly_valid_leaf(stack, mint_sock):
    ca = os.path.join(stack.state, "keys", "ca.crt")
    st = os.stat(mint_sock)
    assert stat.S_ISSOCK(st.st_mode)
    status, der = ask(mint_sock, request("pypi.org", spki()))
    assert status == 0, der
    ok = openssl_verify(ca, der, "pypi.org")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = openssl_verify(ca, der, "evil.org")
    assert bad.returncode != 0
    # Malformed requests get an error, not a leaf.
    for payload in (request("PyPI.org", spki()), request("10.0.0.1", spki()),
                    request("pypi.org", spki())[:-1], b"GET / HTTP/1.1\r\n"):
        status, msg = ask(mint_sock, payload)
        assert status == AL_EINVAL, (payload, status, msg)


def test_only_root_and_gateway_uids_may_ask(mint_sock):
    assert ask_as(65534, mint_sock, [request("pypi.org", spki())]) == \
        [AL_EPERM]
    assert ask_as(GW_UID_BASE + 7, mint_sock,
                  [request("pypi.org", spki())]) == [0]


def test_a_gateway_asking_for_many_names_is_rate_limited(mint_sock):
    key = spki()
    n = 600  # well past the burst of 256 (controller/mint.h)
    t0 = time.monotonic()
    got = ask_as(GW_UID_BASE + 11, mint_sock,
                 [request(f"n{i}.example.com", key) for i in range(n)])
    secs = time.monotonic() - t0
    refused = got.count(AL_EQUOTA)
    print(f"\nmint: {n} distinct names from one gateway uid in "
          f"{secs * 1000:.0f} ms: {got.count(0)} minted, {refused} "
          "refused (rate limit)")
    assert got[:200] == [0] * 200
    assert refused > 0
    assert set(got) <= {0, AL_EQUOTA}
    # Another gateway is not charged for it.
    assert ask_as(GW_UID_BASE + 12, mint_sock,
                  [request("pypi.org", key)]) == [0]


def test_template_trusts_the_ca(stack, api, sandbox):
    with open(os.path.join(stack.state, "keys", "ca.crt")) as f:
        pem = f.read().strip()
    r = exec_json(api, sandbox["id"],
                  ["cat", "/usr/local/share/ca-certificates/airlock-ca.crt"])
    assert r["exit_code"] == 0, r
    assert r["stdout"].strip() == pem
    r = exec_json(api, sandbox["id"],
                  ["cat", "/etc/ssl/certs/ca-certificates.crt"])
    assert r["exit_code"] == 0, r
    assert r["stdout"].count(pem) == 1
    # npm (Debian's reads /etc/npmrc) is pointed at that bundle: node
    # does not read it by itself.
    r = exec_json(api, sandbox["id"], ["cat", "/etc/npmrc"])
    assert r["exit_code"] == 0, r
    assert "cafile=/etc/ssl/certs/ca-certificates.crt" in r["stdout"]
