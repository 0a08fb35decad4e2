"""Many sandboxes at once: created, used and deleted concurrently."""
import os
import time
from concurrent.futures import ThreadPoolExecutor

from conftest import TIMEOUT, pid_alive, qemu_of, qemu_rundir

# Twenty for both drivers. vm: every sandbox is a QEMU under TCG on 2
# cores (2 pool claims + 18 cold restores racing each other); measured
# here at about 6 s for the whole test, so the vm count needs no scaling
# down to fit the CI budget, and 20 guests of 256 MiB fit 24 GiB even
# without the copy-on-write sharing of the template snapshot's RAM.
COUNT = {"ns": 20, "vm": 20}


def test_many_sandboxes_at_once(stack, api, sandboxes, driver):
    n = COUNT[driver]

    def create(i):
        r = api.post(api.base + "/v1/sandboxes",
                     json=sandboxes.body(metadata={"n": str(i)}),
                     timeout=(5, 120))
        return r

    with ThreadPoolExecutor(n) as pool:
        created = list(pool.map(create, range(n)))
    for r in created:
        if r.status_code == 201:
            sandboxes.ids.append(r.json()["id"])
    assert [r.status_code for r in created] == [201] * n, \
        [r.text for r in created if r.status_code != 201]
    ids = [r.json()["id"] for r in created]
    assert len(set(ids)) == n
    assert {r.json()["driver"] for r in created} == {driver}

    def run(args):
        i, sid = args
        r = api.post(f"{api.base}/v1/sandboxes/{sid}/exec",
                     json={"cmd": ["sh", "-c", f"echo sandbox-{i}; hostname"]},
                     headers={"Accept": "application/json"}, timeout=(5, 120))
        return r

    with ThreadPoolExecutor(n) as pool:
        outs = list(pool.map(run, enumerate(ids)))
    hostnames = set()
    for i, r in enumerate(outs):
        assert r.status_code == 200, r.text
        lines = r.json()["stdout"].splitlines()
        assert lines[0] == f"sandbox-{i}"
        hostnames.add(lines[1])
    assert len(hostnames) == n  # each sandbox is its own machine

    listed = api.get(api.base + "/v1/sandboxes", params={"state": "running"},
                     timeout=TIMEOUT).json()["sandboxes"]
    assert set(ids) <= {s["id"] for s in listed}

    # Each vm sandbox is its own QEMU process.
    qemus = [qemu_of(stack, sid) for sid in ids] if driver == "vm" else []
    if driver == "vm":
        assert None not in qemus and len(set(qemus)) == n, qemus
    rundirs = [d for d in map(qemu_rundir, qemus) if d is not None]

    def delete(sid):
        return api.delete(f"{api.base}/v1/sandboxes/{sid}", timeout=(5, 120))

    with ThreadPoolExecutor(n) as pool:
        gone = list(pool.map(delete, ids))
    assert [r.status_code for r in gone] == [204] * n
    for sid in ids:
        assert api.get(f"{api.base}/v1/sandboxes/{sid}",
                       timeout=TIMEOUT).status_code == 404
    # ... and all of them ended with their sandboxes.
    deadline = time.monotonic() + 10
    while [q for q in qemus if pid_alive(q)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [q for q in qemus if pid_alive(q)]
    # Nothing of them is left behind: QEMU's socket directories are gone.
    assert not [d for d in rundirs if os.path.exists(d)], rundirs
