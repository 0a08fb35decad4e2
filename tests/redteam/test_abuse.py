"""What a hostile sandbox can make host programs do: forge frames to its
shim (taking the agent's channel, flooding the shim's log) and fill the
host's disk. Each test is one attempt (a row of the table) and fails when
the attempt succeeded."""
import os
import re
import subprocess

import pytest

from conftest import it

MIB = 1 << 20
FORGE_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                         "integration", "guest", "forge_frames.c")


@pytest.fixture(scope="module")
def forge(tmp_path_factory):
    """tests/integration/guest/forge_frames.c, static: it takes the agent's
    channel with pidfd_getfd and sends ERROR frames for N seconds."""
    out = str(tmp_path_factory.mktemp("forge") / "forge_frames")
    subprocess.run(["gcc", "-static", "-O2", "-o", out, FORGE_SRC],
                   check=True)
    with open(out, "rb") as f:
        return f.read()


def test_take_agent_channel(rt, ns_boxes, forge):
    """Root in an ns jail reaching for the agent's channel to the shim
    (pidfd_getfd of pid 1's fd 3, and /proc/1/fd/3) to speak for it."""
    sid = ns_boxes.create()["id"]
    rt.put(sid, "/tmp/forge", forge)
    rc, out = rt.sh(sid, "/tmp/forge 1; echo rc=$?; "
                         "ls -l /proc/1/fd/ 2>&1 | head -3; "
                         "echo x > /proc/1/fd/3 2>&1 && echo WROTE")
    got = re.search(r"rc=(\d+)", out)
    escaped = got is None or got.group(1) != "3" or "WROTE" in out
    assert not rt.record("take the agent's channel (pidfd_getfd, "
                         "/proc/1/fd) and forge frames", "ns", "refused",
                         out.strip().replace("\n", "; ")[:200],
                         escaped), out


def test_vm_log_flood(rt, stack, vm_boxes, forge):
    """Root in a vm guest owns the agent's channel (the guest kernel is
    the sandbox's): it floods the shim with ERROR frames for 15 s. The
    host's log directory grows by at most a few MiB and the sandbox keeps
    answering."""
    sid = vm_boxes.create()["id"]
    rt.put(sid, "/tmp/forge", forge)
    logdir = os.path.join(stack.state, "log")
    before = it.dir_bytes(logdir)
    rc, out = rt.sh(sid, "/tmp/forge 15")
    sent = re.search(r"sent (\d+)", out)
    grown = it.dir_bytes(logdir) - before
    alive = rt.sh(sid, "echo still here")[1].strip() == "still here"
    # The forger must have flooded for real, else the row proves nothing.
    assert sent is not None and int(sent.group(1)) * 90 > 3 * MIB, out
    escaped = grown > 3 * MIB or not alive
    result = (f"{sent.group(1)} forged frames; log dir +{grown} bytes; "
              f"sandbox {'answers' if alive else 'DEAD'}")
    assert not rt.record("flood the shim's log with forged frames (15 s)",
                         "vm", "log grows <= 3 MiB", result,
                         escaped), result


def fill(rt, sid, mb, path="/fill"):
    """dd mb MiB into path; (exit code, MiB written, output)."""
    _, out = rt.sh(sid, f"dd if=/dev/zero of={path} bs=1048576 count={mb} "
                        f"conv=fsync 2>&1; echo rc=$?; "
                        f"du -m {path} | cut -f1", check=False)
    rc = int(re.search(r"rc=(\d+)", out).group(1))
    lines = out.strip().splitlines()
    size = int(lines[-1]) if lines and lines[-1].isdigit() else -1
    return rc, size, out


@pytest.mark.parametrize("drv", ["ns", "vm"])
def test_fill_the_disk(rt, stack, request, drv):
    """A sandbox with disk_mb=64 writing 200 MiB: stopped at its cap, the
    pool keeps its room, a neighbour still writes."""
    boxes = request.getfixturevalue(f"{drv}_boxes")
    small = boxes.create(disk_mb=64, timeout=900)["id"]
    neighbour = boxes.create(timeout=900)["id"]
    pool = os.path.join(stack.state, "pool")
    free_before = os.statvfs(pool).f_bavail * os.statvfs(pool).f_frsize
    rc, size, out = fill(rt, small, 200)
    free_after = os.statvfs(pool).f_bavail * os.statvfs(pool).f_frsize
    nrc, nsize, nout = fill(rt, neighbour, 16, "/n")
    used = (free_before - free_after) // MIB
    # A guest's own du counts what its page cache took; the host's pool
    # is what the cap guards, so for vm only the pool's figure counts.
    escaped = rc == 0 or used > 100 or nrc != 0 or \
        (drv == "ns" and size > 72)
    result = (f"dd rc={rc} at {size} MiB; pool used +{used} MiB; "
              f"neighbour wrote {nsize} MiB (rc={nrc})")
    assert not rt.record("fill the disk (200 MiB into disk_mb=64)", drv,
                         "stopped near 64 MiB, neighbour writes", result,
                         escaped), (out, nout)
