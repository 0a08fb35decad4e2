"""Runs inside a slot's guest namespace for test_gateway.py: several
requests on ONE kept-alive connection through the gateway.

    gateway_probe.py SCHEME NAME CA HOST...

Connects to NAME (resolved through the guest's resolver: the gateway),
port 443 with TLS verified by CA (SNI NAME) or port 80, then for each
HOST sends "GET /echo HTTP/1.1" with that Host and reads the answer. A
HOST "wait" reads one line from stdin first (the test changes the
gateway's config meanwhile) and sends nothing. Prints one JSON line per
request: {"host": h, "status": N, "body": "..."} or {"host": h,
"closed": true} when the gateway closed the connection instead."""
import json
import socket
import ssl
import sys


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


def main():
    scheme, name, ca, hosts = sys.argv[1], sys.argv[2], sys.argv[3], \
        sys.argv[4:]
    port = 443 if scheme == "https" else 80
    raw = socket.create_connection((name, port), timeout=20)
    if scheme == "https":
        ctx = ssl.create_default_context(cafile=ca)
        conn = ctx.wrap_socket(raw, server_hostname=name)
    else:
        conn = raw
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
