"""Red-team suite: attempts a hostile sandbox makes against the host, run
as root inside real sandboxes of a private stack (the integration suite's
fixtures: tests/integration/conftest.py). Every attempt is recorded as a
row (attempt, driver, expected, result) and the table is printed at the
end; a test fails when its attempt succeeded.

Environment: as tests/integration (AIRLOCK_TEST_BUILD,
AIRLOCK_TEST_VM_CACHE)."""
import importlib.util
import os
import subprocess
import tempfile

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "airlock_integration_conftest",
    os.path.join(_HERE, "..", "integration", "conftest.py"))
it = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(it)

# The integration suite's stack, re-exported as this suite's fixtures.
stack = it.stack
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


@pytest.fixture(scope="session")
def rt(api):
    return Redteam(api)


@pytest.fixture(scope="session")
def probe():
    """tests/redteam/probe.c, static: it runs in any template."""
    d = tempfile.mkdtemp(prefix="airlock-redteam-")
    out = os.path.join(d, "probe")
    subprocess.run(["gcc", "-static", "-O1", "-Wall", "-Wextra", "-Werror",
                    "-o", out, os.path.join(_HERE, "probe.c")], check=True)
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
