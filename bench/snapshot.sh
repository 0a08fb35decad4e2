#!/usr/bin/env bash
# Snapshot time without quotas, with full qgroups and with simple quotas
# (bench/snapshot.c), each on a fresh loop-mounted btrfs in a temporary
# directory; removed after.
#
# Env: BENCH_SNAPSHOT_ROUNDS (100), AIRLOCK_BUILD (build: its
# libairlock.a is linked).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(realpath -m -- "${AIRLOCK_BUILD:-$REPO/build}")
ROUNDS=${BENCH_SNAPSHOT_ROUNDS:-100}
[ "$(id -u)" -eq 0 ] || { echo "run as root (mounts)" >&2; exit 1; }
[ -f "$BUILD/libairlock.a" ] || { echo "no $BUILD/libairlock.a (make)" >&2; exit 1; }

SAN=
case "$BUILD" in *-san) SAN="-fsanitize=address,undefined" ;; esac
TMP=$(mktemp -d /tmp/airlock-bench-snap-XXXXXX)
cleanup() {
	set +e
	for m in "$TMP"/off "$TMP"/full "$TMP"/simple; do
		mountpoint -q "$m" && umount "$m"
	done
	rm -rf "$TMP"
}
trap cleanup EXIT

cc -std=gnu17 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE $SAN -I"$REPO/core" -I"$REPO/gateway" \
	-o "$TMP/snapshot" "$REPO/bench/snapshot.c" "$BUILD/libairlock.a" \
	-lbtrfsutil -lpq -ljson-c -lseccomp -lcap -lcrypto -larchive -lpthread

for mode in off full simple; do
	truncate -s 2G "$TMP/$mode.img"
	mkfs.btrfs -q "$TMP/$mode.img" >/dev/null
	mkdir "$TMP/$mode"
	mount -o loop "$TMP/$mode.img" "$TMP/$mode"
	if [ "$mode" = off ]; then
		"$TMP/snapshot" --pool "$TMP/$mode" --rounds "$ROUNDS"
	else
		"$TMP/snapshot" --pool "$TMP/$mode" --rounds "$ROUNDS" \
			--quota "$mode" || echo "($mode quotas: not on this kernel)"
	fi
	umount "$TMP/$mode"
done
