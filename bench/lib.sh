# bench/lib.sh: what the benchmarks that build a C program against
# libairlock share. Sourced (after set -euo pipefail); sets REPO (and
# changes to it), BUILD (AIRLOCK_BUILD, default build/) and SAN (the
# sanitizer flags of a build-san tree), and fails when BUILD has no
# libairlock.a.
# shellcheck shell=bash

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1
BUILD=$(realpath -m -- "${AIRLOCK_BUILD:-$REPO/build}")
[ -f "$BUILD/libairlock.a" ] || { echo "no $BUILD/libairlock.a (make)" >&2; exit 1; }
SAN=
case "$BUILD" in *-san) SAN="-fsanitize=address,undefined" ;; esac
# Everything libairlock links (the Makefile's CORE_LIBS).
# shellcheck disable=SC2034
AL_LIBS="-lpq -ljson-c -lbtrfsutil -lcap -lcrypto -larchive -lluajit-5.1
	-lpthread -lmnl -lnftnl -lssl -levent_openssl -levent"

# bench_cc NAME ARGS...: compile $BUILD/bench/NAME from ARGS (sources,
# objects, libraries, extra flags) with the project's warnings.
bench_cc() {
	local name=$1
	shift
	mkdir -p "$BUILD/bench"
	# shellcheck disable=SC2086
	cc -std=gnu17 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE $SAN -Icore -Igateway \
		-o "$BUILD/bench/$name" "$@"
}
