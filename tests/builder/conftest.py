"""Template builder tests: airlock-builder against a private PostgreSQL and
btrfs pool in a fresh temporary state directory (`scripts/stack.sh start
pg|pool`, then `airlock-controller --init` for the migrations). No HTTP:
builds go through scripts/build-template.sh, the same row + files +
builder path the API takes.

Environment:
  AIRLOCK_TEST_BUILD   binaries (default <repo>/build-san if it holds
                       airlock-builder, else <repo>/build)

Markers:
  debian   builds the `debian` template with debootstrap from the host's
           apt mirror (minutes, network to the Debian mirror); run once
           per session, the layer is cached for the rest of it. Deselect
           with -m "not debian".
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STACK = os.path.join(REPO, "scripts", "stack.sh")
BUILD_TEMPLATE = os.path.join(REPO, "scripts", "build-template.sh")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "debian: builds the debian template with debootstrap (slow)")


def default_build():
    env = os.environ.get("AIRLOCK_TEST_BUILD")
    if env:
        return env
    san = os.path.join(REPO, "build-san")
    if os.access(os.path.join(san, "airlock-builder"), os.X_OK):
        return san
    return os.path.join(REPO, "build")


class Result:
    def __init__(self, rc, output, build_id, events, row, seconds):
        self.rc = rc
        self.output = output
        self.id = build_id
        self.events = events
        self.row = row
        self.seconds = seconds

    def steps(self):
        return [e for e in self.events if e.get("event") == "step"]

    def status(self):
        st = [e for e in self.events if e.get("event") == "status"]
        assert st, f"no status event in the log:\n{self.output}"
        assert self.events[-1] is st[-1], "status is not the last line"
        return st[-1]

    def text(self, step=None):
        """Command output of the build (or of one step), decoded."""
        import base64
        out = []
        for e in self.events:
            if e.get("event") != "output":
                continue
            if step is not None and e.get("step") != step:
                continue
            if "data" in e:
                out.append(e["data"])
            else:
                out.append(base64.b64decode(e["data_b64"]).decode(
                    "utf-8", "replace"))
        return "".join(out)


class Env:
    def __init__(self, state, build):
        self.state = state
        self.bin = build
        self.pool = os.path.join(state, "pool")
        self.env = dict(os.environ)
        self.env.update({
            "AIRLOCK_STATE": state,
            "AIRLOCK_BUILD": build,
            "AIRLOCK_LIBEXEC": build,
            "AIRLOCK_DB": f"host={state}/run/pg dbname=airlock user=airlock",
            "AIRLOCK_SQL_DIR": os.path.join(REPO, "core", "model", "sql"),
            "AIRLOCK_POOL_SIZE": "16G",
            "ASAN_OPTIONS": "detect_leaks=0",
        })

    def sh(self, *args, timeout=300):
        p = subprocess.run([STACK, *args], env=self.env, cwd=REPO,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
        assert p.returncode == 0, f"stack.sh {args}: {p.stdout}"

    def sql(self, query, *params):
        """Rows of a query as lists of strings (psql -tA, | separated);
        params are passed as psql variables :'p1', :'p2'..."""
        args = ["psql", self.env["AIRLOCK_DB"], "-X", "-q", "-tA",
                "-v", "ON_ERROR_STOP=1"]
        for i, p in enumerate(params, 1):
            args += ["-v", f"p{i}={p}"]
        p = subprocess.run(args, input=query, env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        return [line.split("|") for line in p.stdout.splitlines() if line]

    def build_dir(self, name, airlockfile, files=None, no_cache=False,
                  timeout=900):
        """Write a template directory and build it."""
        d = tempfile.mkdtemp(prefix="airlock-tpl-")
        try:
            with open(os.path.join(d, "Airlockfile"), "w") as f:
                f.write(airlockfile)
            for path, content in (files or {}).items():
                full = os.path.join(d, path)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                mode = "wb" if isinstance(content, bytes) else "w"
                with open(full, mode) as f:
                    f.write(content)
            return self.build(name, d, no_cache=no_cache, timeout=timeout)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def build(self, name, directory, no_cache=False, timeout=900):
        args = [BUILD_TEMPLATE, name, directory]
        if no_cache:
            args.append("--no-cache")
        t0 = time.monotonic()
        p = subprocess.run(args, env=self.env, cwd=REPO,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
        seconds = time.monotonic() - t0
        m = re.search(r"^build (b[0-9a-f]+): ", p.stdout, re.M)
        assert m, f"no build id in the output:\n{p.stdout}"
        bid = m.group(1)
        events = []
        with open(os.path.join(self.state, "builds", bid, "log.jsonl")) as f:
            for line in f:
                events.append(json.loads(line))
        rows = self.sql(
            "SELECT status, step, steps, coalesce(version, 0),"
            " coalesce(error, '') FROM template_builds WHERE id = :'p1'",
            bid)
        assert len(rows) == 1
        r = rows[0]
        row = {"status": r[0], "step": int(r[1]), "steps": int(r[2]),
               "version": int(r[3]), "error": r[4]}
        return Result(p.returncode, p.stdout, bid, events, row, seconds)

    def version_row(self, name, version):
        rows = self.sql(
            "SELECT env::text, workdir, run_user, coalesce(start_cmd::text,"
            " 'null'), coalesce(ready_cmd::text, 'null'), build_id"
            " FROM template_versions WHERE name = :'p1'"
            " AND version = :'p2'::int", name, str(version))
        assert len(rows) == 1, rows
        r = rows[0]
        return {"env": json.loads(r[0]), "workdir": r[1], "user": r[2],
                "start": json.loads(r[3]), "ready": json.loads(r[4]),
                "build_id": r[5]}

    def versions(self, name):
        return [int(r[0]) for r in self.sql(
            "SELECT version FROM template_versions WHERE name = :'p1'"
            " ORDER BY version", name)]

    def rootfs(self, name, version):
        return os.path.join(self.pool, "template-versions", name,
                            str(version), "rootfs")

    def leftovers(self):
        """Temporary subvolumes of builds (none once a build ended)."""
        out = []
        for sub in ("layers", "template-versions"):
            d = os.path.join(self.pool, sub)
            if os.path.isdir(d):
                out += [os.path.join(d, n) for n in os.listdir(d)
                        if n.startswith(".tmp-")]
        return out


@pytest.fixture(scope="session")
def env():
    build = default_build()
    for b in ("airlock-builder", "airlock-agent", "airlock-controller"):
        assert os.access(os.path.join(build, b), os.X_OK), \
            f"{build}/{b} missing (run make)"
    if os.geteuid() != 0:
        pytest.skip("builder tests need root (btrfs pool, namespaces)")
    state = tempfile.mkdtemp(prefix="airlock-bt-")
    e = Env(state, build)
    try:
        os.makedirs(os.path.join(state, "log"), exist_ok=True)
        e.sh("start", "pg")
        e.sh("start", "pool")
        p = subprocess.run([os.path.join(build, "airlock-controller"),
                            "--init"], env=e.env, cwd="/",
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=300)
        assert p.returncode == 0, f"controller --init: {p.stdout}"
        yield e
    finally:
        subprocess.run([STACK, "down"], env=e.env, cwd=REPO,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=300, check=False)
        pool = os.path.join(state, "pool")
        if os.path.ismount(pool):
            subprocess.run(["umount", "-l", pool], check=False)
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="session")
def minimal(env):
    """The minimal template built once by the builder: its version."""
    r = env.build("minimal", os.path.join(REPO, "templates", "minimal"))
    assert r.rc == 0, r.output
    assert r.row["status"] == "succeeded", r.row
    return r
