"""Real package clients in a template, and packages for them to fetch.

The debian and node templates (templates/) debootstrap from the host's
Debian mirror, which no test may reach. Their clients are Debian 12's own
binaries, and this host is Debian 12: CLIENTS is a template FROM minimal
with the host's curl, python3 (urllib), node + npm, apt-get + dpkg and
their libraries (merged /usr, as Debian lays it out), so the same
programs, TLS stacks (OpenSSL, node's, GnuTLS for apt) and trust stores
(the builder installs the host CA in /etc/ssl/certs/ca-certificates.crt,
npm is pointed at it by /etc/npmrc, node by NODE_EXTRA_CA_CERTS) run as in
those templates. (The host's node may be NodeSource's build, not Debian's
libnode: same https module and CA options.)

make_repos(dir, host) lays out, under dir/<host>/ (what
gateway_upstream.py serves with UPSTREAM_FILES), a one-package apt
repository (debian/dists/bookworm/..., unsigned: sources name it
[trusted=yes]) and an npm registry document + tarball, both of a package
"airlock-hello" whose payload is HELLO."""
import base64
import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile
import tempfile

HELLO = "hello from the airlock-hello package\n"
PKG = "airlock-hello"

BINARIES = [
    "/usr/bin/curl", "/usr/bin/python3.11", "/usr/bin/node",
    "/usr/bin/apt-get", "/usr/bin/apt-config", "/usr/bin/dpkg",
    "/usr/bin/dpkg-deb", "/usr/bin/dpkg-query", "/usr/bin/dpkg-split",
    "/usr/bin/dpkg-divert", "/usr/bin/dpkg-trigger", "/usr/bin/tar",
    "/usr/sbin/ldconfig", "/usr/sbin/start-stop-daemon", "/usr/bin/openssl",
]
TREES = ["/usr/lib/python3.11", "/usr/lib/node_modules/npm", "/usr/share/dpkg",
         "/usr/lib/apt/methods"]
SKIP = {"test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip",
        "pydoc_data", "__pycache__", "tests"}
SKIP_PREFIX = ("config-3",)
LINKS = {"/usr/bin/python3": "python3.11",
         "/usr/bin/npm": "../lib/node_modules/npm/bin/npm-cli.js",
         "/usr/bin/env": "/bin/busybox",
         "/usr/lib/ssl/certs": "/etc/ssl/certs",
         "/usr/lib/ssl/cert.pem": "/etc/ssl/certs/ca-certificates.crt",
         "/usr/lib/ssl/openssl.cnf": "/etc/ssl/openssl.cnf"}
FILES = ["/etc/ssl/openssl.cnf"]

AIRLOCKFILE = """FROM minimal
RUN ["/bin/busybox", "sh", "-c", "ln -s usr/lib /lib && ln -s usr/lib64 /lib64"]
COPY root/ /
RUN ["/bin/sh", "-c", "mkdir -p /var/lib/dpkg/info /var/lib/dpkg/updates /var/lib/dpkg/triggers /var/lib/apt/lists/partial /var/cache/apt/archives/partial /etc/apt/sources.list.d /etc/apt/apt.conf.d /etc/apt/preferences.d /etc/dpkg/dpkg.cfg.d /var/log/apt && touch /var/lib/dpkg/status /var/lib/dpkg/available && ldconfig"]
ENV NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/airlock-ca.crt
"""


def _ldd(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
            libs.append(parts[2])
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])
    return libs


def _is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _collect():
    files = set(FILES)
    for b in BINARIES:
        files.add(b)
    for t in TREES:
        for d, dirs, names in os.walk(t):
            dirs[:] = [x for x in dirs if x not in SKIP and
                       not x.startswith(SKIP_PREFIX)]
            for n in names:
                files.add(os.path.join(d, n))
    libs = set()
    for f in list(files):
        if (f in BINARIES or f.endswith(".so") or ".so." in f or
                "/methods/" in f) and _is_elf(f):
            libs.update(_ldd(f))
    # gconv and NSS modules are not needed; the resolver is libc's own.
    for lib in libs:
        files.add(lib)
    return files


def context_files():
    """{tar path: (kind, data)}: the context of AIRLOCKFILE."""
    out = {}
    for f in sorted(_collect()):
        if os.path.islink(f) and not os.path.exists(f):
            continue
        real = os.path.realpath(f)
        if not os.path.isfile(real):
            continue
        # The template is merged-/usr: /lib/x is /usr/lib/x.
        dest = real
        if dest.startswith(("/lib/", "/lib64/", "/bin/", "/sbin/")):
            dest = "/usr" + dest
        out["root" + dest] = ("file", real)
        name = f
        if name.startswith(("/lib/", "/lib64/", "/bin/", "/sbin/")):
            name = "/usr" + name
        if name != dest:
            out["root" + name] = ("link", dest)
    for link, target in LINKS.items():
        out["root" + link] = ("link", target)
    return out


class Tar(bytes):
    """A context tar whose repr (in a failing test's traceback) is short."""

    def __repr__(self):
        return "<context tar of %d bytes>" % len(self)


def context_tar():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, (kind, data) in sorted(context_files().items()):
            if kind == "link":
                info = tarfile.TarInfo(path)
                info.type = tarfile.SYMTYPE
                info.linkname = data
                tar.addfile(info)
                continue
            info = tar.gettarinfo(data, arcname=path)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(data, "rb") as fh:
                tar.addfile(info, fh)
    return Tar(buf.getvalue())


