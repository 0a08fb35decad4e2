#!/usr/bin/env bash
# The C sources in .clang-format's style.
#
#   scripts/format.sh           reformat every C source in place
#   scripts/format.sh --check   change nothing; fail naming each file and
#                               line off style (what `make lint` runs)
#   scripts/format.sh --stat    change nothing; print how many files and
#                               lines a reformat would change
#   ... [FILE...]               only these files
#
# Every tracked *.c and *.h (git ls-files): the build directories hold
# generated C (build*/gen/sysfilter_bpf.c, libseccomp's output) that is
# not ours to style. Env: CLANG_FORMAT (clang-format).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
CF=${CLANG_FORMAT:-clang-format}
mode=fix
case "${1:-}" in
--check | --stat)
	mode=${1#--}
	shift
	;;
esac

if ! command -v "$CF" >/dev/null; then
	echo "format: $CF is not installed (make deps)" >&2
	exit 1
fi

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		mapfile -t files < <(git ls-files -- '*.c' '*.h')
	else
		mapfile -t files < <(find . -path ./build -prune -o \
			-path ./build-san -prune -o -name '*.[ch]' -print |
			sed 's|^\./||' | sort)
	fi
fi

case $mode in
check)
	exec "$CF" --dry-run -Werror "${files[@]}"
	;;
stat)
	nfiles=0 nlines=0
	for f in "${files[@]}"; do
		n=$("$CF" "$f" | diff "$f" - | grep -c '^<' || true)
		if [ "$n" -gt 0 ]; then
			nfiles=$((nfiles + 1))
			nlines=$((nlines + n))
		fi
	done
	echo "format: a reformat would change $nlines lines in $nfiles of" \
		"${#files[@]} files"
	;;
fix)
	"$CF" -i "${files[@]}"
	;;
esac
