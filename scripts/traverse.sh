#!/usr/bin/env bash
# traverse.sh USER DIR...: USER must be able to reach each DIR. Every
# directory from / down to DIR that stops USER gets o+x, and nothing
# else (others may then pass through it, not list it).
#
# Daemons that drop to their own uids reach files by path: postgres its
# data directory, nginx its sockets, and each sandbox's gateway its
# program and the operator's policies. A checkout or state directory
# under a 0700 home (root's /root on Debian) would stop them.
set -euo pipefail

[ $# -ge 2 ] || {
	echo "usage: traverse.sh USER DIR..." >&2
	exit 2
}
user=$1
shift
for dir in "$@"; do
	dir=$(realpath -m -- "$dir")
	runuser -u "$user" -- test -x "$dir" 2>/dev/null && continue
	# From / down, so that each check sees its parents already open.
	d=
	IFS=/ read -ra parts <<<"${dir#/}"
	for part in "${parts[@]}"; do
		[ -n "$part" ] || continue
		d=$d/$part
		if ! runuser -u "$user" -- test -x "$d" 2>/dev/null; then
			printf 'airlock: chmod o+x %s (so %s can reach %s)\n' \
				"$d" "$user" "$dir" >&2
			chmod o+x "$d"
		fi
	done
	runuser -u "$user" -- test -x "$dir" || {
		printf 'airlock: %s cannot reach %s (check its permissions)\n' \
			"$user" "$dir" >&2
		exit 1
	}
done
