#!/usr/bin/env bash
# Egress policy decision time (bench/policy.c): the shipped
# policies/egress.lua through core/policy beside the same decision as a
# plain C loop; p50/p99, ratio, and the <= 5 us goal. No stack needed.
#
# Env: BENCH_POLICY_DECISIONS (100000), AIRLOCK_BUILD (build: its
# libairlock.a is linked).
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N=${BENCH_POLICY_DECISIONS:-100000}
# shellcheck disable=SC2086
bench_cc policy bench/policy.c "$BUILD/libairlock.a" $AL_LIBS
"$BUILD/bench/policy" -n "$N" policies/egress.lua
