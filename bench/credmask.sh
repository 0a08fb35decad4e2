#!/usr/bin/env bash
# Response masking speed (bench/credmask.c): gateway/gw/credmask over four
# kinds of body beside a copy of the same pieces; MB/s and ratio. No
# stack needed.
#
# Env: BENCH_CREDMASK_MIB (32), BENCH_CREDMASK_ROUNDS (5), AIRLOCK_BUILD
# (build: its libairlock.a is linked).
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# shellcheck disable=SC2086
bench_cc credmask bench/credmask.c "$BUILD/libairlock.a" $AL_LIBS
"$BUILD/bench/credmask" -m "${BENCH_CREDMASK_MIB:-32}" \
	-r "${BENCH_CREDMASK_ROUNDS:-5}"
