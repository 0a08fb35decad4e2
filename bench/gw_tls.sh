#!/usr/bin/env bash
# Gateway TLS costs (bench/gw_tls.c): leaf minting by the host CA, the
# mint socket round trip (signed and cached), and the gateway's CPU per
# guest TLS handshake. No stack needed (runs the mint service itself).
#
# Env: BENCH_GW_TLS_N (2000), AIRLOCK_BUILD (build: its libairlock.a and
# controller/mint.o are linked).
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N=${BENCH_GW_TLS_N:-2000}
# shellcheck disable=SC2086
bench_cc gw_tls -Icontroller -Igateway bench/gw_tls.c gateway/tlssess.c "$BUILD/obj/controller/mint.o" \
	"$BUILD/libairlock.a" $AL_LIBS
"$BUILD/bench/gw_tls" -n "$N"
