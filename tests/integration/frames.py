"""core/agentproto frames for the Python side of tests: a 16-byte
header (magic "ALF1", type, flags 0, id, payload length; big-endian)
and a payload. The frame types tests speak are named here."""
import os
import struct

MAGIC = 0x414C4631
HDR = ">IHHII"
HDR_LEN = 16

GW_CONFIG, GW_ACK = 41, 42
CRED_HELLO, CRED_SET, CRED_SET_ACK = 50, 51, 52
CRED_TAKE, CRED_GRANT, CRED_USE = 53, 54, 55


def pack(ftype, fid, payload=b""):
    return struct.pack(HDR, MAGIC, ftype, 0, fid, len(payload)) + payload


def read_exact(fd, n):
    """n bytes from fd, or None at EOF."""
    b = b""
    while len(b) < n:
        c = os.read(fd, n - len(b))
        if not c:
            return None
        b += c
    return b


def read(fd):
    """(type, id, payload) of the next frame, or None at EOF."""
    h = read_exact(fd, HDR_LEN)
    if h is None:
        return None
    magic, ftype, flags, fid, n = struct.unpack(HDR, h)
    if magic != MAGIC or flags != 0:
        raise ValueError("not an agentproto frame")
    payload = read_exact(fd, n) if n else b""
    if payload is None:
        return None
    return ftype, fid, payload


def send(fd, ftype, fid, payload=b""):
    data = pack(ftype, fid, payload)
    while data:
        data = data[os.write(fd, data):]
