"""airlock-builder end to end: what a user building templates sees in the
build's event log, its row, and the published filesystem and version."""
import concurrent.futures
import filecmp
import os
import socket
import threading

import pytest

SMALL = """\
# a small template on top of minimal
FROM minimal
ENV GREETING="hello world" APP_HOME=/srv/app
WORKDIR /srv/app
COPY app/ ./
RUN echo "$GREETING" > greeting.txt && pwd > where.txt && id -u > builder-uid.txt
USER nobody
RUN id -u > /tmp/uid.txt && echo "$HOME" > /tmp/home.txt && cat data.txt
START ["/bin/sh", "-c", "echo started"]
READY test -f /srv/app/greeting.txt
"""
SMALL_FILES = {"app/data.txt": "some data\n", "app/bin/tool.sh": "#!/bin/sh\necho tool\n"}


def read(path):
    with open(path) as f:
        return f.read()


def test_minimal(env, minimal):
    st = minimal.status()
    assert st["status"] == "succeeded"
    v = st["version"]
    assert v >= 1 and minimal.row["version"] == v
    assert env.versions("minimal")[-1] == v
    assert os.path.isdir(env.rootfs("minimal", 1))
    root = env.rootfs("minimal", v)
    assert os.readlink(os.path.join(root, "bin", "sh")) == "/bin/busybox"
    assert filecmp.cmp(os.path.join(root, "sbin", "airlock-agent"),
                       os.path.join(env.bin, "airlock-agent"), shallow=False)
    assert os.stat(os.path.join(root, "sbin", "airlock-agent")).st_mode & 0o777 == 0o755
    assert "nobody:x:65534" in read(os.path.join(root, "etc", "passwd"))
    for d in ("proc", "dev", "sys", "tmp"):
        assert os.path.isdir(os.path.join(root, d))
    # The build's scaffolding is gone from the result.
    assert not os.path.exists(os.path.join(root, ".airlock-build"))
    # pool/templates/minimal now follows the current version.
    link = os.path.join(env.pool, "templates", "minimal")
    assert os.path.islink(link)
    assert os.path.realpath(link) == os.path.realpath(root)
    steps = minimal.steps()
    assert [s["step"] for s in steps] == list(range(1, len(steps) + 1))
    assert all(s["steps"] == len(steps) for s in steps)
    assert env.leftovers() == []


