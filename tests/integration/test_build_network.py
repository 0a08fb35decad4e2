"""Template builds get network (issue 10): RUN steps reach what the
shipped policy lets builds reach (build_registries: the host's Debian
mirror and the npm registry) through a gateway of the build's own, and
nothing else; a RUN that fetches a forbidden name fails with a build-log
line saying what was denied, and the build's egress log
(GET /v1/templates/builds/{id}/egress) has every decision.

The world (upstream_world.py, 10.251.82.0/24) plays deb.debian.org and
registry.npmjs.org, serving a one-package apt repository and npm registry
(host_clients.make_repos) over HTTP and HTTPS; forbidden.test is served
too but no policy allows it. Real clients: apt-get and npm of the CLIENTS
template (host_clients.py: the host's Debian 12 binaries) in RUN steps.
(The same clients in sandboxes of both drivers are rows of the red
team's table: tests/redteam/test_egress.py test_allowed_real_clients.)
The build's gateway runs in a cgroup of the build's own."""
import os
import shutil
import tempfile
import time

import pytest

from conftest import (TIMEOUT, api_session, cgroup_path, cgroup_pids,
                      cmdline, running_stack)
import host_clients
from test_templates import build, delete_template, follow, submit, unique
from upstream_world import upstream_world

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="network slots need root")

NET, HOST = "10.251.82.0/24", "10.251.82.1"
REGISTRY, FORBIDDEN = "10.251.82.2", "10.251.82.3"
NAMES = {"deb.debian.org": REGISTRY, "security.debian.org": REGISTRY,
         "registry.npmjs.org": REGISTRY, "allowed.test": REGISTRY,
         "npm.mirror.test": REGISTRY, "forbidden.test": FORBIDDEN}
# The operator's npm registry: not in the policy's build_registries, so
# only the builder's reading of the host's configuration lets builds in.
NPM_MIRROR = "https://npm.mirror.test/"


@pytest.fixture(scope="module")
def world():
    files = tempfile.mkdtemp(prefix="bnw-files-")
    os.chmod(files, 0o755)
    for host in ("deb.debian.org", "registry.npmjs.org"):
        host_clients.make_repos(files, host)
    host_clients.make_repos(files, "allowed.test", npm_prefix="/npm")
    try:
        yield from upstream_world("bnw", HOST, NET, [REGISTRY, FORBIDDEN],
                                  NAMES, files=files)
    finally:
        shutil.rmtree(files, ignore_errors=True)


@pytest.fixture(scope="module")
def bstack(world):
    """A stack with the shipped policies, its gateways' upstream the
    world."""
    yield from running_stack(env={
        "AIRLOCK_UPSTREAM_DNS": REGISTRY + ":53",
        "AIRLOCK_UPSTREAM_CA": world["ca"],
        "AIRLOCK_UPSTREAM_ALLOW_CIDRS": NET,
        "AIRLOCK_UPSTREAM_HOSTS": "",
        "AIRLOCK_NPM_REGISTRY": NPM_MIRROR}, prefix="airlock-it-bn-")


@pytest.fixture(scope="module")
def bapi(bstack):
    return api_session(bstack)


def outputs(events):
    return "".join(e.data.get("data", "") for e in events
                   if e.name == "output")


def infos(events):
    return [e.data["message"] for e in events if e.name == "info"]


