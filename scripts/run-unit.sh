#!/usr/bin/env bash
# Run cmocka unit test binaries, show their output, and close with one
# line "N passed, N failed" (", N skipped" when some were skipped).
# Exit status: 0 only when every test passed and every binary exited 0.
#
#   scripts/run-unit.sh build-san/tests/test_*
set -uo pipefail

passed=0 failed=0 skipped=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

if [ $# -eq 0 ]; then
	echo "run-unit: no unit test binaries given" >&2
fi

for t in "$@"; do
	if [ ! -x "$t" ]; then
		echo "run-unit: $t: not built" >&2
		failed=$((failed + 1))
		continue
	fi
	echo "== $t"
	# cmocka prints the summary on stderr and the rest on stdout; both
	# are shown and kept for counting.
	"$t" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	read -r p f s < <(awk '
		/^\[  PASSED  \] [0-9]+ test\(s\)/ { p += $4 }
		/^\[  FAILED  \] .*[0-9]+ test\(s\)/ {
			for (i = 1; i <= NF; i++) if ($i ~ /^test\(s\)/) { f += $(i-1); break }
		}
		/^\[  SKIPPED \] .*[0-9]+ test\(s\)/ {
			for (i = 1; i <= NF; i++) if ($i ~ /^test\(s\)/) { s += $(i-1); break }
		}
		END { printf "%d %d %d\n", p, f, s }' "$out")
	# A binary that died (sanitizer report, crash, exit(1) outside cmocka)
	# counts as a failure even when its summary claims otherwise.
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "run-unit: $t exited with status $rc" >&2
		f=1
	fi
	if [ "$rc" -eq 0 ] && [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ]; then
		echo "run-unit: $t printed no cmocka summary" >&2
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
done

line="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && line="$line, $skipped skipped"
echo "$line"
[ "$failed" -eq 0 ]
