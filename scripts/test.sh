#!/usr/bin/env bash
# `make test`: deps, sanitizer build, SQL layering and lint checks, cmocka
# unit tests, fuzz regression, then the integration and red-team suites
# against private stacks (their own temporary state directories and free
# ports, torn down even on failure).
#
# The last line sums every stage: "N passed, N failed" (", N skipped" when
# some were skipped). Exit status is non-zero when anything failed.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1

passed=0 failed=0 skipped=0
summary=()
start=$(date +%s)

# count_line "N passed, N failed[, N skipped]" -> adds to the totals.
count_line() {
	local line=$1 p f s
	p=$(sed -n 's/.*\b\([0-9][0-9]*\) passed.*/\1/p' <<<"$line")
	f=$(sed -n 's/.*\b\([0-9][0-9]*\) failed.*/\1/p' <<<"$line")
	s=$(sed -n 's/.*\b\([0-9][0-9]*\) skipped.*/\1/p' <<<"$line")
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	skipped=$((skipped + ${s:-0}))
}

# stage TITLE: prints the title and starts the stage's clock; took prints
# the seconds since, for the summary (where the time of a run goes).
stage() {
	stage_start=$(date +%s)
	printf '\n==== %s\n' "$*"
}
took() { echo "$(($(date +%s) - stage_start)) s"; }

finish() {
	local line
	stage "summary ($(($(date +%s) - start)) s)"
	printf '  %s\n' "${summary[@]}"
	line="$passed passed, $failed failed"
	[ "$skipped" -gt 0 ] && line="$line, $skipped skipped"
	echo "$line"
	[ "$failed" -eq 0 ]
	exit
}

stage "deps"
if ! scripts/deps.sh; then
	summary+=("deps: FAILED")
	failed=$((failed + 1))
	finish
fi
summary+=("deps: ok ($(took))")

# The tests start gateways (their own uids) from this checkout's
# build-san/ with its policies/: a checkout in a 0700 home needs o+x.
scripts/traverse.sh nobody "$REPO" || {
	summary+=("checkout unreachable by unprivileged users: FAILED")
	failed=$((failed + 1))
	finish
}

stage "build (ASan + UBSan) into build-san/"
unit_bins=()
for t in tests/unit/test_*.c; do
	[ -e "$t" ] || continue
	n=$(basename "${t%.c}")
	unit_bins+=("build-san/tests/$n")
done
if ! make -s -j"$(nproc)" SAN=1 all tools "${unit_bins[@]}"; then
	summary+=("build: FAILED (make SAN=1 all tools)")
	failed=$((failed + 1))
	finish
fi
summary+=("build: ok ($(took))")
# make run and make bench use the optimized build: its warnings differ
# (-O2 without sanitizers sees other format truncations).
if ! make -s -j"$(nproc)" all; then
	summary+=("build: FAILED (make all, the optimized build)")
	failed=$((failed + 1))
	finish
fi

stage "SQL only in core's model modules; core's folders without a cycle"
# The programs and the rest of core reach tables through core/model's
# al_<mod>_<verb> functions: no libpq result, al_db_exec call or statement
# text anywhere else. scripts/layers.py: core's folders include and call
# each other without a cycle, in the Makefile's LIB_ORDER.
if grep -nE 'PGresult|\bPQ[a-z]+\(|al_db_exec(_rows)?\(|"(SELECT|UPDATE|INSERT INTO|DELETE FROM) ' \
	$(git ls-files '*.c' '*.h' | grep -vE '^(core/model|tests|bench)/') ||
	! python3 scripts/layers.py; then
	summary+=("layering: FAILED (the lines above: SQL outside core/model, or a cycle)")
	failed=$((failed + 1))
else
	summary+=("layering: ok")
	passed=$((passed + 1))
fi

stage "lint (make lint: clang-format against .clang-format)"
# Style is the tool's: scripts/format.sh applies it, make lint checks it.
lint_out=$(mktemp)
if make -s lint >"$lint_out" 2>&1; then
	summary+=("lint: ok")
	passed=$((passed + 1))
else
	grep -o '^[^:]*:[0-9]*:[0-9]*: error' "$lint_out" | head -n 20
	nf=$(grep -o '^[^:]*:[0-9]*:[0-9]*: error' "$lint_out" | cut -d: -f1 |
		sort -u | wc -l)
	summary+=("lint: FAILED ($nf files off style; scripts/format.sh fixes them)")
	failed=$((failed + 1))
