"""Red-team suite: attempts a hostile sandbox makes against the host, run
as root inside real sandboxes of a private stack (the integration suite's
fixtures: tests/integration/conftest.py). Every attempt is recorded as a
row (attempt, driver, expected, result) and the table is printed at the
end; a test fails when its attempt succeeded.

The stack's gateways reach an upstream world of this suite's own
(tests/integration/upstream_world.py: a network namespace behind a veth
in WORLD_NET, the one private range they may dial): a resolver, HTTP,
HTTPS and a TCP echo for allowed.test and forbidden.test on addresses of
their own, one address serving front.test and hidden.test (a CDN), and
allowed names whose upstream answer is private. Nothing else is dialled.

Environment: as tests/integration (AIRLOCK_TEST_BUILD,
AIRLOCK_TEST_VM_CACHE)."""
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "airlock_integration_conftest",
    os.path.join(_HERE, "..", "integration", "conftest.py"))
it = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(it)

sys.path.insert(0, os.path.join(_HERE, "..", "integration"))
import host_clients  # noqa: E402
from upstream_world import egress_policy, upstream_world  # noqa: E402

WORLD_NET, WORLD_HOST = "10.251.78.0/24", "10.251.78.1"
RESOLVER = "10.251.78.2"   # the gateways' upstream DNS; allowed.test's
FORBIDDEN = "10.251.78.3"  # forbidden.test's
CDN = "10.251.78.4"        # front.test (allowed), hidden.test (not)
NAMES = {"allowed.test": RESOLVER, "forbidden.test": FORBIDDEN,
         "front.test": CDN, "hidden.test": CDN,
         "xn--bcher-kva.test": RESOLVER,     # bücher.test, allowed
         "private.test": "192.168.77.7",     # allowed, private upstream
         "loop.test": "127.0.0.1",           # allowed, loopback upstream
         "meta.test": "169.254.169.254",     # allowed, metadata upstream
         "paths.test": RESOLVER}             # allowed, only /allowed/...
# What the policy lets through besides 443 and 80: allowed.test's echo.
POLICY_PORTS = 'extra_ports = {\n  ["allowed.test"] = { 7000 },\n}'
# paths.test: requests only under /allowed/ (the path rules a policy may
# have, which the path tricks of test_egress.py try to get around).
POLICY_PATHS = """
local egress_of_names = egress
function egress(req)
  if req.name == "paths.test" and req.path ~= nil and
     req.path:sub(1, 9) ~= "/allowed/" then
    return deny("paths.test: only /allowed/")
  end
  return egress_of_names(req)
end
"""


@pytest.fixture(scope="session")
def world():
    """The world; allowed.test also serves an apt repository and an npm
    registry (host_clients.make_repos) for the real clients."""
    files = tempfile.mkdtemp(prefix="rtw-files-")
    os.chmod(files, 0o755)
    host_clients.make_repos(files, "allowed.test", npm_prefix="/npm")
    try:
        yield from upstream_world("rtw", WORLD_HOST, WORLD_NET,
                                  [RESOLVER, FORBIDDEN, CDN], NAMES,
                                  sniff=True, files=files)
    finally:
        shutil.rmtree(files, ignore_errors=True)


@pytest.fixture(scope="session")
def stack(world):
    """The integration suite's stack, its gateways pointed at the world."""
    policies = os.path.join(world["dir"], "policies")
    egress_policy(policies, POLICY_PORTS, POLICY_PATHS)
    yield from it.running_stack(env={
        "AIRLOCK_POLICIES": policies,
        "AIRLOCK_UPSTREAM_DNS": RESOLVER + ":53",
        "AIRLOCK_UPSTREAM_CA": world["ca"],
        "AIRLOCK_UPSTREAM_ALLOW_CIDRS": WORLD_NET,
        "AIRLOCK_UPSTREAM_HOSTS": ""}, prefix="airlock-rt-")


api = it.api
info = it.info

ROWS = []


class Redteam:
    def __init__(self, api):
        self.api = api

    def sh(self, sid, script, check=True):
        """Run a shell script as root in sandbox sid; (rc, output)."""
        r = it.exec_json(self.api, sid, ["sh", "-c", script], timeout=60)
        out = r["stdout"] + r["stderr"]
        if check and r["exit_code"] not in (0, 1):
            raise AssertionError(f"{script!r}: exit {r['exit_code']}: {out}")
        return r["exit_code"], out

    def put(self, sid, path, data, mode="0755"):
        r = self.api.put(f"{self.api.base}/v1/sandboxes/{sid}/files",
                         params={"path": path}, data=data, timeout=it.TIMEOUT)
        assert r.status_code in (200, 201, 204), f"put {path}: {r.text}"
        self.sh(sid, f"chmod {mode} {path}")

    def record(self, attempt, driver, expected, result, escaped):
        """One row of the table; the caller asserts `not escaped`."""
        ROWS.append((attempt, driver, expected, result,
                     "ESCAPED" if escaped else "held"))
        return escaped

    def works(self, case, driver, result, ok):
        """A row for what must work; the caller asserts ok."""
        ROWS.append((case, driver, "works", result,
                     "works" if ok else "BROKEN"))
        return ok


@pytest.fixture(scope="session")
def rt(api):
    return Redteam(api)


@pytest.fixture(scope="session")
def probe():
    """tests/redteam/probe.c, static: it runs in any template."""
    d = tempfile.mkdtemp(prefix="airlock-redteam-")
    out = os.path.join(d, "probe")
    subprocess.run(["gcc", "-static", "-O1", "-Wall", "-Wextra", "-Werror",
                    "-o", out, os.path.join(_HERE, "probe.c"),
                    "-lssl", "-lcrypto", "-lpthread"],
                   check=True, capture_output=True, text=True)
    with open(out, "rb") as f:
        data = f.read()
    os.unlink(out)
    os.rmdir(d)
    return data


def make_sandboxes(api, info, driver):
    if driver not in it.usable_drivers(info):
        pytest.skip(f"driver {driver!r} is not usable on this host: "
                    f"GET /v1/info answered {info!r}")
    return it.Sandboxes(api, driver)


@pytest.fixture
def ns_boxes(api, info):
    s = make_sandboxes(api, info, "ns")
    yield s
    s.cleanup()


@pytest.fixture
def vm_boxes(api, info):
    s = make_sandboxes(api, info, "vm")
    yield s
    s.cleanup()


def pytest_terminal_summary(terminalreporter):
    if not ROWS:
        return
    heads = ("attempt", "driver", "expected", "result", "verdict")
    widths = [max(len(h), *(len(r[i]) for r in ROWS))
              for i, h in enumerate(heads)]
    widths = [min(w, 100) for w in widths]
    tr = terminalreporter
    tr.section("red team")

    def line(cells):
        return "  ".join(c[:w].ljust(w) for c, w in zip(cells, widths))
    tr.write_line(line(heads))
    tr.write_line(line(["-" * w for w in widths]))
    for r in ROWS:
        tr.write_line(line(r))
    tr.write_line("")
    for drv in sorted({r[1] for r in ROWS}):
        att = [r for r in ROWS if r[1] == drv and r[4] in ("held",
                                                          "ESCAPED")]
        ok = [r for r in ROWS if r[1] == drv and r[4] in ("works",
                                                         "BROKEN")]
        line = (f"{drv}: {len(att)} attempts, "
                f"{sum(r[4] == 'held' for r in att)} blocked")
        if ok:
            line += (f"; {sum(r[4] == 'works' for r in ok)} of {len(ok)} "
                     f"allowed cases working")
        tr.write_line(line)
