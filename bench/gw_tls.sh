#!/usr/bin/env bash
# Gateway TLS costs (bench/gw_tls.c): leaf minting by the host CA, the
# mint socket round trip (signed and cached), and the gateway's CPU per
# guest TLS handshake. No stack needed (runs the mint service itself).
#
# Env: BENCH_GW_TLS_N (2000), AIRLOCK_BUILD (build: its libairlock.a and
# controller/mint.o are linked).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
BUILD=$(realpath -m -- "${AIRLOCK_BUILD:-$REPO/build}")
N=${BENCH_GW_TLS_N:-2000}
[ -f "$BUILD/libairlock.a" ] || { echo "no $BUILD/libairlock.a (make)" >&2; exit 1; }

SAN=
case "$BUILD" in *-san) SAN="-fsanitize=address,undefined" ;; esac
mkdir -p "$BUILD/bench"
cc -std=gnu17 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE $SAN -Icore \
	-Icontroller -Igateway -o "$BUILD/bench/gw_tls" bench/gw_tls.c \
	gateway/tlssess.c \
	"$BUILD/obj/controller/mint.o" "$BUILD/libairlock.a" \
	-lpq -ljson-c -lbtrfsutil -lcap -lcrypto -larchive -lluajit-5.1 -lpthread \
	-lmnl -lnftnl -lssl -levent_openssl -levent
"$BUILD/bench/gw_tls" -n "$N"
