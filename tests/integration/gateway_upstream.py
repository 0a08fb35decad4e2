"""The upstream world of test_gateway.py, run inside a network namespace
the test made (nothing here listens anywhere else):

    gateway_upstream.py ADDR CERT KEY NAMES_JSON

- DNS on ADDR:53 (UDP): A (or, for an IPv6 address, AAAA) records from
  NAMES_JSON {"name": "ip"} or {"name": ["ip", ...]} (answered in that
  order); any other name NXDOMAIN; ADDR may be IPv6; every question is printed as {"dns": name};
- HTTP on ADDR:80 and HTTPS on ADDR:443 (CERT/KEY, a leaf of the test's
  own CA with every name as a SAN, so one address serves them all, as a
  CDN would): keep-alive HTTP/1.1; the answer to GET /echo tells which
  Host it got and which headers, the answer to POST /echo the body; every
  request is printed as {"http": host, "path": p, "tls": bool,
  (after GET /drop-next the connection's next request is dropped unanswered)
  "resumed": bool (a resumed TLS session), "peer": the client's port
  (one per upstream connection)};
- a TCP echo service on ADDR:7000 (what a pass-through reaches);
- with UPSTREAM_FILES=DIR in the environment, GET of a path for which
  DIR/<host>/<path> is a file (or a directory with a file "index")
  answers that file (package indexes and packages for apt- and npm-style
  clients), and any other path below a directory DIR/<host>/<top> 404.
Prints {"ready": true} once all listen."""
import json
import os
import socket
import ssl
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def log(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def dns_answer(msg, names):
    if len(msg) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", msg[:6])
    if qd != 1:
        return None
    i, labels = 12, []
    while i < len(msg) and msg[i] != 0:
        n = msg[i]
        labels.append(msg[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    question = msg[12:i + 5]
    qtype = struct.unpack("!H", msg[i + 1:i + 3])[0]
    name = ".".join(labels).lower()
    log({"dns": name, "type": qtype})
    ips = names.get(name)
    rcode = 0 if ips is not None else 3
    # One address or a list of them, in that order; A for IPv4
    # addresses, AAAA for IPv6 ones: the other type has no data.
    ips = [] if ips is None else ips if isinstance(ips, list) else [ips]
    family = socket.AF_INET6 if ips and ":" in ips[0] else socket.AF_INET
    rtype = 28 if family == socket.AF_INET6 else 1
    ans = ips if qtype == rtype else []
    head = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, len(ans), 0, 0)
    body = question
    for ip in ans:
        data = socket.inet_pton(family, ip)
        body += struct.pack("!HHHIH", 0xC00C, rtype, 1, 30, len(data))
        body += data
    return head + body


def family(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def serve_dns(addr, names):
    s = socket.socket(family(addr), socket.SOCK_DGRAM)
    s.bind((addr, 53))
    while True:
        msg, peer = s.recvfrom(4096)
        out = dns_answer(msg, names)
        if out is not None:
            s.sendto(out, peer)


def serve_echo(addr):
    s = socket.socket(family(addr), socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 7000))
    s.listen(16)
    while True:
        c, _ = s.accept()
        threading.Thread(target=echo, args=(c,), daemon=True).start()


def echo(c):
    with c:
        while True:
            b = c.recv(65536)
            if not b:
                return
            c.sendall(b)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        # Head and body are two writes: no Nagle wait between them.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def answer(self, body):
        tls = isinstance(self.connection, ssl.SSLSocket)
        log({"http": self.headers.get("Host"), "path": self.path,
             "tls": tls, "method": self.command,
             "resumed": tls and self.connection.session_reused,
             "peer": self.client_address[1]})
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def reflect(self, body=b""):
        """An echo server: the request's head and body come back in the
        body and each field as an X-Echo-<name> field, and the whole
        request is logged (what the upstream received)."""
        head = "%s %s\n" % (self.command, self.path) + "".join(
            "%s: %s\n" % (k, v) for k, v in self.headers.items())
        log({"reflect": self.headers.get("Host"), "path": self.path,
             "headers": dict(self.headers.items()),
             "body": body.decode("latin-1")})
        data = head.encode("latin-1") + b"\n" + body
        self.send_response(200)
        for k, v in self.headers.items():
            self.send_header("X-Echo-" + k, v)
        if self.path.startswith("/reflect-gzip"):
            self.send_header("Content-Encoding", "gzip")
        if self.path.startswith("/reflect-chunked"):
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(data), 7):
                part = data[i:i + 7]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.startswith("/reflect"):
            self.reflect()
            return
        if self.path.startswith("/redirect"):
            log({"redirect": self.headers.get("Host"),
                 "headers": dict(self.headers.items())})
            self.send_response(302)
            self.send_header("Location", "https://other.cred.test/reflect")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if getattr(self, "drop_next", False):
            # An upstream whose keep-alive ran out just as the next
            # request came: closed, nothing answered.
            log({"dropped": self.headers.get("Host")})
            self.close_connection = True
            return
        if self.serve_file():
            return
        if self.path == "/drop-next":
            self.drop_next = True
        if self.path.startswith("/big/"):
            n = int(self.path.split("/")[2])
            log({"http": self.headers.get("Host"), "path": self.path,
                 "peer": self.client_address[1]})
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            while n > 0:
                self.wfile.write(chunk[:min(n, len(chunk))])
                n -= min(n, len(chunk))
            return
        if self.path == "/chunked":
            log({"http": self.headers.get("Host"), "path": self.path})
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"chunk-one ", b"chunk-two"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.answer("hello %s %s\n" % (self.headers.get("Host"),
                                       self.path))

    def serve_file(self):
        root = os.environ.get("UPSTREAM_FILES")
        host = (self.headers.get("Host") or "").split(":")[0].lower()
        path = self.path.split("?")[0]
        if not root or not host or ".." in path or "/" in host:
            return False
        top = path.lstrip("/").split("/")[0]
        if not top or not os.path.isdir(os.path.join(root, host, top)):
            return False
        f = os.path.join(root, host, path.lstrip("/"))
        if os.path.isdir(f):
            f = os.path.join(f, "index")
        if not os.path.isfile(f):
            # Below a served directory, what is not there is not there
            # (apt asks for InRelease first).
            log({"http": self.headers.get("Host"), "path": self.path,
                 "file": False})
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True
        with open(f, "rb") as fh:
            data = fh.read()
        log({"http": self.headers.get("Host"), "path": self.path,
             "tls": isinstance(self.connection, ssl.SSLSocket),
             "method": self.command, "file": True})
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return True

    def do_POST(self):
        if self.path.startswith("/reflect"):
            n = int(self.headers.get("Content-Length", "0"))
            self.reflect(self.rfile.read(n))
            return
        if self.headers.get("Transfer-Encoding") == "chunked":
            body, chunks = b"", 0
            while True:
                n = int(self.rfile.readline().split(b";")[0], 16)
                if n == 0:
                    self.rfile.readline()
                    break
                body += self.rfile.read(n)
                self.rfile.readline()
                chunks += 1
            self.answer("posted chunked %d: %s\n" % (len(body),
                                                      body.decode()))
            return
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n).decode()
        self.answer("posted %d: %s\n" % (n, body))


def main():
    addr, cert, key, names = sys.argv[1], sys.argv[2], sys.argv[3], \
        json.loads(sys.argv[4])
    threading.Thread(target=serve_dns, args=(addr, names),
                     daemon=True).start()
    threading.Thread(target=serve_echo, args=(addr,), daemon=True).start()
    server = type("Server", (ThreadingHTTPServer,),
                  {"address_family": family(addr)})
    plain = server((addr, 80), Handler)
    tls = server((addr, 443), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
    for srv in (plain, tls):
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    log({"ready": True})
    threading.Event().wait()


if __name__ == "__main__":
    main()
