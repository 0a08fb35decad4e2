"""The jail against root inside: host inodes, host files, the agent, host
processes, per-user kernel limits. Each test is one attempt (a row of the
table) and fails when the attempt succeeded."""
import ctypes
import os
import signal
import stat
import subprocess
import time
import uuid

# The host nodes the ns jail binds into its /dev (core/jail/driver.c), and
# /dev/null, which also masks /proc files: compared down to the ctime.
BOUND = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random",
         "/dev/urandom"]


def snap(paths, ctime=False):
    """{path: (mode, uid, gid[, ctime])} of what exists on the host."""
    out = {}
    for p in paths:
        try:
            st = os.lstat(p)
        except OSError:
            continue
        v = (st.st_mode, st.st_uid, st.st_gid)
        out[p] = v + (st.st_ctime_ns,) if ctime else v
    return out


def walk(top, depth):
    """top and what lies under it, depth levels down, not following links."""
    out = [top]
    if depth == 0:
        return out
    try:
        with os.scandir(top) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    out += walk(e.path, depth - 1)
                else:
                    out.append(e.path)
    except OSError:
        pass
    return out


def changes(before, after):
    diff = []
    for p, v in before.items():
        w = after.get(p)
        if w is not None and w != v:
            diff.append(f"{p} {tuple(map(oct, v[:1]))+v[1:]} -> "
                        f"{tuple(map(oct, w[:1]))+w[1:]}")
    return diff


def host_dev():
    # tty-like nodes get their times touched by the host's own use.
    dev = snap(walk("/dev", 1) + ["/dev/pts/ptmx"])
    dev.update(snap(BOUND, ctime=True))
    return dev


# The same loop for every tree: chmod, chown, touch each entry, counting
# the operations the kernel allowed (on the sandbox's own inodes they may).
ATTACK = ("n=0; for f in $(find {top} -xdev 2>/dev/null); do "
          "chmod 0777 $f 2>/dev/null && n=$((n+1)); "
          "chown 1:1 $f 2>/dev/null && n=$((n+1)); "
          "touch -c $f 2>/dev/null && n=$((n+1)); done; echo allowed=$n")


def attack_tree(rt, sid, top, host_paths, ctime_paths=()):
    before = snap(host_paths)
    before.update(snap(ctime_paths, ctime=True))
    _, out = rt.sh(sid, ATTACK.format(top=top))
    after = snap(host_paths)
    after.update(snap(ctime_paths, ctime=True))
    return changes(before, after), out.strip(), len(before)


def test_dev_nodes(rt, ns_boxes):
    sid = ns_boxes.create()["id"]
    before = host_dev()
    _, out = rt.sh(sid, ATTACK.format(top="/dev"))
    after = host_dev()
    diff = changes(before, after)
    assert len(before) > len(BOUND)
    result = (f"host unchanged ({len(before)} nodes compared; inside "
              f"{out.strip()})" if not diff else "CHANGED: " + "; ".join(diff))
    assert not rt.record("chmod/chown/touch everything in /dev", "ns",
                         "host nodes unchanged", result, bool(diff)), result


def test_mknod(rt, ns_boxes):
    sid = ns_boxes.create()["id"]
    rc, out = rt.sh(sid, "mknod /tmp/mem c 1 1 && head -c1 /tmp/mem | wc -c;"
                         " mknod /dev/kmsg2 c 1 11 && echo made-dev")
    escaped = rc == 0 or "made-dev" in out
    assert not rt.record("mknod /dev/mem-like nodes and read them", "ns",
                         "refused", out.strip().replace("\n", "; "),
                         escaped), out


def test_proc(rt, ns_boxes):
    sid = ns_boxes.create()["id"]
    host = walk("/proc/sys", 6) + [
        os.path.join("/proc", e) for e in os.listdir("/proc")
        if not e.isdigit()]
    # The masks are the host's /dev/null: its ctime would show a chmod.
    diff, out, n = attack_tree(rt, sid, "/proc", host, ["/dev/null"])
    result = (f"host unchanged ({n} inodes compared; inside {out})"
              if not diff else "CHANGED: " + "; ".join(diff[:5]))
    assert not rt.record("chmod/chown/touch everything in /proc", "ns",
                         "host inodes unchanged", result, bool(diff)), result
    rc, out = rt.sh(sid, "cat /proc/sys/kernel/hostname > "
                         "/proc/sys/kernel/hostname && echo WROTE")
    escaped = "WROTE" in out
    assert not rt.record("write a /proc/sys file", "ns", "refused",
                         out.strip(), escaped), out


