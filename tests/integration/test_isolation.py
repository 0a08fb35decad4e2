"""What a sandbox sees of the machine, and that one sandbox's abuse of
processes and memory does not reach another."""
import socket
import threading

from conftest import exec_json


def sh(api, sid, script, **kw):
    return exec_json(api, sid, ["sh", "-c", script], **kw)


def test_own_pid_namespace(api, sandbox):
    res = sh(api, sandbox["id"], "ls /proc | grep -c '^[0-9]*$'")
    # The agent, the shell, ls and grep: nothing of the host.
    assert int(res["stdout"]) < 20, res


def test_own_hostname(api, sandbox):
    res = sh(api, sandbox["id"], "hostname")
    assert res["exit_code"] == 0
    assert res["stdout"].strip() != socket.gethostname()


def test_loopback_only_network(api, sandbox):
    res = sh(api, sandbox["id"],
             "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    assert res["stdout"].split() == ["lo"], res


def test_no_host_filesystem(api, sandbox, stack):
    # The state directory is on the host; the sandbox has its own root.
    res = sh(api, sandbox["id"], f"ls {stack.state} 2>&1; ls /; true")
    assert "pool.img" not in res["stdout"]
    assert "api-key" not in res["stdout"]


def test_fork_bomb_is_contained(api, sandboxes):
    victim = sandboxes.create()
    bomber = sandboxes.create(pids=64)
    done = {}

    def bomb():
        # Bounded, so a missing limit cannot take the machine down: it
        # tries 400 processes where the sandbox allows 64.
        # The forking runs in a subshell (ash exits when a fork fails);
        # counting uses a glob, which needs no fork.
        done["res"] = sh(api, bomber["id"],
                         "(i=0; while [ $i -lt 400 ]; do sleep 20 & "
                         "i=$((i+1)); done) 2>/dev/null; "
                         "set -- /proc/[0-9]*; echo $#", timeout=30)

    t = threading.Thread(target=bomb)
    t.start()
    try:
        for _ in range(5):
            res = sh(api, victim["id"], "echo alive")
            assert res["stdout"] == "alive\n"
    finally:
        t.join(90)
    assert "res" in done
    stdout = done["res"]["stdout"].strip().splitlines()
    assert stdout, done["res"]
    assert int(stdout[-1]) <= 64, done["res"]
    # The bombed sandbox can still be deleted cleanly.
    r = api.delete(f"{api.base}/v1/sandboxes/{bomber['id']}", timeout=(5, 60))
    assert r.status_code == 204


def test_memory_hog_is_contained(api, sandboxes):
    victim = sandboxes.create()
    hog = sandboxes.create(memory_mb=128)
    done = {}

    def eat():
        # 600 MB in one buffer against a 128 MB limit; bounded so that a
        # missing limit costs the host little.
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
