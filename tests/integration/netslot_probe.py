"""Runs inside a slot's namespace (started by test_netslot.py through
nsenter) and tries what a sandbox would. Prints one JSON object: check
name -> outcome ("gw", "ok", "timeout", "refused", "EPERM", ...).

argv: MODE CHECKS_JSON
  MODE "root": host root in the namespace (the strongest inside: what a
  process would be if it escaped its user namespace).
  MODE "userns": first a new user namespace whose 0..65535 map to an
  unprivileged host range, as root of it: what the ns jail's root is.
Only addresses of namespaces the test made are used; nothing leaves."""
import ctypes
import errno
import json
import os
import socket
import struct
import subprocess
import sys

CLONE_NEWUSER = 0x10000000
USERNS_BASE = 0x72000000 + 2047 * 65536  # the last ns range slot
TIMEOUT = 0.7


def enter_userns():
    """Fork; the child unshares a user namespace, the parent (host root)
    writes its maps, the child becomes its root."""
    r, w = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWUSER) != 0:
            os._exit(1)
        os.write(w, b"u")
        os.read(r2, 1)
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
        return True
    os.read(r, 1)
    for f in ("uid_map", "gid_map"):
        with open(f"/proc/{pid}/{f}", "w") as m:
            m.write(f"0 {USERNS_BASE} 65536\n")
    os.write(w2, b"g")
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))


def err_name(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else str(e)


def tcp(host, port):
    s = socket.socket()
    s.settimeout(TIMEOUT)
    try:
        s.connect((host, port))
        data = s.recv(16)
        return "gw" if data == b"gw\n" else "open:" + data.decode(errors="replace")
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return err_name(e)
    finally:
        s.close()


def udp(host, port, payload):
    """A connected UDP socket: a reply is "ok", an ICMP error (the
    datagram got through to a closed port) "ECONNREFUSED", a drop
    "timeout"."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(TIMEOUT)
    try:
        s.connect((host, port))
        s.send(payload.encode())
        data = s.recv(16)
        return "ok" if data == b"ok" else "reply:" + data.decode(errors="replace")
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return err_name(e)
    finally:
        s.close()


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4(src, dst, proto, payload):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0, 64,
                    proto, 0, socket.inet_aton(src), socket.inet_aton(dst))
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return h + payload


def udp_packet(src, dst, dport, data):
    u = struct.pack("!HHHH", 40000, dport, 8 + len(data), 0) + data
    return ipv4(src, dst, 17, u)


def icmp_echo(host):
    """Raw ICMP echo (needs CAP_NET_RAW over the namespace): a reply
    means ICMP got through."""
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    except OSError as e:
        return err_name(e)
    s.settimeout(TIMEOUT)
    body = struct.pack("!BBHHH", 8, 0, 0, 0x1234, 1) + b"probe"
    body = body[:2] + struct.pack("!H", csum(body)) + body[4:]
    try:
        s.sendto(body, (host, 0))
        while True:
            data, addr = s.recvfrom(256)
            if addr[0] == host and data[20] == 0:
                return "reply"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return err_name(e)
    finally:
        s.close()


def raw_udp(src, dst, dport, data):
    """An IPv4/UDP datagram with a source address of our choosing."""
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        s.sendto(udp_packet(src, dst, dport, data.encode()), (dst, 0))
        s.close()
        return "sent"
    except OSError as e:
        return err_name(e)


def frame(ifname, src_mac, dst_mac, ethertype, payload):
    """A whole Ethernet frame of our making on ifname (AF_PACKET)."""
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind((ifname, 0))
        s.send(bytes.fromhex(dst_mac.replace(":", "")) +
               bytes.fromhex(src_mac.replace(":", "")) +
               struct.pack("!H", ethertype) + payload)
        s.close()
        return "sent"
    except OSError as e:
        return err_name(e)


def udp6(host, port):
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.settimeout(TIMEOUT)
        s.connect((host, port))
        s.send(b"v6")
        s.recv(16)
        return "reply"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return err_name(e)


def run(argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except OSError as e:
        return err_name(e)
    if p.returncode == 0:
        return "ok"
    msg = (p.stderr or p.stdout).lower()
    return "EPERM" if "not permitted" in msg or "permission denied" in msg \
        else "failed:" + msg.strip()[:120]


def sysctl_write(key, value):
    try:
        with open("/proc/sys/" + key, "w") as f:
            f.write(value)
        return "ok"
    except OSError as e:
        return err_name(e)


CHECKS = {
    "tcp": tcp, "udp": udp, "icmp": icmp_echo, "raw_udp": raw_udp,
    "udp_frame": lambda i, s, d, src, dst, port, data: frame(
        i, s, d, 0x0800, udp_packet(src, dst, port, data.encode())),
    "udp6": udp6, "run": run, "sysctl": sysctl_write,
}


def main():
    mode, checks = sys.argv[1], json.loads(sys.argv[2])
    if mode == "userns":
        enter_userns()
    out = {}
    for name, fn, *args in checks:
        out[name] = CHECKS[fn](*args)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