def test_small_template(env, minimal):
    r = env.build_dir("small", SMALL, SMALL_FILES)
    assert r.rc == 0, r.output
    st = r.status()
    assert st["status"] == "succeeded" and st["version"] == 1
    root = env.rootfs("small", 1)
    assert read(os.path.join(root, "srv/app/greeting.txt")) == "hello world\n"
    assert read(os.path.join(root, "srv/app/where.txt")) == "/srv/app\n"
    assert read(os.path.join(root, "srv/app/builder-uid.txt")) == "0\n"
    assert read(os.path.join(root, "srv/app/data.txt")) == "some data\n"
    assert read(os.path.join(root, "srv/app/bin/tool.sh")).startswith("#!/bin/sh")
    # USER nobody took effect for the RUN after it, with nobody's HOME.
    assert read(os.path.join(root, "tmp/uid.txt")) == "65534\n"
    assert read(os.path.join(root, "tmp/home.txt")) == "/nonexistent\n"
    # The RUN's output reached the log, under its step.
    run_step = [s for s in r.steps() if s["text"].startswith("RUN id -u")][0]
    assert "some data" in r.text(run_step["step"])
    v = env.version_row("small", 1)
    assert v["env"] == {"GREETING": "hello world", "APP_HOME": "/srv/app"}
    assert v["workdir"] == "/srv/app"
    assert v["user"] == "nobody"
    assert v["start"] == ["/bin/sh", "-c", "echo started"]
    assert v["ready"] == ["/bin/sh", "-c", "test -f /srv/app/greeting.txt"]
    assert v["build_id"] == r.id
    # The step events name the lines of the file.
    assert [s["line"] for s in r.steps()] == [2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert all(not s["cached"] for s in r.steps()[1:] if s["text"].startswith(("RUN", "COPY")))


def test_second_build_all_cached(env, minimal):
    first = env.build_dir("cached", SMALL, SMALL_FILES)
    assert first.rc == 0, first.output
    again = env.build_dir("cached", SMALL, SMALL_FILES)
    assert again.rc == 0, again.output
    assert all(s["cached"] for s in again.steps()), again.steps()
    assert again.text() == ""  # nothing ran
    assert again.seconds < 10, f"cached build took {again.seconds:.1f} s"
    assert again.status()["version"] == first.status()["version"] + 1
    assert read(os.path.join(env.rootfs("cached", 2), "srv/app/greeting.txt")) == "hello world\n"

    # A changed COPY source rebuilds from that step on, not before.
    files = dict(SMALL_FILES, **{"app/data.txt": "other data\n"})
    changed = env.build_dir("cached", SMALL, files)
    assert changed.rc == 0, changed.output
    cached = {s["text"].split()[0]: s["cached"] for s in changed.steps()[:4]}
    assert cached == {"FROM": True, "ENV": True, "WORKDIR": True, "COPY": False}
    assert "other data" in changed.text()


def test_no_cache_rebuilds(env, minimal):
    first = env.build_dir("nocache", SMALL, SMALL_FILES)
    assert first.rc == 0, first.output
    r = env.build_dir("nocache", SMALL, SMALL_FILES, no_cache=True)
    assert r.rc == 0, r.output
    fs_steps = [s for s in r.steps() if s["text"].startswith(("RUN", "COPY"))]
    assert fs_steps and not any(s["cached"] for s in fs_steps)
    assert "some data" in r.text()
    assert read(os.path.join(env.rootfs("nocache", 2), "tmp/uid.txt")) == "65534\n"


def test_failing_run(env, minimal):
    af = ("FROM minimal\n"
          "RUN echo first step\n"
          "RUN echo going to fail; echo oops >&2; exit 3\n"
          "RUN echo never\n")
    r = env.build_dir("fails", af)
    assert r.rc == 1, r.output
    st = r.status()
    assert st["status"] == "failed"
    assert st["step"] == 3 and st["line"] == 3
    assert st["error"] == "line 3: RUN exited with 3"
    assert r.row == {"status": "failed", "step": 3, "steps": 4, "version": 0,
                     "error": "line 3: RUN exited with 3"}
    assert "oops" in r.text(3) and "going to fail" in r.text(3)
    assert "never" not in r.text()
    # No template, no version, no half-built filesystem.
    assert env.sql("SELECT 1 FROM templates WHERE name = 'fails'") == []
    assert env.versions("fails") == []
    assert not os.path.exists(os.path.join(env.pool, "template-versions", "fails"))
    assert not os.path.lexists(os.path.join(env.pool, "templates", "fails"))
    assert env.leftovers() == []


def test_flooding_run_output_is_capped(env, minimal):
    """A RUN that prints 20 MiB leaves at most ~4 MiB of output events in
    log.jsonl, one marked truncated, and the build still succeeds."""
    af = ("FROM minimal\n"
          "RUN yes 'flooding the build log' | head -c 20971520\n"
          "RUN echo after the flood\n")
    r = env.build_dir("flood", af)
    assert r.rc == 0, r.output
    assert r.status()["status"] == "succeeded"
    size = os.path.getsize(os.path.join(env.state, "builds", r.id,
                                        "log.jsonl"))
    assert size <= 4 * 1024 * 1024 + 256 * 1024, size
    cut = [e for e in r.events if e.get("truncated")]
    assert len(cut) == 1 and cut[0]["step"] == 2, cut
    assert "passed 4 MiB" in cut[0]["data"]
    assert "after the flood" not in r.text()


def test_unknown_instruction(env, minimal):
    r = env.build_dir("unknown", "FROM minimal\nRUN true\nFOO bar\n")
    assert r.rc == 1, r.output
    st = r.status()
    assert st["status"] == "failed" and st["line"] == 3
    assert "line 3" in st["error"] and "unknown instruction" in st["error"]
    assert r.steps() == []  # nothing was attempted
    assert env.versions("unknown") == []


def test_copy_dotdot_refused(env, minimal):
    r = env.build_dir("dotdot", "FROM minimal\nCOPY ../etc/passwd /x\n")
    assert r.rc == 1, r.output
    st = r.status()
    assert st["status"] == "failed" and st["line"] == 2
    assert ".." in st["error"]
    assert env.versions("dotdot") == []


def test_run_cannot_reach_the_host(env, minimal):
    """A listener on the host's loopback: the build sandbox has its own
    network namespace (its own lo, and the slot's eth0 towards its
    gateway), so the connection fails like in any sandbox and the
    listener never sees it."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    seen = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                c, _ = srv.accept()
                seen.append(c)
                c.sendall(b"HTTP/1.0 200 OK\r\n\r\nreached\n")
                c.close()
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        # nc, not wget: Debian's static busybox wget crashes even on the
        # host.
        af = ("FROM minimal\n"
              f"RUN printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 127.0.0.1 {port}\n")
        r = env.build_dir("reach", af)
    finally:
        stop.set()
        t.join(timeout=5)
        srv.close()
    assert r.rc == 1, r.output
    st = r.status()
    assert st["status"] == "failed" and st["line"] == 2
    assert st["error"] == "line 2: RUN exited with 1"
    assert "Connection refused" in r.text()
    assert "reached" not in r.text()
    assert seen == []


def test_build_sandbox_isolation(env, minimal):
    """RUN sees a sandbox: its own hostname, pid namespace and network."""
    af = ("FROM minimal\n"
          "RUN hostname > /etc/build-hostname && "
          "ls /proc | grep -c '^[0-9]' > /etc/build-nproc && "
          "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' > /etc/build-netdev\n")
    r = env.build_dir("isolated", af)
    assert r.rc == 0, r.output
    root = env.rootfs("isolated", 1)
    assert read(os.path.join(root, "etc/build-hostname")) == "build\n"
    assert int(read(os.path.join(root, "etc/build-nproc"))) < 10
    # Its own lo, and the eth0 of its network slot when its gateway
    # started (else loopback only): none of the host's links.
    devs = read(os.path.join(root, "etc/build-netdev")).split()
    assert "lo" in devs and set(devs) <= {"lo", "eth0"}, devs


def test_unknown_user_fails(env, minimal):
    r = env.build_dir("baduser", "FROM minimal\nUSER nosuchuser\nRUN true\n")
    assert r.rc == 1, r.output
    st = r.status()
    assert st["line"] == 3 and "nosuchuser" in st["error"]


def test_concurrent_builds_of_one_name(env, minimal):
    af = "FROM minimal\nRUN echo {n} > /n.txt\n"
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        futs = [ex.submit(env.build_dir, "twice", af.format(n=i))
                for i in (1, 2)]
        res = [f.result() for f in futs]
    for r in res:
        assert r.rc == 0, r.output
    assert sorted(r.status()["version"] for r in res) == [1, 2]
    assert env.versions("twice") == [1, 2]
    link = os.path.join(env.pool, "templates", "twice")
    assert os.path.realpath(link) == os.path.realpath(env.rootfs("twice", 2))
    assert env.sql("SELECT version FROM templates WHERE name = 'twice'") == [["2"]]


@pytest.fixture(scope="session")
def debian(env):
    import os as _os
    repo = _os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))
    r = env.build("debian", _os.path.join(repo, "templates", "debian"),
                  timeout=3600)
    assert r.rc == 0, r.output[-5000:]
    return r


@pytest.mark.debian
def test_debian(env, debian):
    st = debian.status()
    assert st["status"] == "succeeded"
    root = env.rootfs("debian", st["version"])
    for p in ("usr/bin/bash", "usr/bin/python3", "usr/bin/git",
              "usr/bin/curl", "etc/ssl/certs/ca-certificates.crt",
              "sbin/airlock-agent"):
        assert os.path.exists(os.path.join(root, p)), p
    assert env.version_row("debian", st["version"])["env"] == {"LANG": "C.UTF-8"}
    # Nothing of the host's identity (debootstrap copies these in).
    assert read(os.path.join(root, "etc/hostname")) == "sandbox\n"
    assert read(os.path.join(root, "etc/resolv.conf")) == ""
    # A template on top of it runs its tools in the build sandbox.
    r = env.build_dir("debian-child",
                      "FROM debian\nRUN python3 -c 'print(6*7)' && git --version\n")
    assert r.rc == 0, r.output
    assert "42" in r.text() and "git version" in r.text()
    # Built once: a rebuild takes the debootstrap layer from the cache.
    again = env.build("debian", os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        "templates", "debian"))
    assert again.rc == 0
    assert all(s["cached"] for s in again.steps())
    assert again.seconds < 30


def test_host_ca_installed(env, minimal):
    """The host CA (made by controller --init) is in every version's trust
    store, and already in the layer a RUN step runs in (its HTTPS goes
    through the egress gateway, whose certificates that CA signs): once in
    the bundle however many templates are stacked, npm pointed at it."""
    pem = read(os.path.join(env.state, "keys", "ca.crt"))
    assert pem.startswith("-----BEGIN CERTIFICATE-----")
    r = env.build_dir("withca", (
        "FROM minimal\n"
        "RUN [\"/bin/sh\", \"-c\", \"grep -q 'BEGIN CERTIFICATE' "
        "/etc/ssl/certs/ca-certificates.crt\"]\n"))
    assert r.rc == 0, r.output
    root = env.rootfs("withca", 1)
    path = os.path.join(root, "usr/local/share/ca-certificates/airlock-ca.crt")
    assert read(path) == pem
    assert os.stat(path).st_mode & 0o777 == 0o644
    bundle = read(os.path.join(root, "etc/ssl/certs/ca-certificates.crt"))
    assert bundle.count(pem) == 1
    assert "cafile=/etc/ssl/certs/ca-certificates.crt" in \
        read(os.path.join(root, "etc/npmrc"))
