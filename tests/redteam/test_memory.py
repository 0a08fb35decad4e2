"""Memory a hostile sandbox uses up: what no process holds (a tmpfs) is
sized within its limit, an OOM kills the offender and not the sandbox's
agent, and a sandbox that still dies of memory says so with its limit.
Each test is one attempt (a row of the table) and fails when the attempt
succeeded."""
import re
import time

import pytest

from conftest import it

NS_MEMORY_MB = 512
# awk doubling a string until the kernel kills it (busybox has no
# other allocator at hand).
HOG = "awk 'BEGIN { s = \"x\"; while (1) s = s s }'"


def boxes_and_limit(request, drv):
    """The driver's sandboxes and the memory limit its sandboxes get (a
    vm's guest RAM is fixed by its template's snapshot)."""
    boxes = request.getfixturevalue(f"{drv}_boxes")
    return boxes, NS_MEMORY_MB if drv == "ns" else it.VM_MEMORY_MB


def create(boxes, drv, mb):
    body = {"timeout": 900}
    if drv == "ns":
        body["memory_mb"] = mb
    return boxes.create(**body)["id"]


def state_of(rt, sid):
    r = rt.api.get(f"{rt.api.base}/v1/sandboxes/{sid}", timeout=it.TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


def wait_ended(rt, sid, seconds=30):
    """The sandbox's body once it left `running`, else its last body."""
    deadline = time.monotonic() + seconds
    body = state_of(rt, sid)
    while body["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
        body = state_of(rt, sid)
    return body


def answers(rt, sid):
    try:
        return rt.sh(sid, "echo still here", check=False)[1].strip() == \
            "still here"
    except (AssertionError, KeyError, ValueError, OSError):
        return False


def says_oom(body, mb):
    return f"out of memory: the sandbox's memory limit is {mb} MiB" in \
        (body.get("error") or "")


def tmpfs_sizes(rt, sid):
    """(whether every writable tmpfs of the sandbox has a size, their
    sizes' sum in MiB), from its /proc/mounts."""
    _, mounts = rt.sh(sid, "cat /proc/mounts")
    sized, total = True, 0
    for line in mounts.splitlines():
        f = line.split()
        if len(f) < 4 or f[2] not in ("tmpfs", "devtmpfs") or \
                "ro" in f[3].split(","):
            continue
        size = re.search(r"(?:^|,)size=(\d+)k", f[3])
        if size is None or size.group(1) == "0":
            sized = False
        else:
            total += int(size.group(1)) // 1024
    return sized, total


@pytest.mark.parametrize("drv", ["ns", "vm"])
def test_fill_dev_shm(rt, request, drv):
    """dd 2000 MiB into /dev/shm of a sandbox with less memory than that
    (issue 23: the unsized tmpfs got the agent OOM-killed and the sandbox
    reported a bare signal 9). It must stop with ENOSPC within the limit
    and the sandbox answer on, or end saying out of memory."""
    boxes, mb = boxes_and_limit(request, drv)
    sid = create(boxes, drv, mb)
    sized, total = tmpfs_sizes(rt, sid)
    try:
        rc, out = rt.sh(sid, "dd if=/dev/zero of=/dev/shm/big bs=1M "
                             "count=2000 2>&1; echo rc=$?; "
                             "du -m /dev/shm/big | cut -f1", check=False)
    except (AssertionError, KeyError, ValueError, OSError) as e:
        rc, out = -1, f"exec failed: {e}"
    got = re.search(r"rc=(\d+)\n(\d+)", out)
    alive = answers(rt, sid)
    body = state_of(rt, sid) if alive else wait_ended(rt, sid)
    # Every writable tmpfs sized, all of them together well within the
    # limit (a vm's guest kernel holds some of its RAM besides).
    within = sized and total <= mb * 3 // 4
    if alive:
        held = within and got is not None and got.group(1) != "0" and \
            "No space left on device" in out and \
            int(got.group(2)) <= mb // 2
        result = (f"tmpfs {'sized' if sized else 'UNSIZED'}, {total} MiB "
                  f"in all; dd rc={got.group(1) if got else '?'} at "
                  f"{got.group(2) if got else '?'} MiB; sandbox answers")
    else:
        held = says_oom(body, mb)
        result = f"sandbox {body['state']}: {body.get('error')}"
    assert not rt.record(f"fill /dev/shm with 2000 MiB ({mb} MiB sandbox)",
                         drv, "ENOSPC within the limit, sandbox answers "
                         "(or ends 'out of memory' with its limit)",
                         result, not held), (out, body)


@pytest.mark.parametrize("drv", ["ns", "vm"])
def test_memory_hog_dies_alone(rt, request, drv):
    """A process allocating past the limit is what the OOM killer ends;
    the agent answers on. What the agent runs has oom_score_adj 0 and
    cannot go below it; the agent itself is at -1000 wherever the host
    may put it there (ns: host root with CAP_SYS_RESOURCE)."""
    boxes, mb = boxes_and_limit(request, drv)
    sid = create(boxes, drv, mb)
    _, adj = rt.sh(sid, "cat /proc/self/oom_score_adj; "
                        "echo -1000 > /proc/self/oom_score_adj 2>/dev/null "
                        "&& echo LOWERED; "
                        "for p in /proc/[0-9]*; do "
                        "  [ \"$(cat $p/comm 2>/dev/null)\" = airlock-agent ] "
                        "  && cat $p/oom_score_adj; "
                        "done", check=False)
    lines = adj.split()
    r = it.exec_json(rt.api, sid, ["sh", "-c", HOG], timeout=120)
    out = r["stdout"] + r["stderr"]
    # A shell that ran awk as its child says 137; one that exec'd it
    # leaves the signal to the agent.
    killed = r["exit_code"] == 137 or r.get("signal") == "SIGKILL"
    alive = answers(rt, sid)
    body = state_of(rt, sid)
    # Root in a vm guest holds every capability of its own kernel: there
    # lowering one's score is the guest's business, not an escape.
    lowered = "LOWERED" in lines and drv == "ns"
    escaped = not killed or not alive or body["state"] != "running" or \
        lines[:1] != ["0"] or lowered or \
        (drv == "vm" and lines[-1:] != ["-1000"])
    how = r.get("signal") or r["exit_code"]
    result = (f"hog ended by {how}; sandbox {body['state']}, "
              f"{'answers' if alive else 'DEAD'}; own score {lines[:1]}, "
              f"agent's {lines[-1:]}{'; LOWERED to -1000' if lowered else ''}")
    assert not rt.record(f"allocate past the limit ({mb} MiB)", drv,
                         "the hog is killed (137), the agent answers",
                         result, escaped), (adj, out, body)


def test_oom_death_says_out_of_memory(rt, ns_boxes):
    """A sandbox whose agent dies of memory says so with its limit, not a
    bare signal 9. Root inside may give its own agent up (raising pid
    1's oom_score_adj needs no privilege; lowering it does): it raises it
    to 1000, standing in for a sandbox its agent cannot live in, and a
    hog then runs the cgroup out of memory."""
    mb = 64
    sid = ns_boxes.create(memory_mb=mb, timeout=900)["id"]
    rt.sh(sid, "echo 1000 > /proc/1/oom_score_adj", check=True)
    assert rt.sh(sid, "cat /proc/1/oom_score_adj")[1].strip() == "1000"
    # /dev/shm full first: its pages are in no process's rss, so the
    # hog that follows stays smaller than the agent's raised badness.
    try:
        it.exec_json(rt.api, sid, ["sh", "-c", "dd if=/dev/zero "
                                   "of=/dev/shm/f bs=1M count=100; " + HOG],
                     timeout=120)
    except (AssertionError, KeyError, ValueError, OSError):
        pass  # the agent went with the exec
    body = wait_ended(rt, sid)
    ok = body["state"] == "error" and says_oom(body, mb)
    assert rt.works("a sandbox dying of memory says so "
                    f"({mb} MiB)", "ns",
                    f"{body['state']}: {body.get('error')}", ok), body