def test_sys(rt, ns_boxes):
    sid = ns_boxes.create()["id"]
    diff, out, n = attack_tree(rt, sid, "/sys", walk("/sys", 2))
    # 62656572: sysfs's magic number.
    rc, mnt = rt.sh(sid, "mount -t sysfs sysfs /sys 2>&1 && echo MOUNTED; "
                         "echo /sys is $(stat -f -c %t /sys)")
    escaped = bool(diff) or "MOUNTED" in mnt or "62656572" in mnt
    mnt = mnt.strip().replace("\n", "; ")
    result = (f"host unchanged ({n} inodes compared; inside {out}); "
              f"{mnt}")
    if diff:
        result = "CHANGED: " + "; ".join(diff[:5])
    assert not rt.record("chmod/chown/touch /sys, mount sysfs", "ns",
                         "host unchanged, no sysfs", result, escaped), result


def test_proc_root(rt, ns_boxes, tmp_path):
    sid = ns_boxes.create()["id"]
    secret = uuid.uuid4().hex
    canary = tmp_path / "canary"
    canary.write_text(secret)
    p = str(canary)
    _, out = rt.sh(sid, f"for d in /proc/*/root /proc/*/cwd; do "
                        f"cat $d{p} $d/../../..{p} 2>/dev/null; done; "
                        f"cat /proc/1/root/proc/1/root{p} 2>/dev/null; "
                        f"ls /proc | grep -c '^[0-9]'")
    escaped = secret in out
    pids = out.strip().splitlines()[-1]
    assert not rt.record("read a host file via /proc/*/root, /proc/*/cwd",
                         "ns", "not readable",
                         f"not read ({pids} pids visible)" if not escaped
                         else "READ", escaped), out


def test_open_by_handle_at(rt, ns_boxes, probe):
    sid = ns_boxes.create()["id"]
    rt.put(sid, "/tmp/probe", probe)
    rc, out = rt.sh(sid, "/tmp/probe handle")
    assert not rt.record("open_by_handle_at (own root, forged pool root)",
                         "ns", "refused", out.strip().replace("\n", "; "),
                         rc != 0), out


def test_ptrace_agent(rt, ns_boxes, probe):
    sid = ns_boxes.create()["id"]
    rt.put(sid, "/tmp/probe", probe)
    # Control: the probe does succeed on a process of the sandbox's own
    # (same uid, dumpable), so a refusal below is the agent's protection.
    rc, ctl = rt.sh(sid, "sleep 30 & p=$!; /tmp/probe ptrace $p; "
                         "r=$?; kill $p; exit $r")
    assert rc == 1 and "ATTACHED" in ctl, f"control ptrace failed: {ctl}"
    rc, out = rt.sh(sid, "/tmp/probe ptrace 1")
    assert not rt.record("ptrace / read memory of the agent (pid 1)", "ns",
                         "refused", out.strip().replace("\n", "; "),
                         rc != 0), out


def test_kill_host_pids(rt, stack, ns_boxes):
    sid = ns_boxes.create()["id"]
    victim = subprocess.Popen(["sleep", "300"])
    try:
        shims = stack.pids("airlock-shim")
        targets = [victim.pid, os.getpid(), *shims]
        script = "; ".join(f"kill -9 {p} 2>&1" for p in targets)
        _, out = rt.sh(sid, script + "; kill -9 -1 2>&1; echo sent")
        time.sleep(0.2)
        dead = [p for p in targets if not it_alive(p)]
        escaped = bool(dead)
        result = (f"all {len(targets)} host pids alive (test, sleep, shims)"
                  if not escaped else f"KILLED {dead}")
        assert not rt.record("kill -9 host pids (a sleep, the shims), -1",
                             "ns", "no host process hurt", result,
                             escaped), out
    finally:
        victim.kill()
        victim.wait()


