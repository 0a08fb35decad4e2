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
	-Icore -I/usr/include/postgresql -I/usr/include/luajit-2.1
	-fsanitize=fuzzer-no-link,address,undefined
	-fno-sanitize-recover=undefined)
LIBS=(-lpq -ljson-c -lbtrfsutil -lcap -lcrypto -larchive -lluajit-5.1 -lpthread
	-lmnl -lnftnl -lssl -levent_openssl -levent)

# core/ once, as an archive: each target pulls only what it uses.
mkdir -p "$OUT/obj" "$OUT/artifacts"
objs=()
for c in core/*.c core/*/*.c; do
	# A build tool with a main(), not library code (see the Makefile).
	[ "$c" = core/sysfilter_gen.c ] && continue
	# Named by path: core/driver.c and core/vm/driver.c are two objects.
	n=${c#core/}
	n=${n%.c}
	n=${n//\//_}
	o=$OUT/obj/$n.o
	if [ ! -e "$o" ] || [ "$c" -nt "$o" ] ||
		[ -n "$(find core -name '*.h' -newer "$o" -print -quit)" ]; then
		if ! clang "${CFLAGS[@]}" -c "$c" -o "$o" \
			2>"$OUT/$n.log"; then
			# Only targets that need this object fail (at link).
			echo "fuzz: warning: $c does not build with clang" \
				"(see $OUT/$n.log)" >&2
			rm -f "$o"
			continue
		fi
		rm -f "$OUT/$n.log"
	fi
	objs+=("$o")
done
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

for src in "$@"; do
	name=$(basename "${src%.c}")
	bin=$OUT/$name
	# Program-side parsers (cli/, fcgi/, shim/, ...) are linked in from
	# the headers the target includes, plus any listed on a
	# "fuzz-sources: a.c b.c" comment line.
	extra=()
	while read -r h; do
		[ -f "${h%.h}.c" ] && extra+=("${h%.h}.c")
	done < <(sed -En 's@^#include "(\.\./\.\./)?(cli|fcgi|shim|controller|guest)/([A-Za-z0-9_]+\.h)".*@\2/\3@p' "$src")
	for f in $(sed -n 's|.*fuzz-sources:\([^*]*\).*|\1|p' "$src"); do
		extra+=("$f")
	done
	if ! clang "${CFLAGS[@]}" -fsanitize=fuzzer -o "$bin" "$src" \
		"${extra[@]}" "$OUT/libairlock-fuzz.a" "${LIBS[@]}" \
		2>"$OUT/$name.build.log"; then
		cat "$OUT/$name.build.log" >&2
		echo "fuzz: FAIL: $name does not build"
		failed=$((failed + 1))
		continue
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
		echo "fuzz: ok   $name (${runs:-?} runs)"
		passed=$((passed + 1))
	else
		tail -n 40 "$log" >&2
		echo "fuzz: FAIL $name (log $log, inputs in $OUT/artifacts/)"
		failed=$((failed + 1))
	fi
done
finish
