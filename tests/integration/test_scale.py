"""Twenty sandboxes at once."""
from concurrent.futures import ThreadPoolExecutor

from conftest import TIMEOUT


def test_twenty_sandboxes(api, sandboxes):
    def create(i):
        r = api.post(api.base + "/v1/sandboxes",
                     json={"template": "minimal", "metadata": {"n": str(i)}},
                     timeout=(5, 120))
        return r

    with ThreadPoolExecutor(20) as pool:
        created = list(pool.map(create, range(20)))
    for r in created:
        if r.status_code == 201:
            sandboxes.ids.append(r.json()["id"])
    assert [r.status_code for r in created] == [201] * 20, \
        [r.text for r in created if r.status_code != 201]
    ids = [r.json()["id"] for r in created]
    assert len(set(ids)) == 20

    def run(args):
        i, sid = args
        r = api.post(f"{api.base}/v1/sandboxes/{sid}/exec",
                     json={"cmd": ["sh", "-c", f"echo sandbox-{i}; hostname"]},
                     headers={"Accept": "application/json"}, timeout=(5, 120))
        return r

    with ThreadPoolExecutor(20) as pool:
        outs = list(pool.map(run, enumerate(ids)))
    hostnames = set()
    for i, r in enumerate(outs):
        assert r.status_code == 200, r.text
        lines = r.json()["stdout"].splitlines()
        assert lines[0] == f"sandbox-{i}"
        hostnames.add(lines[1])
    assert len(hostnames) == 20  # each sandbox is its own machine

    listed = api.get(api.base + "/v1/sandboxes", params={"state": "running"},
                     timeout=TIMEOUT).json()["sandboxes"]
    assert set(ids) <= {s["id"] for s in listed}

    def delete(sid):
        return api.delete(f"{api.base}/v1/sandboxes/{sid}", timeout=(5, 120))

    with ThreadPoolExecutor(20) as pool:
        gone = list(pool.map(delete, ids))
    assert [r.status_code for r in gone] == [204] * 20
    for sid in ids:
        assert api.get(f"{api.base}/v1/sandboxes/{sid}",
                       timeout=TIMEOUT).status_code == 404
