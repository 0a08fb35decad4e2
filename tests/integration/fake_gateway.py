#!/usr/bin/python3 -I
"""A stand-in for airlock-gateway, started by the shim through
AIRLOCK_GATEWAY under the gateway process contract (RULES.md): fd 3 DNS
UDP, 4 DNS TCP, 5 the transparent listener, 6 control (agentproto
frames). It reads the first frame on fd 6; once that is a GW_CONFIG for
its own --sandbox, naming a gateway address, it ACKs it and answers every
DNS query on fd 3 with one A record, 198.18.0.77: what a guest sees only
when its gateway runs, is configured and is reachable.
test_network.py uses it until the real gateway lands."""
import json
import os
import select
import socket
import struct
import sys

MAGIC = 0x414C4631
GW_CONFIG, GW_ACK = 41, 42
ANSWER = bytes([198, 18, 0, 77])


def read_exact(fd, n):
    b = b""
    while len(b) < n:
        c = os.read(fd, n - len(b))
        if not c:
            sys.exit(0)  # the shim closed the channel: end
        b += c
    return b


def frame(fd):
    magic, ftype, flags, fid, n = struct.unpack(">IHHII", read_exact(fd, 16))
    if magic != MAGIC or flags != 0:
        sys.exit(2)
    return ftype, fid, read_exact(fd, n)


def send(fd, ftype, fid, payload):
    os.write(fd, struct.pack(">IHHII", MAGIC, ftype, 0, fid, len(payload))
             + payload)


def answer(q):
    if len(q) < 12:
        return None
    qid = q[:2]
    end = 12
    while end < len(q) and q[end] != 0:
        end += q[end] + 1
    question = q[12:end + 5]
    hdr = qid + b"\x81\x80" + struct.pack(">HHHH", 1, 1, 0, 0)
    rr = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + ANSWER
    return hdr + question + rr


def main():
    sandbox = sys.argv[sys.argv.index("--sandbox") + 1]
    ftype, fid, payload = frame(6)
    conf = json.loads(payload)
    ok = (ftype == GW_CONFIG and conf.get("sandbox") == sandbox
          and conf.get("gateway"))
    send(6, GW_ACK, fid, b'{"ok":true}' if ok else b'{"ok":false}')
    if not ok:
        sys.exit(3)
    print(f"fake gateway {os.getpid()} uid {os.getuid()} for {sandbox} "
          f"at {conf['gateway']}", file=sys.stderr, flush=True)
    dns = socket.socket(fileno=3)
    while True:
        r, _, _ = select.select([3, 6], [], [])
        if 6 in r:
            frame(6)  # later configs: ignored; EOF ends us
        if 3 in r:
            q, peer = dns.recvfrom(512)
            a = answer(q)
            if a:
                dns.sendto(a, peer)


if __name__ == "__main__":
    main()
