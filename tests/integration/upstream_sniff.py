"""Every frame arriving on the upstream world's veth that did not come
from the host's end of it (run inside the world's namespace):

    upstream_sniff.py IFACE HOST_ADDR

Legitimate traffic (the gateway's upstream connections and lookups)
comes from the host's namespace: IPv4 from HOST_ADDR, ARP for it, and
the host veth's own IPv6 link-local chatter. Anything else (another
source address, another MAC, IPv6 that is not link-local, a frame
carrying the marker "rtmark") is printed as {"foreign": why, ...}.
Prints {"ready": true} once listening."""
import json
import socket
import struct
import sys

MARKER = b"rtmark"


def log(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    iface, host = sys.argv[1], socket.inet_aton(sys.argv[2])
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((iface, 0))
    own = s.getsockname()[4]
    host_mac = None
    log({"ready": True})
    while True:
        frame, addr = s.recvfrom(65535)
        if addr[2] == socket.PACKET_OUTGOING or len(frame) < 14:
            continue
        src_mac, etype = frame[6:12], struct.unpack("!H", frame[12:14])[0]
        body, why = frame[14:], None
        if etype == 0x0800 and len(body) >= 20:
            src = body[12:16]
            if src != host:
                why = "ipv4 from " + socket.inet_ntoa(src)
            elif host_mac is None:
                host_mac = src_mac
        elif etype == 0x0806 and len(body) >= 28:
            if body[14:18] != host:
                why = "arp from " + socket.inet_ntoa(body[14:18])
        elif etype == 0x86DD and len(body) >= 40:
            if body[8:10] != b"\xfe\x80":
                why = "ipv6 from " + socket.inet_ntop(socket.AF_INET6,
                                                      body[8:24])
        else:
            why = "ethertype 0x%04x" % etype
        if why is None and host_mac is not None and src_mac != host_mac \
                and src_mac != own:
            why = "mac " + src_mac.hex(":")
        if why is None and MARKER in frame:
            why = "marker"
        if why is not None:
            log({"foreign": why, "marker": MARKER in frame,
                 "len": len(frame)})


if __name__ == "__main__":
    main()
