"""`make run | tee run.log`, then Ctrl-C: the whole stack stops, although
the pipe's reader (tee) is gone by the time the stop writes its output.

Runs scripts/stack.sh run on a state directory of its own (not the
session's stack), its stdout and stderr on a pipe, in its own process
group like a shell job; the test reads the output until the stack is up,
closes the pipe as tee does on Ctrl-C, and sends SIGINT to the group."""
import os
import signal
import subprocess
import tempfile
import time

from conftest import (REPO, STACK, Stack, _cleanup_state, cmdline, free_port,
                      pid_alive, seed_vm_kernel)

UP_TIMEOUT = 180
DOWN_TIMEOUT = 120


def processes_of(state):
    """Every process whose environment names this state directory."""
    want = f"AIRLOCK_STATE={state}".encode()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    out.append(int(d))
        except OSError:
            continue
    return [p for p in out if pid_alive(p)]


def postmaster(state):
    try:
        with open(os.path.join(state, "pg", "postmaster.pid")) as f:
            return int(f.readline())
    except (OSError, ValueError):
        return None


def mount_type(path):
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, mnt, kind = line.split()[:3]
            if mnt == path:
                return kind
    return None


def test_run_piped_stops_everything_on_ctrl_c():
    build = os.environ.get("AIRLOCK_TEST_BUILD",
                           os.path.join(REPO, "build-san"))
    state = tempfile.mkdtemp(prefix="airlock-run-")
    st = Stack(state, build, free_port(), free_port())
    st.env["AIRLOCK_POOL_SIZE"] = "2G"
    log = []
    try:
        seed_vm_kernel(state)
        p = subprocess.Popen([STACK, "run"], env=st.env, cwd=REPO,
                             stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT,
                             start_new_session=True)
        out = []
        deadline = time.monotonic() + UP_TIMEOUT
        for line in p.stdout:
            out.append(line.decode(errors="replace"))
            if b"Ctrl-C stops everything" in line:
                break
            assert time.monotonic() < deadline, "".join(out)
        assert any("Ctrl-C stops everything" in ln for ln in out), \
            "stack.sh run did not come up:\n" + "".join(out)
        pg = postmaster(state)
        assert pg is not None and pid_alive(pg), "no PostgreSQL running"
        assert processes_of(state), "no process of the stack found"
        # run/ is a tmpfs; what its spools hold outlives the stop. A file
        # in events/bad/ is one the controller keeps without recording.
        run = os.path.join(state, "run")
        assert mount_type(run) == "tmpfs", mount_type(run)
        bad = os.path.join(run, "events", "bad")
        os.makedirs(bad, exist_ok=True)
        with open(os.path.join(bad, "kept.1"), "w") as f:
            f.write("not an event\n")

        # tee dies of the same Ctrl-C: the pipe has no reader any more.
        p.stdout.close()
        os.killpg(p.pid, signal.SIGINT)
        rc = p.wait(timeout=DOWN_TIMEOUT)
        assert rc == 0, f"stack.sh run ended with {rc}"

        left = processes_of(state)
        assert left == [], ("processes of the stack left running: " +
                            str([(p, cmdline(p)) for p in left]))
        assert not pid_alive(pg), "PostgreSQL left running"
        assert not os.path.ismount(os.path.join(state, "pool")), \
            "pool left mounted"
        assert not os.path.ismount(run), "run/ left mounted"
        saved = os.path.join(state, "spool", "events", "bad", "kept.1")
        with open(saved) as f:
            assert f.read() == "not an event\n"
        # The next start puts it back.
        r = subprocess.run([STACK, "up"], env=st.env, cwd=REPO,
                           capture_output=True, text=True,
                           timeout=UP_TIMEOUT)
        assert r.returncode == 0, r.stdout + r.stderr
        assert mount_type(run) == "tmpfs"
        with open(os.path.join(bad, "kept.1")) as f:
            assert f.read() == "not an event\n"
        assert not os.path.exists(os.path.join(state, "spool"))
    finally:
        _cleanup_state(st, log)


def test_traverse_gives_others_passage_and_nothing_more():
    """A checkout under a 0700 home: scripts/traverse.sh lets an
    unprivileged user (as each gateway's uid must) reach a directory in
    it, adding o+x where it was missing and changing nothing else."""
    top = tempfile.mkdtemp(prefix="airlock-traverse-")
    try:
        home = os.path.join(top, "home")
        inner = os.path.join(home, "checkout", "build")
        os.makedirs(inner)
        os.chmod(top, 0o755)
        os.chmod(home, 0o700)
        os.chmod(os.path.join(home, "checkout"), 0o750)
        os.chmod(inner, 0o700)

        def reach(d):
            return subprocess.run(["runuser", "-u", "nobody", "--", "test",
                                   "-x", d]).returncode == 0

        assert not reach(inner)
        p = subprocess.run([os.path.join(REPO, "scripts", "traverse.sh"),
                            "nobody", inner], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert reach(inner)
        assert f"chmod o+x {home} " in p.stderr
        mode = lambda d: os.stat(d).st_mode & 0o7777  # noqa: E731
        assert mode(home) == 0o701
        assert mode(os.path.join(home, "checkout")) == 0o751
        assert mode(inner) == 0o701 and mode(top) == 0o755
        # Already reachable: nothing is said or changed.
        again = subprocess.run([os.path.join(REPO, "scripts", "traverse.sh"),
                                "nobody", inner], capture_output=True,
                               text=True)
        assert again.returncode == 0 and again.stderr == ""
    finally:
        subprocess.run(["rm", "-rf", top])