fi
rm -f "$lint_out"

stage "guest kernel for the vm driver (make vm-kernel, cached in build-san/vm-cache)"
# The test stack gets a fresh state directory every run; the kernel and
# initrd are fetched once into a cache with `make vm-kernel` and copied
# into it (tests/integration/conftest.py), so stack.sh up finds them up
# to date. The vm driver's unit tests find it through AIRLOCK_STATE.
# Without it the vm tests are skipped (they say why) or, where QEMU is
# installed, test_vm's check that the driver is listed fails.
vm_cache=$REPO/build-san/vm-cache
if make -s SAN=1 vm-kernel AIRLOCK_STATE="$vm_cache"; then
	export AIRLOCK_TEST_VM_CACHE=$vm_cache
	summary+=("vm kernel: ok ($(cat "$vm_cache/vm/kernel/version" 2>/dev/null), $(took))")
else
	summary+=("vm kernel: NOT fetched (make vm-kernel failed)")
fi

stage "unit tests (cmocka)"
# Tests that run the agent take the one this build made.
export AIRLOCK_AGENT=$REPO/build-san/airlock-agent
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if [ -n "${AIRLOCK_TEST_VM_CACHE:-}" ]; then
	AIRLOCK_STATE=$AIRLOCK_TEST_VM_CACHE scripts/run-unit.sh \
		"${unit_bins[@]}" | tee "$out"
else
	scripts/run-unit.sh "${unit_bins[@]}" | tee "$out"
fi
line=$(tail -n 1 "$out")
count_line "$line"
summary+=("unit: $line in $(took)")

# The fuzz regression is CPU and the template builder's tests mostly wait
# on the Debian mirror and dpkg: the one runs beside the other, its
# output shown once both are done.
stage "fuzz regression (libFuzzer), started beside the template builder"
fuzz_src=()
for f in tests/fuzz/fuzz_*.c; do
	[ -e "$f" ] && fuzz_src+=("$f")
done
fuzz_out=$(mktemp)
trap 'rm -f "$out" "$fuzz_out"' EXIT
fuzz_start=$(date +%s)
scripts/fuzz.sh "${fuzz_src[@]}" >"$fuzz_out" 2>&1 &
fuzz_pid=$!

# pytest_stage LABEL TIMEOUT DIR: run one pytest suite against the
# sanitizer build; adds its totals (and, when it has one, the vm part's
# line) to the summary. pytest failing without a failed test (collection
# error, timeout, crash) still counts as a failure.
pytest_stage() {
	local label=$1 tmo=$2 dir=$3 junit rc lines line vmline
	junit=$(mktemp --suffix=.xml)
	AIRLOCK_TEST_BUILD=$REPO/build-san timeout --foreground -k 30 "$tmo" \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider -rs --durations=15 \
		--junitxml="$junit" "$dir"
	rc=$?
	lines=$(/usr/bin/python3 scripts/junit-summary.py "$junit")
	rm -f "$junit"
	line=$(head -n 1 <<<"$lines")
	vmline=$(sed -n 2p <<<"$lines")
	if [ "$rc" -ne 0 ] &&
		[ "$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")" = 0 ]; then
		line="${line/0 failed/1 failed}"
	fi
	count_line "$line"
	summary+=("$label: $line in $(took)")
	case "$vmline" in
	*" 0 passed, 0 failed, 0 skipped"*) ;;
	*) summary+=("  of which $vmline") ;;
	esac
}

stage "template builder (pytest, private PostgreSQL + pool, one debian build)"
pytest_stage builder 1800 tests/builder

stage "fuzz regression (libFuzzer): what it printed"
wait "$fuzz_pid"
cat "$fuzz_out"
line=$(tail -n 1 "$fuzz_out")
count_line "$line"
summary+=("$line in $(($(date +%s) - fuzz_start)) s (beside the builder)")

stage "integration (pytest, private stack from build-san/, drivers ns and vm)"
pytest_stage integration 3600 tests/integration

stage "red team (pytest, private stack: attempts from root inside ns and vm sandboxes)"
pytest_stage redteam 1500 tests/redteam
finish
