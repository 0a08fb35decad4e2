"""Runs inside a slot's guest namespace for test_gateway.py: several
requests on ONE kept-alive connection through the gateway.

    gateway_probe.py SCHEME NAME CA HOST...
    gateway_probe.py raw SCHEME NAME CA PAYLOAD   (\\r\\n escapes)
    gateway_probe.py time SCHEME NAME CA N        (N requests, timed)
    gateway_probe.py conns SCHEME NAME CA N       (N connections, 1 request)
    gateway_probe.py oneflight NAME CA N          (TLS: Finished + N requests
                                                   in one write)

Connects to NAME (resolved through the guest's resolver: the gateway),
port 443 with TLS verified by CA (SNI NAME) or port 80, then for each
HOST sends "GET /echo HTTP/1.1" with that Host and reads the answer. A
HOST "wait" reads one line from stdin first (the test changes the
gateway's config meanwhile) and sends nothing. Prints one JSON line per
request: {"host": h, "status": N, "body": "..."} or {"host": h,
"closed": true} when the gateway closed the connection instead. raw
sends PAYLOAD as it is and prints the first answer's status and body,
and the statuses of every answer up to the first that is not 200 (or
closed);
time prints the per-request latencies' p50 and p99 in microseconds;
oneflight sends its handshake's last flight and N pipelined requests in
one write (so the gateway reads them together) and prints the statuses
of the answers."""
import json
import re
import socket
import ssl
import sys
import time


def read_response(f):
    line = f.readline()
    if not line:
        return None
    status = int(line.split()[1])
    length = 0
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        k, _, v = h.decode().partition(":")
        if k.strip().lower() == "content-length":
            length = int(v.strip())
    body = f.read(length) if length else b""
    return status, body.decode(errors="replace")


def connect(scheme, name, ca):
    port = 443 if scheme == "https" else 80
    raw = socket.create_connection((name, port), timeout=20)
    if scheme != "https":
        return raw
    ctx = ssl.create_default_context(cafile=ca)
    return ctx.wrap_socket(raw, server_hostname=name)


def send_raw(scheme, name, ca, payload):
    conn = connect(scheme, name, ca)
    conn.sendall(payload.encode("latin-1").decode("unicode_escape")
                 .encode("latin-1"))
    f = conn.makefile("rb")
    answers = []
    while True:
        try:
            r = read_response(f)
        except (OSError, ssl.SSLError, ValueError, IndexError):
            r = None
        if r is None:
            break
        answers.append(r)
        if r[0] != 200 or len(answers) == 8:
            break
    out = {"closed": True} if not answers else \
        {"status": answers[0][0], "body": answers[0][1],
         "statuses": [a[0] for a in answers]}
    sys.stdout.write(json.dumps(out) + "\n")


def timed(scheme, name, ca, n):
    conn = connect(scheme, name, ca)
    f = conn.makefile("rb")
    req = ("GET /echo HTTP/1.1\r\nHost: %s\r\n\r\n" % name).encode()
    took = []
    for _ in range(n):
        t0 = time.perf_counter()
        conn.sendall(req)
        r = read_response(f)
        took.append(time.perf_counter() - t0)
        assert r is not None and r[0] == 200, r
    took.sort()
    sys.stdout.write(json.dumps({
        "p50_us": round(took[len(took) // 2] * 1e6),
        "p99_us": round(took[int(len(took) * 0.99) - 1] * 1e6)}) + "\n")


def fresh(scheme, name, ca, n):
    for _ in range(n):
        conn = connect(scheme, name, ca)
        conn.sendall(("GET /echo HTTP/1.1\r\nHost: %s\r\n"
                      "Connection: close\r\n\r\n" % name).encode())
        r = read_response(conn.makefile("rb"))
        assert r is not None and r[0] == 200, r
        conn.close()
    sys.stdout.write(json.dumps({"done": n}) + "\n")


def oneflight(name, ca, n):
    ctx = ssl.create_default_context(cafile=ca)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, out, server_hostname=name)
    raw = socket.create_connection((name, 443), timeout=20)
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            raw.sendall(out.read())
            data = raw.recv(65536)
            if not data:
                raise SystemExit("closed during the handshake")
            inc.write(data)
    for _ in range(n):
        tls.write(("GET /echo HTTP/1.1\r\nHost: %s\r\n\r\n" %
                   name).encode())
    raw.sendall(out.read())  # Finished and the requests: one write
    got = b""
    while got.count(b"HTTP/1.1 ") < n or not got.endswith(b"\n"):
        try:
            got += tls.read(65536)
            continue
        except ssl.SSLWantReadError:
            pass
        data = raw.recv(65536)
        if not data:
            break
        inc.write(data)
    statuses = [int(c) for c in re.findall(rb"HTTP/1\.1 (\d{3}) ", got)]
    sys.stdout.write(json.dumps({"statuses": statuses}) + "\n")


def main():
    if sys.argv[1] == "oneflight":
        oneflight(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    if sys.argv[1] == "conns":
        fresh(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    if sys.argv[1] == "raw":
        send_raw(*sys.argv[2:6])
        return
    if sys.argv[1] == "time":
        timed(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    scheme, name, ca, hosts = sys.argv[1], sys.argv[2], sys.argv[3], \
        sys.argv[4:]
    conn = connect(scheme, name, ca)
    f = conn.makefile("rb")
    for host in hosts:
        if host == "wait":
            sys.stdout.write(json.dumps({"waiting": True}) + "\n")
            sys.stdout.flush()
            sys.stdin.readline()
            continue
        try:
            conn.sendall(("GET /echo HTTP/1.1\r\nHost: %s\r\n\r\n" %
                          host).encode())
            r = read_response(f)
        except (OSError, ssl.SSLError):
            r = None
        out = {"host": host, "closed": True} if r is None else \
            {"host": host, "status": r[0], "body": r[1]}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
        if r is None:
            break


if __name__ == "__main__":
    main()
