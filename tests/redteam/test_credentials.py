"""Credentials never reach the guest (issue 11), end to end on both
drivers: the stack's own gateway gets the sandbox's credentials from the
controller over its channel and puts them into requests to allowed.test,
whose upstream (the world's reflecting server) receives each value in the
right header and echoes every header back in its answer. The guest, root,
sees only '*'s where the values were, and a scan of the guest (probe scan:
its whole filesystem, every process's environment, command line and
readable memory) finds neither value, while the upstream has both."""
import os
import re
import secrets
import time

import pytest

from conftest import it

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="network slots need root")

PROBE = "/tmp/probe"
TRUST = "/etc/ssl/certs/ca-certificates.crt"


def crlf(text):
    return text.replace("\r", "\\r").replace("\n", "\\n")


@pytest.fixture(scope="module", params=it.DRIVERS)
def guest(request, rt, api, info, probe):
    """Per driver: a header credential and a placeholder credential for
    allowed.test, scoped by metadata to one sandbox made for them."""
    drv = request.param
    if drv not in it.usable_drivers(info):
        pytest.skip(f"driver {drv!r} is not usable on this host: {info!r}")
    tag = f"{drv}-{secrets.token_hex(4)}"
    values = {"header": "hv_" + secrets.token_hex(20),
              "placeholder": "pv_" + secrets.token_hex(20)}
    injects = {"header": {"hosts": ["allowed.test"],
                          "header": "Authorization",
                          "format": "Bearer {value}"},
               "placeholder": {"hosts": ["allowed.test"]}}
    made = it.Sandboxes(api, drv)
    creds = []
    try:
        for form in ("header", "placeholder"):
            r = api.post(f"{api.base}/v1/credentials", timeout=it.TIMEOUT,
                         json={"name": f"rt{form[0]}{drv}",
                               "value": values[form],
                               "scope": {"metadata": {"credtest": tag}},
                               "inject": injects[form]})
            assert r.status_code == 201, r.text
            assert values[form] not in r.text
            creds.append(r.json()["id"])
        sb = made.create(network={"mode": "allowlist",
                                  "allow": ["allowed.test"]},
                         metadata={"credtest": tag}, timeout=1800)
        rt.put(sb["id"], PROBE, probe)
        yield {"driver": drv, "id": sb["id"], "values": values,
               "names": {f: f"rt{f[0]}{drv}" for f in values}}
    finally:
        made.cleanup()
        for c in creds:
            api.delete(f"{api.base}/v1/credentials/{c}", timeout=it.TIMEOUT)


def sh(rt, sid, script, timeout=300):
    r = it.exec_json(rt.api, sid, ["sh", "-c", script], timeout=timeout,
                     http_timeout=timeout + 30)
    return r["exit_code"], r["stdout"] + r["stderr"]


def reflected(world, marker, timeout=10):
    """The head the upstream received for the request carrying marker."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for lines in world["log"].values():
            for e in lines.drain(0.05):
                if marker in e.get("path", "") and "reflect" in e:
                    return e
        time.sleep(0.1)
    return None


def test_value_reaches_the_upstream_never_the_guest(rt, world, guest):
    drv, sid = guest["driver"], guest["id"]
    values, names = guest["values"], guest["names"]
    _, env = sh(rt, sid, "env")
    assert f"AIRLOCK_CRED_{names['placeholder'].upper()}=" \
           f"airlock-cred:{names['placeholder']}" in env, env
    marker = "m" + secrets.token_hex(6)
    req = ("GET /reflect?%s HTTP/1.1\r\nHost: allowed.test\r\n"
           "Authorization: Bearer the-guest-own\r\n"
           "X-Token: airlock-cred:%s\r\nConnection: close\r\n\r\n"
           % (marker, names["placeholder"]))
    rc, out = sh(rt, sid, f"PROBE_SAVE=/tmp/answer {PROBE} tls "
                          f"allowed.test 443 allowed.test {TRUST} "
                          f"'{crlf(req)}'; cat /tmp/answer")
    # The upstream got both values, each where it belongs.
    seen = reflected(world, marker)
    assert seen is not None, f"the upstream saw no request: {out}"
    h = seen["headers"]
    assert h.get("Authorization") == f"Bearer {values['header']}", h
    assert h.get("X-Token") == values["placeholder"], h
    # The guest got the echo with each value masked, same length.
    for form, v in values.items():
        assert v not in out, f"{drv}: the guest saw the {form} value"
    assert "X-Echo-Authorization: Bearer " + "*" * len(values["header"]) \
        in out, out
    assert "X-Token: " + "*" * len(values["placeholder"]) in out, out
    rt.works("credentials: header and placeholder injected, echo masked",
             drv, "upstream got both values; the guest only '*'s", True)
    # The scan finds what is there: a canary in a file, and (vm, where
    # root reads other processes) one in a sleeping process's environment.
    canary = "cv_" + secrets.token_hex(20)
    sh(rt, sid, f"printf %s {canary} >/tmp/canary; CANARY={canary} "
                "sleep 120 </dev/null >/dev/null 2>&1 &")
    rc, scan = sh(rt, sid, f"{PROBE} scan {canary.encode().hex()}",
                  timeout=900)
    assert rc == 1 and "hit: /tmp/canary" in scan, scan
    if drv == "vm":
        assert re.search(r"hit: pid \d+ environ", scan), scan
    sh(rt, sid, "rm -f /tmp/canary; pkill sleep; true")
    # Nothing in the guest holds either value: files, environments,
    # command lines, memory.
    for form, v in values.items():
        rc, scan = sh(rt, sid, f"{PROBE} scan {v.encode().hex()}",
                      timeout=900)
        summary = [x for x in scan.splitlines() if x.startswith("scan:")]
        assert summary, scan
        escaped = rc != 0
        rt.record(f"credential value ({form} form) anywhere in the guest",
                  drv, "no hit", summary[0], escaped)
        assert not escaped, scan
        # It did look: files and other processes were read, and under
        # vm (where the guest's root may read every process) memory too.
        got = dict((k, int(n)) for n, k in re.findall(
            r"(\d+) (files|processes|memory regions)", summary[0]))
        assert got["files"] > 0 and got["processes"] > 0, summary
        if drv == "vm":
            assert got["memory regions"] > 0, summary
