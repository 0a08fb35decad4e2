#!/usr/bin/env bash
# Egress policy decision time (bench/policy.c): the shipped
# policies/egress.lua through core/policy beside the same decision as a
# plain C loop; p50/p99, ratio, and the <= 5 us goal. No stack needed.
#
# Env: BENCH_POLICY_DECISIONS (100000), AIRLOCK_BUILD (build: its
# libairlock.a is linked).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
BUILD=$(realpath -m -- "${AIRLOCK_BUILD:-$REPO/build}")
N=${BENCH_POLICY_DECISIONS:-100000}
[ -f "$BUILD/libairlock.a" ] || { echo "no $BUILD/libairlock.a (make)" >&2; exit 1; }

SAN=
case "$BUILD" in *-san) SAN="-fsanitize=address,undefined" ;; esac
mkdir -p "$BUILD/bench"
cc -std=gnu17 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE $SAN -Icore \
	-o "$BUILD/bench/policy" bench/policy.c "$BUILD/libairlock.a" \
	-lluajit-5.1
"$BUILD/bench/policy" -n "$N" policies/egress.lua
