#!/usr/bin/env bash
# bench/build.sh: template builds and what templates cost on disk.
#
#   1. build `debian` (templates/debian) from nothing: debootstrap from
#      the host's apt mirror into the build cache, then publish
#   2. build it again: every step from the cache
#   3. 100 sandboxes of it on disk: 100 writable btrfs snapshots of the
#      version's rootfs (what the shim makes per sandbox), then the
#      pool's growth (df) and btrfs' own accounting (filesystem du:
#      exclusive vs shared) against the template's size; and the same
#      after each sandbox wrote 1 MiB of its own
#
# A private PostgreSQL + pool in a temporary state directory (no HTTP),
# torn down after. Env: AIRLOCK_BUILD (default build/), BENCH_SANDBOXES
# (100).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
BUILD=$(realpath -m -- "${AIRLOCK_BUILD:-$REPO/build}")
N=${BENCH_SANDBOXES:-100}

[ "$(id -u)" -eq 0 ] || { echo "bench/build.sh: run as root" >&2; exit 1; }
for b in airlock-builder airlock-agent airlock-controller; do
	[ -x "$BUILD/$b" ] || { echo "bench/build.sh: $BUILD/$b missing (make)" >&2; exit 1; }
done

STATE=$(mktemp -d /tmp/airlock-bench-build-XXXXXX)
export AIRLOCK_STATE=$STATE AIRLOCK_BUILD=$BUILD AIRLOCK_LIBEXEC=$BUILD
export AIRLOCK_DB="host=$STATE/run/pg dbname=airlock user=airlock"
export AIRLOCK_SQL_DIR=$REPO/core/model/sql
export AIRLOCK_POOL_SIZE=${AIRLOCK_POOL_SIZE:-16G}
POOL=$STATE/pool
SBX=$POOL/bench-sandboxes

cleanup() {
	set +e
	if [ -d "$SBX" ]; then
		for s in "$SBX"/*; do
			[ -e "$s" ] && btrfs subvolume delete "$s" >/dev/null 2>&1
		done
		rmdir "$SBX"
	fi
	scripts/stack.sh down >/dev/null 2>&1
	if mountpoint -q "$POOL"; then umount -l "$POOL"; fi
	for dev in $(losetup -j "$STATE/pool.img" -n -O NAME 2>/dev/null); do
		losetup -d "$dev"
	done
	rm -rf "$STATE"
}
trap cleanup EXIT

log() { printf 'bench/build: %s\n' "$*" >&2; }

scripts/stack.sh start pg >/dev/null
scripts/stack.sh start pool >/dev/null
(cd / && "$BUILD/airlock-controller" --init) >"$STATE/log/init.log" 2>&1

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

log "building debian from nothing (debootstrap; takes a minute or more)"
t0=$(now)
scripts/build-template.sh debian templates/debian >"$STATE/log/build1.log" 2>&1 ||
	{ tail -n 30 "$STATE/log/build1.log" >&2; exit 1; }
t1=$(now)
scripts/build-template.sh debian templates/debian >"$STATE/log/build2.log" 2>&1 ||
	{ tail -n 30 "$STATE/log/build2.log" >&2; exit 1; }
t2=$(now)
cold=$(secs "$t0" "$t1")
warm=$(secs "$t1" "$t2")
grep -q '(cached)' "$STATE/log/build2.log" || log "warning: second build was not cached"

ver=$(psql "$AIRLOCK_DB" -XtAc "SELECT version FROM templates WHERE name = 'debian'")
ROOT=$POOL/template-versions/debian/$ver/rootfs

# Sizes in MiB. df counts the whole pool (data + metadata); btrfs
# filesystem du counts file extents: exclusive to a subvolume vs shared.
df_used() {
	btrfs filesystem sync "$POOL" >/dev/null
	sync
	df -B1 --output=used "$POOL" | tail -n 1
}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
# "Total Exclusive Set-shared" of the paths, in bytes (summed).
fsdu() {
	btrfs filesystem du -s --raw "$@" | awk 'NR > 1 { t += $1; e += $2 }
		END { printf "%d %d\n", t, e }'
}
shared_set() {
	btrfs filesystem du -s --raw "$@" | awk 'NR > 1 { s = $3 } END { print s }'
}

read -r tmpl_total _ < <(fsdu "$ROOT")
mkdir -p "$SBX"
before=$(df_used)
t0=$(now)
for i in $(seq 1 "$N"); do
	btrfs subvolume snapshot "$ROOT" "$SBX/s$i" >/dev/null
done
t1=$(now)
after=$(df_used)
read -r all_total all_excl < <(fsdu "$SBX"/s*)
set_shared=$(shared_set "$SBX"/s*)

# Each sandbox writes 1 MiB of its own (a pip cache, a log...).
for i in $(seq 1 "$N"); do
	head -c 1048576 /dev/urandom >"$SBX/s$i/tmp/own.bin"
done
after_write=$(df_used)
read -r _ all_excl_w < <(fsdu "$SBX"/s*)

snap_ms=$(awk -v a="$t0" -v b="$t1" -v n="$N" 'BEGIN { printf "%.1f", (b - a) * 1000 / n }')
cat <<EOF

Template builds (templates/debian: bookworm minbase + bash coreutils
ca-certificates curl git python3; debootstrap from the host's mirror)
  build from nothing          ${cold} s
  rebuild, all steps cached   ${warm} s

Disk: $N sandboxes of debian (btrfs snapshots of the version's rootfs)
  template (file data)               $(mib "$tmpl_total") MiB
  $N full copies would be          $(mib $((tmpl_total * N))) MiB
  pool growth for $N sandboxes     $(mib $((after - before))) MiB (df, data + metadata)
  exclusive to the $N sandboxes    $(mib "$all_excl") MiB (btrfs filesystem du), shared set $(mib "$set_shared") MiB
  snapshot time                      ${snap_ms} ms per sandbox
  after each wrote 1 MiB             pool growth $(mib $((after_write - before))) MiB, exclusive $(mib "$all_excl_w") MiB
EOF
