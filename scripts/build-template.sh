#!/usr/bin/env bash
# build-template.sh NAME DIR [--no-cache]
#
# Builds the template in DIR (an Airlockfile plus the files it COPYs) as
# the next version of NAME, in the foreground: assembles the build
# context (DIR's files; for `minimal` also the host's static
# /bin/busybox, which the repository does not carry), inserts a build row
# and runs airlock-builder on it. The same path the API takes, without
# the API: for the first start of a stack and for CI.
#
# Needs PostgreSQL migrated and the pool mounted (scripts/stack.sh up, or
# `stack.sh start pg` + `stack.sh start pool` + `airlock-controller
# --init`). Environment as for stack.sh: AIRLOCK_STATE (default ./var),
# AIRLOCK_BUILD (binaries, default build/), AIRLOCK_DB (default: the
# stack's cluster).
#
# Prints the build's events as they happen; exits 0 with the new version
# on the last line, 1 when the build failed (the error names the line),
# 100 on usage errors, 111 when no build could be attempted.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
	echo "usage: $0 NAME DIR [--no-cache]" >&2
	exit 100
}
die() {
	echo "build-template: $*" >&2
	exit 111
}

[ $# -ge 2 ] && [ $# -le 3 ] || usage
name=$1
dir=$2
no_cache=false
if [ $# -eq 3 ]; then
	[ "$3" = --no-cache ] || usage
	no_cache=true
fi
[[ $name =~ ^[a-z0-9][a-z0-9-]{0,62}$ ]] ||
	{ echo "build-template: NAME must be 1-63 of a-z 0-9 -" >&2; exit 100; }
[ -f "$dir/Airlockfile" ] ||
	{ echo "build-template: $dir/Airlockfile missing" >&2; exit 100; }

STATE=$(realpath -m -- "${AIRLOCK_STATE:-./var}")
BUILD=$(realpath -m -- "${AIRLOCK_BUILD:-$REPO/build}")
export AIRLOCK_STATE=$STATE
export AIRLOCK_DB=${AIRLOCK_DB:-"host=$STATE/run/pg dbname=airlock user=airlock"}
export AIRLOCK_LIBEXEC=${AIRLOCK_LIBEXEC:-$BUILD}
export AIRLOCK_SQL_DIR=${AIRLOCK_SQL_DIR:-$REPO/core/model/sql}

[ -x "$BUILD/airlock-builder" ] || die "$BUILD/airlock-builder missing (run: make)"
[ -x "$AIRLOCK_LIBEXEC/airlock-agent" ] ||
	die "$AIRLOCK_LIBEXEC/airlock-agent missing (run: make)"
command -v psql >/dev/null || die "psql missing (apt-get install postgresql-client)"

id=b$(od -An -N10 -tx1 /dev/urandom | tr -d ' \n')
bdir=$STATE/builds/$id
mkdir -p "$STATE/builds"
chmod 0700 "$STATE/builds"
mkdir "$bdir"

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
# Everything in DIR is the context, as the CLI would upload it.
cp -a "$dir/." "$ctx/"
if [ "$name" = minimal ] || [ "$(basename "$(realpath "$dir")")" = minimal ]; then
	[ -x /bin/busybox ] || die "/bin/busybox missing (apt-get install busybox-static)"
	if command -v file >/dev/null 2>&1; then
		file -L /bin/busybox | grep -q 'statically linked' ||
			die "/bin/busybox is not statically linked (install busybox-static)"
	fi
	cp /bin/busybox "$ctx/busybox"
fi
cp "$dir/Airlockfile" "$bdir/Airlockfile"
tar -C "$ctx" --owner=0 --group=0 --numeric-owner -cf "$bdir/context.tar" .

psql "$AIRLOCK_DB" -X -q -v ON_ERROR_STOP=1 -v id="$id" -v name="$name" \
	-v nc="$no_cache" >/dev/null <<'SQL' || die "cannot insert the build row (is the database migrated?)"
-- The operator's builds publish public templates of project default.
INSERT INTO template_builds (id, name, status, no_cache, project, public)
VALUES (:'id', :'name', 'queued', :'nc'::boolean, 'default', true);
SQL

echo "build $id: template $name from $dir" >&2
touch "$bdir/log.jsonl"
# Follow the event log while the builder runs, one line per event.
python3 -u - "$bdir/log.jsonl" <<'PY' &
import base64, json, os, sys, time
path = sys.argv[1]
with open(path, "rb") as f:
    buf = b""
    while True:
        chunk = f.read(65536)
        if not chunk:
            if os.path.exists(path + ".done"):
                break
            time.sleep(0.1)
            continue
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                e = json.loads(line)
            except ValueError:
                continue
            ev = e.get("event")
            if ev == "step":
                c = " (cached)" if e.get("cached") else ""
                print(f"[{e['step']}/{e['steps']}] line {e['line']}: {e['text']}{c}", flush=True)
            elif ev == "output":
                d = e.get("data")
                if d is None:
                    d = base64.b64decode(e.get("data_b64", "")).decode("utf-8", "replace")
                sys.stdout.write(d)
                sys.stdout.flush()
            elif ev == "info":
                print(f"  -- {e.get('message')}", flush=True)
            elif ev == "status":
                print(f"status: {json.dumps(e)}", flush=True)
PY
follower=$!
rc=0
"$BUILD/airlock-builder" --build "$id" || rc=$?
touch "$bdir/log.jsonl.done"
wait "$follower" || true
rm -f "$bdir/log.jsonl.done"
case $rc in
0)
	version=$(psql "$AIRLOCK_DB" -X -qtA -v id="$id" <<'SQL'
SELECT version FROM template_builds WHERE id = :'id';
SQL
)
	echo "template $name version $version (build $id)"
	;;
1) exit 1 ;;
*) exit 111 ;;
esac