def it_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_inotify_limits(rt, ns_boxes, probe):
    """200 instances held in one sandbox; the host and a neighbour can
    still make theirs: the sandbox's count is its own user's, not host
    root's (its user namespace is owned by its own host uid)."""
    with open("/proc/sys/fs/inotify/max_user_instances") as f:
        limit = int(f.read())
    a = ns_boxes.create()["id"]
    b = ns_boxes.create()["id"]
    for sid in (a, b):
        rt.put(sid, "/tmp/probe", probe)
    rt.sh(a, "(/tmp/probe inotify 200 30 > /tmp/ino 2>&1 </dev/null &); "
             "sleep 1")
    _, held = rt.sh(a, "cat /tmp/ino")
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    host_ok = fd >= 0
    host = "host: made one" if host_ok else \
        f"host: {os.strerror(ctypes.get_errno())}"
    if fd >= 0:
        os.close(fd)
    rc, neigh = rt.sh(b, "/tmp/probe inotify 1 0")
    escaped = not host_ok or rc != 0
    rt.sh(a, "pkill -f 'probe inotify' || killall probe; true", check=False)
    result = (f"{held.strip()} in one; {host}; neighbour: {neigh.strip()} "
              f"(max_user_instances={limit})")
    assert not rt.record("200 inotify instances starve host root and a "
                         "neighbour", "ns", "host and neighbour unaffected",
                         result, escaped), result


def test_vm_dev_nodes(rt, vm_boxes):
    sid = vm_boxes.create()["id"]
    before = host_dev()
    _, out = rt.sh(sid, ATTACK.format(top="/dev"))
    after = host_dev()
    diff = changes(before, after)
    result = (f"host unchanged ({len(before)} nodes compared; inside "
              f"{out.strip()})" if not diff else "CHANGED: " + "; ".join(diff))
    assert not rt.record("chmod/chown/touch everything in /dev", "vm",
                         "host nodes unchanged", result, bool(diff)), result


def test_vm_kill_host_pids(rt, stack, vm_boxes):
    sid = vm_boxes.create()["id"]
    victim = subprocess.Popen(["sleep", "300"])
    try:
        targets = [victim.pid, os.getpid(), *stack.pids("airlock-shim")]
        script = "; ".join(f"kill -9 {p} 2>&1" for p in targets)
        rt.sh(sid, script + "; echo sent")
        time.sleep(0.2)
        dead = [p for p in targets if not it_alive(p)]
        result = (f"all {len(targets)} host pids alive" if not dead
                  else f"KILLED {dead}")
        assert not rt.record("kill -9 host pids (a sleep, the shims)", "vm",
                             "no host process hurt", result,
                             bool(dead)), result
    finally:
        victim.kill()
        victim.wait()


def test_root_is_not_host_root(rt, ns_boxes):
    """A create (a warm-pool claim, when a standby waits) gives root
    inside an unprivileged host range of 65536 of its own."""
    a = ns_boxes.create()["id"]
    b = ns_boxes.create()["id"]
    maps = []
    for sid in (a, b):
        _, out = rt.sh(sid, "cat /proc/self/uid_map /proc/self/gid_map")
        maps.append([line.split() for line in out.strip().splitlines()])
    bases = []
    escaped = False
    for m in maps:
        escaped |= len(m) != 2 or m[0] != m[1] or m[0][0] != "0" or \
            m[0][2] != "65536" or int(m[0][1]) < 65536
        bases.append(int(m[0][1]) if m and len(m[0]) == 3 else 0)
    escaped |= abs(bases[0] - bases[1]) < 65536
    result = (f"uid 0 -> host {bases[0]} and {bases[1]} (65536 each, "
              f"disjoint)" if not escaped else f"maps {maps}")
    assert not rt.record("uid 0 inside is host root; two sandboxes share "
                         "uids", "ns", "no: own ranges", result,
                         escaped), result
