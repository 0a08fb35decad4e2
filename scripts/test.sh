#!/usr/bin/env bash
# `make test`: deps, sanitizer build, cmocka unit tests, fuzz regression,
# then the integration suite against a private stack (its own temporary
# state directory and free ports, torn down even on failure).
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

stage() { printf '\n==== %s\n' "$*"; }

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

stage "build (ASan + UBSan) into build-san/"
unit_bins=()
for t in tests/unit/test_*.c; do
	[ -e "$t" ] || continue
	n=$(basename "${t%.c}")
	unit_bins+=("build-san/tests/$n")
done
if ! make -s -j"$(nproc)" SAN=1 all "${unit_bins[@]}"; then
	summary+=("build: FAILED (make SAN=1 all)")
	failed=$((failed + 1))
	finish
fi
summary+=("build: ok")

stage "unit tests (cmocka)"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
scripts/run-unit.sh "${unit_bins[@]}" | tee "$out"
line=$(tail -n 1 "$out")
count_line "$line"
summary+=("unit: $line")

stage "fuzz regression (libFuzzer)"
fuzz_src=()
for f in tests/fuzz/fuzz_*.c; do
	[ -e "$f" ] && fuzz_src+=("$f")
done
scripts/fuzz.sh "${fuzz_src[@]}" | tee "$out"
line=$(tail -n 1 "$out")
count_line "$line"
summary+=("$line")

stage "integration (pytest, private stack from build-san/)"
junit=$(mktemp --suffix=.xml)
AIRLOCK_TEST_BUILD=$REPO/build-san timeout --foreground -k 30 1800 \
	/usr/bin/python3 -m pytest -q -p no:cacheprovider \
	--junitxml="$junit" tests/integration
rc=$?
line=$(/usr/bin/python3 - "$junit" <<'EOF'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception:
    print("0 passed, 1 failed")
    sys.exit()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
t = f = s = 0
for su in suites:
    t += int(su.get("tests", 0))
    f += int(su.get("failures", 0)) + int(su.get("errors", 0))
    s += int(su.get("skipped", 0))
line = f"{t - f - s} passed, {f} failed"
if s:
    line += f", {s} skipped"
print(line)
EOF
)
rm -f "$junit"
# pytest failing without a failed test (collection error, timeout, crash)
# is still a failure.
if [ "$rc" -ne 0 ] && [ "$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")" = 0 ]; then
	line="${line/0 failed/1 failed}"
fi
count_line "$line"
summary+=("integration: $line")
finish
