"""What a sandbox sees of the machine, and that one sandbox's abuse of
processes and memory does not reach another."""
import ipaddress
import os
import socket
import threading

import pytest

from conftest import exec_json, qemu_of


def sh(api, sid, script, **kw):
    return exec_json(api, sid, ["sh", "-c", script], **kw)


def test_own_pid_namespace(api, sandbox):
    # Every process the sandbox can see, by command line. Kernel threads
    # have none: a vm's own guest kernel has dozens of them, which are no
    # host processes, so only processes with a command line are counted.
    res = sh(api, sandbox["id"],
             "for p in /proc/[0-9]*; do "
             "c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); "
             "[ -n \"$c\" ] && echo \"${p#/proc/} $c\"; done; true")
    procs = res["stdout"].splitlines()
    # The agent (and, in a vm, the guest init), the shell, tr: nothing
    # of the host.
    assert 0 < len(procs) < 20, res
    host_marks = ("pytest", "airlock-shim", "airlock-fcgi", "postgres",
                  "nginx", "qemu-system")
    assert not [p for p in procs if any(m in p for m in host_marks)], procs


def test_own_hostname(api, sandbox):
    res = sh(api, sandbox["id"], "hostname")
    assert res["exit_code"] == 0
    assert res["stdout"].strip() != socket.gethostname()


def test_network_is_only_its_slot(api, sandbox):
    res = sh(api, sandbox["id"],
             "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ';"
             "echo ROUTES; tail -n +2 /proc/net/route")
    names, _, routes = res["stdout"].partition("ROUTES")
    # Loopback and the slot's link (test_network.py checks its address;
    # mode none, loopback only: test_network_none.py). Every route goes
    # through eth0 and stays in the slot pool: the /30 and the default
    # via the gateway, nothing toward the host's networks.
    assert sorted(names.split()) == ["eth0", "lo"], res
    rows = [r.split() for r in routes.strip().splitlines()]
    assert rows, res
    pool = ipaddress.ip_network("10.200.0.0/16")
    for r in rows:
        dest = ipaddress.ip_address(bytes.fromhex(r[1])[::-1])
        gw = ipaddress.ip_address(bytes.fromhex(r[2])[::-1])
        assert r[0] == "eth0", res
        assert (dest == ipaddress.ip_address("0.0.0.0") and gw in pool) or \
            (dest in pool and int(gw) == 0), res


def test_no_host_filesystem(api, sandbox, stack):
    # The state directory is on the host; the sandbox has its own root.
    res = sh(api, sandbox["id"], f"ls {stack.state} 2>&1; ls /; true")
    assert "pool.img" not in res["stdout"]
    assert "api-key" not in res["stdout"]


def test_system_call_allowlist(api, sandbox):
    if sandbox["driver"] != "ns":
        pytest.skip("a vm sandbox runs on its own guest kernel")
    # A user namespace needs no capability: only the seccomp allowlist
    # refuses it. Docker's personas stay usable (linux32).
    res = sh(api, sandbox["id"],
             "grep '^Seccomp:' /proc/self/status; "
             "unshare -U true 2>&1; echo unshare=$?; linux32 uname -m")
    out = res["stdout"]
    assert "Seccomp:\t2" in out, res
    assert "Operation not permitted" in out, res
    assert "unshare=0" not in out, res
    assert out.strip().endswith("i686"), res


def host_sleepers(seconds):
    """Host processes running `sleep <seconds>`."""
    n = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if f.read().split(b"\0")[:2] == [b"sleep", seconds.encode()]:
                    n += 1
        except OSError:
            pass
    return n


def test_fork_bomb_is_contained(stack, api, sandboxes, driver):
    victim = sandboxes.create()
    # ns: the bomb stops at the host pids cgroup of the sandbox. vm: the
    # bomb runs inside the sandbox's own guest kernel, which the host
    # sees as one QEMU process; the guest's RAM and its kernel contain it
    # (the pids field limits the host-side jail, not guest processes).
    bomber = sandboxes.create(pids=64) if driver == "ns" else \
        sandboxes.create()
    qemu = qemu_of(stack, bomber["id"]) if driver == "vm" else None
    if driver == "vm":
        assert qemu is not None, "no QEMU found for the vm sandbox"
    done = {}

    def bomb():
        # Bounded, so a missing limit cannot take the machine down: it
        # tries 400 processes where the sandbox allows 64.
        # The forking runs in a subshell (ash exits when a fork fails);
        # counting uses a glob, which needs no fork.
        done["res"] = sh(api, bomber["id"],
                         "(i=0; while [ $i -lt 400 ]; do sleep 37 & "
                         "i=$((i+1)); done) 2>/dev/null; "
                         "set -- /proc/[0-9]*; echo $#", timeout=60)
        done["host_sleepers"] = host_sleepers("37")

    t = threading.Thread(target=bomb)
    t.start()
    try:
        for _ in range(5):
            res = sh(api, victim["id"], "echo alive")
            assert res["stdout"] == "alive\n"
    finally:
        t.join(120)
    assert "res" in done
    stdout = done["res"]["stdout"].strip().splitlines()
    assert stdout, done["res"]
    if driver == "ns":
        assert int(stdout[-1]) <= 64, done["res"]
    else:
        # The guest ran the bomb (its kernel holds well over 64 of the
        # sleepers at once) while none of them exists on the host, and
        # the sandbox is still the same single QEMU, still answering.
        res = sh(api, bomber["id"], "pidof sleep | wc -w")
        assert int(res["stdout"]) > 64, res
        assert done["host_sleepers"] == 0, done
        assert qemu_of(stack, bomber["id"]) == qemu
    # The bombed sandbox can still be deleted cleanly.
    r = api.delete(f"{api.base}/v1/sandboxes/{bomber['id']}", timeout=(5, 60))
    assert r.status_code == 204


def test_memory_hog_is_contained(api, sandboxes, driver):
    victim = sandboxes.create()
    # ns: a 128 MB cgroup limit. vm: the guest has its fixed 256 MiB of
    # RAM and no swap; its own kernel refuses or OOM-kills inside it.
    hog = sandboxes.create(memory_mb=128) if driver == "ns" else \
        sandboxes.create()
    done = {}

    def eat():
        # 600 MB in one buffer against a 128 (256) MB limit; bounded so
        # that a missing limit costs the host little.
        done["res"] = sh(api, hog["id"],
                         "dd if=/dev/zero of=/dev/null bs=600M count=1 "
                         "2>/dev/null; echo rc=$?", timeout=60)

    t = threading.Thread(target=eat)
    t.start()
    try:
        for _ in range(5):
            res = sh(api, victim["id"], "echo alive")
            assert res["stdout"] == "alive\n"
    finally:
        t.join(90)
    assert "res" in done
    res = done["res"]
    # dd was OOM-killed (rc=137) or refused its buffer, or the shell
    # itself was killed: never a successful 600 MB allocation.
    assert "rc=0" not in res["stdout"], res
    # The other sandbox still works, and so does the hog's.
    assert sh(api, victim["id"], "echo ok")["stdout"] == "ok\n"
    assert sh(api, hog["id"], "echo ok")["stdout"] == "ok\n"
