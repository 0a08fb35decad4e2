#!/usr/bin/env bash
# `make bench-scale`: issue 9's rows that need many sandboxes at once, on
# a private stack (bench/private-stack.sh, like `make bench`):
#
#   ns density  up to BENCH_SCALE_NS (1000) idle ns sandboxes from 4
#       clients, held at once; stops at the first refusal and prints it
#       (status, Retry-After, error body: what limits the count), then
#       host memory (MemAvailable) and Pss per sandbox and PostgreSQL's
#       connections at that count (bench/density.py)
#   vm density  up to BENCH_SCALE_VM (100) idle vm sandboxes (256 MiB,
#       TCG here) from 2 clients: count held, their QEMUs' memory
#       (bench/vmrss.py's table) and idle CPU per VM over 10 s
#       (bench/vmidle.py's measure); skipped, with the reason, where
#       GET /v1/info does not list vm
#   streams  BENCH_SCALE_STREAM_SANDBOXES (50) ns sandboxes x
#       BENCH_SCALE_STREAMS_PER (40) `sleep` exec event streams open at
#       once, and GET /v1/health, create and DELETE timed beside them
#       (bench/streams.py), with the fcgi processes and threads
#
# Every row prints its figures, issue 9's goal and met / NOT met. The
# quotas are raised so that the host, not project default's quota, is
# what a row meets; PostgreSQL keeps the stack's max_connections (100: the shims hold none).
#
# Env: BENCH_SCALE_NS (1000), BENCH_SCALE_VM (100),
# BENCH_SCALE_STREAM_SANDBOXES (50), BENCH_SCALE_STREAMS_PER (40),
# BENCH_SCALE_ROWS ("ns vm streams"), AIRLOCK_BUILD (build),
# BENCH_VM_CACHE (see bench/private-stack.sh).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
NS=${BENCH_SCALE_NS:-1000}
VM=${BENCH_SCALE_VM:-100}
STREAM_SANDBOXES=${BENCH_SCALE_STREAM_SANDBOXES:-50}
STREAMS_PER=${BENCH_SCALE_STREAMS_PER:-40}
ROWS=${BENCH_SCALE_ROWS:-ns vm streams}

# Project default may hold every sandbox and stream asked for, with the
# default memory (512 MiB) and disk (4096 MiB) limits of each: 1,000
# sandboxes ask for 500 GiB and 4 TiB of limits, which no sandbox uses.
export AIRLOCK_QUOTA_SANDBOXES=${AIRLOCK_QUOTA_SANDBOXES:-$((NS + VM + STREAM_SANDBOXES + 100))}
export AIRLOCK_QUOTA_MEMORY_MB=${AIRLOCK_QUOTA_MEMORY_MB:-1099511627776}
export AIRLOCK_QUOTA_DISK_MB=${AIRLOCK_QUOTA_DISK_MB:-1099511627776}
export AIRLOCK_QUOTA_STREAMS=${AIRLOCK_QUOTA_STREAMS:-100000}
export AIRLOCK_QUOTA_CREATES_PER_MINUTE=${AIRLOCK_QUOTA_CREATES_PER_MINUTE:-1000000}
# A pool of fixed size (its standbys exist before the first create, so
# they are not counted in the memory per sandbox).
export AIRLOCK_WARM_POOL_MAX=${AIRLOCK_WARM_POOL_MAX:-2}
export AIRLOCK_POOL_SIZE=${AIRLOCK_POOL_SIZE:-16G}
. bench/private-stack.sh

private_stack_up
private_stack_drivers

bench_py() {
	/usr/bin/python3 "bench/$1" --url "$API" --key-file "$KEY_FILE" \
		--state "$STATE" "${@:2}" || {
		echo "bench: $1 failed (exit $?)"
		failed=1
	}
}

failed=0
for row in $ROWS; do
	case $row in
	ns) bench_py density.py --driver ns --count "$NS" --clients 4 ;;
	vm)
		if [ $vm_ok -eq 1 ]; then
			bench_py density.py --driver vm --count "$VM" \
				--clients 2 --settle 10 --window 10
		else
			echo
			echo "bench: vm density skipped: the stack does not list the vm driver"
			echo "  ($info)"
		fi
		;;
	streams)
		bench_py streams.py --sandboxes "$STREAM_SANDBOXES" \
			--per "$STREAMS_PER"
		;;
	*)
		echo "bench-scale: unknown row $row (ns, vm, streams)" >&2
		exit 100
		;;
	esac
done
exit $failed
