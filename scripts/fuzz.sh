#!/usr/bin/env bash
# Fuzz regression: build each tests/fuzz/fuzz_<parser>.c with libFuzzer +
# ASan + UBSan against the core sources and run it briefly (20000 runs or
# 15 s, whichever comes first) over its corpus (tests/fuzz/corpus-<parser>,
# plus tests/fuzz/seeds-<parser> when present). A missing clang is a skip,
# reported as one. Last line: "fuzz: N passed, N failed[, N skipped]".
#
#   scripts/fuzz.sh tests/fuzz/fuzz_*.c
# Env: FUZZ_RUNS (20000), FUZZ_SECONDS (15).
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1
RUNS=${FUZZ_RUNS:-20000}
SECS=${FUZZ_SECONDS:-15}
OUT=build-san/fuzz
passed=0 failed=0 skipped=0

finish() {
	local line="fuzz: $passed passed, $failed failed"
	[ "$skipped" -gt 0 ] && line="$line, $skipped skipped"
	echo "$line"
	[ "$failed" -eq 0 ]
	exit
}

if [ $# -eq 0 ]; then
	echo "fuzz: no fuzz targets (tests/fuzz/fuzz_*.c)"
	finish
fi
if ! command -v clang >/dev/null; then
	echo "fuzz: SKIP: clang not installed (make deps)"
	skipped=$#
	finish
fi

CFLAGS=(-std=gnu17 -O1 -g -fno-omit-frame-pointer -D_GNU_SOURCE
	-Icore -Igateway -I/usr/include/postgresql -I/usr/include/luajit-2.1
	-fsanitize=fuzzer-no-link,address,undefined
	-fno-sanitize-recover=undefined)
LIBS=(-lpq -ljson-c -lbtrfsutil -lcap -lcrypto -larchive -lluajit-5.1 -lpthread
	-lmnl -lnftnl -lssl -levent_openssl -levent)

# core/ once, as an archive: each target pulls only what it uses. Objects
# build and targets run $JOBS at a time (one per core).
JOBS=$(nproc)
mkdir -p "$OUT/obj" "$OUT/artifacts"

# compile_core C O: one core object; a failure only drops it (targets
# that need it then fail at link).
compile_core() {
	if ! clang "${CFLAGS[@]}" -c "$1" -o "$2" 2>"${2%.o}.log"; then
		echo "fuzz: warning: $1 does not build with clang" \
			"(see ${2%.o}.log)" >&2
		rm -f "$2"
		return
	fi
	rm -f "${2%.o}.log"
}

# throttle: wait while $JOBS background jobs run.
throttle() {
	while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do
		wait -n
	done
}

objs=()
for c in core/*/*.c gateway/gw/*.c; do
	# A build tool with a main(), not library code (see the Makefile).
	[ "$c" = core/host/sysfilter_gen.c ] && continue
	# Named by path: core/sandbox/drivers.c and core/vm/driver.c are two objects.
	n=${c#core/}
	n=${n#gateway/}
	n=${n%.c}
	n=${n//\//_}
	o=$OUT/obj/$n.o
	if [ ! -e "$o" ] || [ "$c" -nt "$o" ] ||
		[ -n "$(find core gateway/gw -name '*.h' -newer "$o" -print -quit)" ]; then
		rm -f "$o"
		throttle
		compile_core "$c" "$o" &
	fi
	objs+=("$o")
done
wait
built=()
for o in "${objs[@]}"; do
	[ -e "$o" ] && built+=("$o")
done
objs=("${built[@]}")
# The jails' seccomp programs are generated at build time (the Makefile's
# sysfilter-gen); targets that reach a jail (fuzz_relay) link them.
gen=build-san/gen/sysfilter_bpf.c
if make -s SAN=1 "$gen" &&
	clang "${CFLAGS[@]}" -c "$gen" -o "$OUT/obj/sysfilter_bpf.o" \
		2>"$OUT/sysfilter_bpf.log"; then
	objs+=("$OUT/obj/sysfilter_bpf.o")
else
	echo "fuzz: warning: $gen does not build (see $OUT/sysfilter_bpf.log)" >&2
fi
rm -f "$OUT/libairlock-fuzz.a"
ar rcs "$OUT/libairlock-fuzz.a" "${objs[@]}"

# fuzz_one SRC: builds and runs one target; its verdict line goes to
# $OUT/<name>.verdict (printed in order once all have run).
fuzz_one() {
	local src=$1 name bin extra h f corpus dirs log runs verdict
	name=$(basename "${src%.c}")
	bin=$OUT/$name
	verdict=$OUT/$name.verdict
	# Program-side parsers (cli/, fcgi/, shim/, ...) are linked in from
	# the headers the target includes (but for one marked "faked": the
	# target defines its functions), plus any listed on a
	# "fuzz-sources: a.c b.c" comment line.
	extra=()
	while read -r h; do
		[ -f "${h%.h}.c" ] && extra+=("${h%.h}.c")
	done < <(sed -En '/faked/!s@^#include "(\.\./\.\./)?(cli|fcgi|shim|controller|guest)/([A-Za-z0-9_]+\.h)".*@\2/\3@p' "$src")
	for f in $(sed -n 's|.*fuzz-sources:\([^*]*\).*|\1|p' "$src"); do
		extra+=("$f")
	done
	if ! clang "${CFLAGS[@]}" -fsanitize=fuzzer -o "$bin" "$src" \
		"${extra[@]}" "$OUT/libairlock-fuzz.a" "${LIBS[@]}" \
		2>"$OUT/$name.build.log"; then
		{
			cat "$OUT/$name.build.log"
			echo "fuzz: FAIL: $name does not build"
		} >"$verdict"
		return
	fi
	corpus=tests/fuzz/corpus-${name#fuzz_}
	mkdir -p "$corpus"
	dirs=("$corpus")
	[ -d "tests/fuzz/seeds-${name#fuzz_}" ] &&
		dirs+=("tests/fuzz/seeds-${name#fuzz_}")
	log=$OUT/$name.log
	if "$bin" -runs="$RUNS" -max_total_time="$SECS" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$OUT/artifacts/$name-" "${dirs[@]}" \
		>"$log" 2>&1; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		echo "fuzz: ok   $name (${runs:-?} runs)" >"$verdict"
	else
		{
			tail -n 40 "$log"
			echo "fuzz: FAIL $name (log $log, inputs in $OUT/artifacts/)"
		} >"$verdict"
	fi
}

for src in "$@"; do
	rm -f "$OUT/$(basename "${src%.c}").verdict"
	throttle
	fuzz_one "$src" &
done
wait
for src in "$@"; do
	v=$OUT/$(basename "${src%.c}").verdict
	if [ -s "$v" ]; then
		cat "$v"
	else
		echo "fuzz: FAIL $(basename "${src%.c}") (no verdict)" >"$v"
		cat "$v"
	fi
	if tail -n 1 "$v" | grep -q '^fuzz: ok '; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
done
finish