def _deb(d):
    """A tiny .deb of PKG (gzip members: no xz/zstd needed to unpack)."""
    src = os.path.join(d, "pkgsrc")
    os.makedirs(os.path.join(src, "DEBIAN"))
    os.makedirs(os.path.join(src, "usr/share", PKG))
    with open(os.path.join(src, "usr/share", PKG, "hello.txt"), "w") as f:
        f.write(HELLO)
    with open(os.path.join(src, "DEBIAN/control"), "w") as f:
        f.write("Package: %s\nVersion: 1.0\nArchitecture: all\n"
                "Maintainer: Airlock tests <tests@airlock.invalid>\n"
                "Description: a package for the tests\n" % PKG)
    out = os.path.join(d, "%s_1.0_all.deb" % PKG)
    subprocess.run(["dpkg-deb", "-Zgzip", "--root-owner-group", "--build",
                    src, out], check=True, capture_output=True)
    with open(out, "rb") as f:
        return f.read()


def _npm_tgz():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in (
                ("package/package.json", json.dumps(
                    {"name": PKG, "version": "1.0.0", "main": "index.js"})),
                ("package/index.js",
                 "module.exports = %s;\n" % json.dumps(HELLO))):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    os.chmod(path, 0o644)


def make_repos(root, host, npm_prefix=""):
    """The apt repository at https://<host>/debian and the npm registry
    at https://<host><npm_prefix>/ under root/<host>/."""
    top = os.path.join(root, host)
    with tempfile.TemporaryDirectory() as d:
        deb = _deb(d)
    pool = "pool/main/a/%s/%s_1.0_all.deb" % (PKG, PKG)
    _write(os.path.join(top, "debian", pool), deb)
    packages = (
        "Package: %s\nVersion: 1.0\nArchitecture: all\n"
        "Maintainer: Airlock tests <tests@airlock.invalid>\n"
        "Filename: %s\nSize: %d\nSHA256: %s\n"
        "Description: a package for the tests\n\n" % (
            PKG, pool, len(deb), hashlib.sha256(deb).hexdigest()))
    dist = os.path.join(top, "debian", "dists", "bookworm")
    plain = packages.encode()
    gz = gzip.compress(plain)
    _write(os.path.join(dist, "main/binary-amd64/Packages"), plain)
    _write(os.path.join(dist, "main/binary-amd64/Packages.gz"), gz)
    release = ("Origin: airlock-tests\nLabel: airlock-tests\n"
               "Suite: bookworm\nCodename: bookworm\n"
               "Date: Tue, 01 Dec 2026 00:00:00 UTC\n"
               "Architectures: amd64 all\nComponents: main\nSHA256:\n")
    for name, data in (("main/binary-amd64/Packages", plain),
                       ("main/binary-amd64/Packages.gz", gz)):
        release += " %s %d %s\n" % (hashlib.sha256(data).hexdigest(),
                                    len(data), name)
    _write(os.path.join(dist, "Release"), release)
    tgz = _npm_tgz()
    base = "https://%s%s" % (host, npm_prefix)
    doc = {"name": PKG, "dist-tags": {"latest": "1.0.0"},
           "versions": {"1.0.0": {
               "name": PKG, "version": "1.0.0", "main": "index.js",
               "dist": {
                   "tarball": "%s/%s/-/%s-1.0.0.tgz" % (base, PKG, PKG),
                   "shasum": hashlib.sha1(tgz).hexdigest(),
                   "integrity": "sha512-" + base64.b64encode(
                       hashlib.sha512(tgz).digest()).decode()}}}}
    npm = os.path.join(top, npm_prefix.lstrip("/"))
    _write(os.path.join(npm, PKG, "index"), json.dumps(doc))
    _write(os.path.join(npm, PKG, "-", "%s-1.0.0.tgz" % PKG), tgz)
    return {"deb": deb, "tgz": tgz}


def client_cases(host, npm_prefix):
    """(what, shell command, what its output holds) of each real client
    downloading from host over HTTPS (make_repos(root, host, npm_prefix)
    serves the packages; gateway_upstream.py /echo and /big/N the rest),
    verified by the template's trust store."""
    npm = "https://%s%s/" % (host, npm_prefix)
    return [
        ("curl", "curl -sS https://%s/echo" % host,
         "hello %s /echo" % host),
        # Debian's busybox wget runs `openssl s_client` for TLS (so it
        # cannot in minimal, which has no openssl).
        ("busybox wget", "busybox wget -q -O - https://%s/echo" % host,
         "hello %s /echo" % host),
        ("python urllib",
         "python3 -c \"import urllib.request,hashlib; d=urllib.request."
         "urlopen('https://%s/big/1048576').read(); "
         "print(hashlib.sha256(d).hexdigest())\"" % host,
         hashlib.sha256(b"x" * (1 << 20)).hexdigest()),
        ("node https",
         "node -e \"require('https').get('%s%s',r=>{let b='';"
         "r.on('data',c=>b+=c);r.on('end',()=>console.log(r.statusCode,"
         "JSON.parse(b).name))}).on('error',e=>{console.log(e.message);"
         "process.exit(1)})\"" % (npm, PKG),
         "200 " + PKG),
        ("npm install",
         "mkdir -p /tmp/n && cd /tmp/n && npm install --no-audit --no-fund "
         "--registry %s %s >/dev/null && cat node_modules/%s/index.js" % (
             npm, PKG, PKG),
         HELLO.strip()),
        ("apt-get install",
         "echo 'deb [trusted=yes] https://%s/debian bookworm main' "
         ">/etc/apt/sources.list && apt-get -q update >/dev/null && "
         "apt-get -q install -y %s >/dev/null && "
         "cat /usr/share/%s/hello.txt" % (host, PKG, PKG),
         HELLO.strip()),
    ]