def build_egress(api, bid):
    r = api.get(f"{api.base}/v1/templates/builds/{bid}/egress",
                params={"limit": 1000}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def clients(bapi):
    """The CLIENTS template (host_clients.py), built once."""
    name = unique("clients")
    bid, events = build(bapi, name, host_clients.AIRLOCKFILE,
                        context=host_clients.context_tar())
    assert events[-1].data["status"] == "succeeded", events[-12:]
    yield name
    delete_template(bapi, name)


def built(bapi, prefix, airlockfile):
    """(build id, log events, build egress log) of a build that must
    succeed; its template is deleted again."""
    name = unique(prefix)
    try:
        bid, events = build(bapi, name, airlockfile)
        assert events[-1].data["status"] == "succeeded", (
            events[-12:], outputs(events))
        return bid, events, build_egress(bapi, bid)
    finally:
        delete_template(bapi, name)


def test_run_reaches_the_debian_mirror(bapi):
    """busybox wget over HTTP from a RUN step: deb.debian.org is the
    host's mirror (its apt sources) and in the policy's
    build_registries."""
    _, events, log = built(bapi, "bnet", "FROM minimal\nRUN wget -q -O - "
                           "http://deb.debian.org/debian/dists/bookworm/"
                           "Release\n")
    assert "Codename: bookworm" in outputs(events)
    allowed = [e for e in log["egress"]
               if e["allow"] and e["name"] == "deb.debian.org"]
    assert {e["protocol"] for e in allowed} >= {"dns", "http"}, log
    http = [e for e in allowed if e["protocol"] == "http"][0]
    assert http["path"] == "/debian/dists/bookworm/Release"
    assert log["counts"]["allowed"] >= 2


def test_run_reaches_the_hosts_npm_registry(bapi):
    """AIRLOCK_NPM_REGISTRY names the host's npm registry: the builder
    puts its host on the build's allow list."""
    _, events, log = built(bapi, "bnpm", "FROM minimal\nRUN wget -q -O - "
                           "http://npm.mirror.test/echo\n")
    assert "hello npm.mirror.test /echo" in outputs(events)
    assert [e for e in log["egress"] if e["allow"] and
            e["name"] == "npm.mirror.test" and e["protocol"] == "http"
            and e["reason"] == "on the allow list"], log


def test_build_gateway_is_charged_to_a_cgroup_of_the_build(bapi):
    """The build's gateway runs in a cgroup leaf of the build's own
    ("<build id>-gw", with limits), as a sandbox's runs in the sandbox's;
    the leaf goes with the build."""
    name = unique("bcg")
    r = submit(bapi, name, "FROM minimal\nRUN wget -q -O - "
               "http://npm.mirror.test/echo && sleep 8\n")
    assert r.status_code == 202, r.text
    bid = r.json()["build_id"]
    leaf = f"{bid}-gw"
    try:
        gw, deadline = None, time.monotonic() + 120
        while gw is None and time.monotonic() < deadline:
            try:
                gw = next((p for p in cgroup_pids("pids", leaf)
                           if "airlock-gateway" in cmdline(p)), None)
            except OSError:
                pass
            time.sleep(0.1)
        assert gw is not None, f"no airlock-gateway in cgroup {leaf}"
        for ctrl in ("memory", "cpu"):
            assert gw in cgroup_pids(ctrl, leaf), (ctrl, leaf)
        with open(cgroup_path("memory", leaf, "memory.limit_in_bytes",
                              "memory.max")) as f:
            assert int(f.read()) == 256 << 20
        events = follow(bapi, bid)
        assert events[-1].data["status"] == "succeeded", events[-12:]
        assert not os.path.exists(cgroup_path("pids", leaf, "", ""))
    finally:
        delete_template(bapi, name)


def test_run_fetching_a_forbidden_name_fails_and_says_why(bapi, world):
    name = unique("bdeny")
    bid, events = build(bapi, name, "FROM minimal\n"
                        "RUN wget -q -O - http://forbidden.test/x\n")
    status = events[-1].data
    assert status["status"] == "failed" and status["line"] == 2, events
    lines = infos(events)
    assert any(m.startswith("egress denied: DNS lookup of forbidden.test")
               for m in lines), lines
    assert any(f"/v1/templates/builds/{bid}/egress" in m for m in lines)
    log = build_egress(bapi, bid)
    denied = [e for e in log["egress"]
              if not e["allow"] and e["name"] == "forbidden.test"]
    assert denied and denied[0]["protocol"] == "dns", log
    assert log["counts"]["denied"] >= 1
    # Nothing of it reached the world.
    for lines in world["log"].values():
        assert not [e for e in lines.drain(0.1)
                    if "forbidden" in repr(e)]
    # An unknown build is 404 (another project's is answered the same
    # way: build_seen); a bad limit 400.
    r = bapi.get(f"{bapi.base}/v1/templates/builds/nosuchbuild/egress",
                 timeout=TIMEOUT)
    assert r.status_code == 404, r.text
    r = bapi.get(f"{bapi.base}/v1/templates/builds/{bid}/egress",
                 params={"limit": 0}, timeout=TIMEOUT)
    assert r.status_code == 400, r.text


def test_run_apt_get_install_and_npm_install(bapi, clients):
    """apt-get (GnuTLS) and npm (node's TLS) in RUN steps install from
    the host's Debian mirror and the npm registry over HTTPS, verified
    against the host CA the builder put in the layer's trust store."""
    _, events, log = built(bapi, "bpkg", (
        "FROM %s\n"
        "RUN echo 'deb [trusted=yes] https://deb.debian.org/debian "
        "bookworm main' >/etc/apt/sources.list && apt-get update && "
        "apt-get install -y %s && cat /usr/share/%s/hello.txt\n"
        "WORKDIR /app\n"
        "RUN npm install --no-audit --no-fund %s && node -e "
        "'process.stdout.write(require(\"%s\"))'\n") % (
            clients, host_clients.PKG, host_clients.PKG, host_clients.PKG,
            host_clients.PKG))
    out = outputs(events)
    assert out.count(host_clients.HELLO) == 2, out
    https = {(e["name"], e["path"]) for e in log["egress"]
             if e["allow"] and e["protocol"] == "https"}
    assert ("deb.debian.org", "/debian/dists/bookworm/Release") in https, \
        https
    assert ("registry.npmjs.org", "/" + host_clients.PKG) in https, https
