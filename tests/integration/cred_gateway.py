#!/usr/bin/python3 -I
"""A stand-in for airlock-gateway (AIRLOCK_GATEWAY) for
test_credentials_channel.py: it ACKs the shim's GW_CONFIGs on fd 6 and
speaks the gateway's side of the credential channel: SETs on fd 7 (or
on a channel the shim passes on fd 6 after a GW_CREDCHAN_REQ, asked
every 200 ms while it has none) are ACKed and reported, values never:
/tmp/airlock-credgw-<sandbox>.json gets {"sets": n, "channels": n,
"version": v, "creds": {name: sha256(value)}, "grants": n, "denials": n}.
On its first set it takes TAKES tokens of every rated credential and
reports one use of each credential (CRED_USE)."""
import hashlib
import json
import os
import select
import socket
import struct
import sys

MAGIC = 0x414C4631
GW_CONFIG, GW_ACK = 41, 42
CRED_SET, CRED_SET_ACK, CRED_TAKE, CRED_GRANT, CRED_USE = 51, 52, 53, 54, 55
GW_CREDCHAN_REQ, GW_CREDCHAN = 59, 60
ERROR = 15
TAKES = 3


def pack(ftype, fid, payload=b""):
    return struct.pack(">IHHII", MAGIC, ftype, 0, fid, len(payload)) + payload


class Reader:
    def __init__(self):
        self.buf = b""

    def frames(self):
        while len(self.buf) >= 16:
            magic, ftype, flags, fid, n = struct.unpack(">IHHII",
                                                        self.buf[:16])
            if magic != MAGIC or flags != 0:
                sys.exit(2)
            if len(self.buf) < 16 + n:
                return
            payload, self.buf = self.buf[16:16 + n], self.buf[16 + n:]
            yield ftype, fid, payload


def main():
    sandbox = sys.argv[2]
    report = f"/tmp/airlock-credgw-{sandbox}.json"
    state = {"sets": 0, "channels": 0, "version": 0, "creds": {},
             "grants": 0, "denials": 0}
    ctl = socket.socket(fileno=6)
    try:
        chan = socket.socket(fileno=7)
        state["channels"] = 1
    except OSError:
        chan = None
    ctl_rd, chan_rd = Reader(), Reader()
    took = False

    def save():
        tmp = report + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.rename(tmp, report)

    while True:
        fds = [ctl] + ([chan] if chan is not None else [])
        ready, _, _ = select.select(fds, [], [], 0.2)
        if chan is None and not ready:
            ctl.sendall(pack(GW_CREDCHAN_REQ, 0))
        if ctl in ready:
            data, anc, _, _ = ctl.recvmsg(65536, socket.CMSG_SPACE(4))
            if not data:
                return
            passed = [struct.unpack("i", d[:4])[0] for lvl, t, d in anc
                      if lvl == socket.SOL_SOCKET and t == socket.SCM_RIGHTS]
            ctl_rd.buf += data
            for ftype, fid, payload in ctl_rd.frames():
                if ftype == GW_CONFIG:
                    ctl.sendall(pack(GW_ACK, fid, b'{"ok":true}'))
                elif ftype == GW_CREDCHAN:
                    ok = json.loads(payload)["ok"]
                    if ok and passed and chan is None:
                        chan = socket.socket(fileno=passed.pop())
                        chan_rd = Reader()
                        state["channels"] += 1
            for fd in passed:
                os.close(fd)
        if chan is not None and chan in ready:
            data = chan.recv(1 << 20)
            if not data:
                chan.close()
                chan = None
                continue
            chan_rd.buf += data
            for ftype, fid, payload in chan_rd.frames():
                if ftype == ERROR:
                    chan.close()
                    chan = None
                    break
                if ftype == CRED_SET:
                    s = json.loads(payload)
                    state["sets"] += 1
                    state["version"] = s["version"]
                    state["creds"] = {
                        c["name"]: hashlib.sha256(
                            c["value"].encode()).hexdigest()
                        for c in s["creds"]}
                    save()
                    ack = json.dumps({"version": s["version"]}).encode()
                    chan.sendall(pack(CRED_SET_ACK, 0, ack))
                    if not took:
                        took = True
                        for c in s["creds"]:
                            u = json.dumps({
                                "name": c["name"], "host": c["hosts"][0],
                                "method": "GET", "path": "/probe",
                                "status": 200, "action": "use",
                                "decision": "allow",
                                "reason": "test"}).encode()
                            chan.sendall(pack(CRED_USE, 0, u))
                        req = 0
                        for c in s["creds"]:
                            for _ in range(TAKES if c["rate"] else 0):
                                req += 1
                                t = json.dumps({"req": req,
                                                "id": c["id"]}).encode()
                                chan.sendall(pack(CRED_TAKE, 0, t))
                elif ftype == CRED_GRANT:
                    g = json.loads(payload)
                    state["grants" if g["ok"] else "denials"] += 1
                    save()


if __name__ == "__main__":
    main()
