#!/usr/bin/env bash
# `make bench`: a private stack (bench/private-stack.sh: temporary state
# directory, free ports, the optimized build/), then create -> exec
# `true` -> delete through nginx for each driver, beside a peer:
#
#   ns  200 rounds each: warm pool waited for (the best case), back to
#       back with the warm pool on but not waited for (what users do;
#       issue 9's goal: create p50 <= 2x, p99 <= 4x the peer's), and
#       cold; peer: bubblewrap running /bin/true in a fresh namespace
#       set over a snapshot of the same template
#   vm  100 rounds warm (waited for) and cold, 50 back to back (issue
#       9's goal: p50 <= 150 ms); peer: a cold boot of the same guest
#       kernel, initrd and template disk with plain QEMU -M microvm
#       (bench/vmboot), and the memory of 10 idle vm sandboxes
#       (bench/vmrss.py: Rss/Pss of their QEMUs, showing the
#       copy-on-write sharing of guest RAM) and the CPU they cost idle
#       (bench/vmidle.py: QEMU and shim per sandbox, in % of a core,
#       what wakes them)
#   burst  first, on the stack just started: 3 bursts of BENCH_BURST
#       (200) ns creates from 32 clients at once, 10 s apart, creates/s
#       and p50/p90/p99 (bench/burst.py), the first burst apart from the
#       later ones; peer: as many bwrap runs from 32 workers after each
#   files  a 200 MiB upload and download per driver (bench/files.py)
#       beside a host `cat` of the file into the sandbox's disk, with
#       the memory of the shim and the fcgi workers before and after
#   pause  last, per driver: BENCH_PAUSE_ROUNDS (100) POST pause and
#       resume of one busy sandbox (bench/pause.py); peer: ns, its
#       freezer cgroup written directly; vm, SIGSTOP / SIGCONT of its
#       QEMU (QMP is the shim's alone); issue 25's goal: <= 10 ms each
#   lifecycle  after it, with the warm pool still off: suspend and
#       resume (BENCH_LC_ROUNDS rounds, the guest writing 64 MiB), a
#       suspended sandbox's footprint, fork x10 and its children's
#       memory, per driver (bench/lifecycle_api.py); peers: cold creates
#       of the same template, and for the vm capture QEMU's migrate to a
#       file of the same kind of VM (bench/vmcapture, driver level)
#
# The vm series run only where GET /v1/info lists the vm driver; they
# say so when they are skipped. Tears everything down after. What needs
# many sandboxes at once is in `make bench-scale` (bench/scale.sh).
#
# Env: BENCH_ROUNDS (200, ns warm and cold), BENCH_B2B_ROUNDS (200, ns
# back to back), BENCH_BURST (200), BENCH_VM_ROUNDS (100),
# BENCH_VM_B2B_ROUNDS (50), BENCH_VM_PEER_RUNS (8), BENCH_VM_RSS_COUNT
# (10), BENCH_VM_IDLE_COUNT (10), BENCH_FILES_MIB (200),
# BENCH_PAUSE_ROUNDS (100), BENCH_LC_ROUNDS (5), BENCH_LC_FORK (10),
# BENCH_LC_PEER_ROUNDS (3), AIRLOCK_BUILD (build), BENCH_VM_CACHE (see
# bench/private-stack.sh).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
ROUNDS=${BENCH_ROUNDS:-200}
B2B_ROUNDS=${BENCH_B2B_ROUNDS:-200}
VM_B2B_ROUNDS=${BENCH_VM_B2B_ROUNDS:-50}
VM_ROUNDS=${BENCH_VM_ROUNDS:-100}
BURST=${BENCH_BURST:-200}
VM_PEER_RUNS=${BENCH_VM_PEER_RUNS:-8}
VM_RSS_COUNT=${BENCH_VM_RSS_COUNT:-10}
VM_IDLE_COUNT=${BENCH_VM_IDLE_COUNT:-10}
FILES_MIB=${BENCH_FILES_MIB:-200}
PAUSE_ROUNDS=${BENCH_PAUSE_ROUNDS:-100}
LC_ROUNDS=${BENCH_LC_ROUNDS:-5}
LC_FORK=${BENCH_LC_FORK:-10}
LC_PEER_ROUNDS=${BENCH_LC_PEER_ROUNDS:-3}
# Hundreds of creates a minute, all in project default: the create rate
# is what is measured here, not what a project may do.
export AIRLOCK_QUOTA_CREATES_PER_MINUTE=${AIRLOCK_QUOTA_CREATES_PER_MINUTE:-1000000}
# The burst holds BENCH_BURST sandboxes at once.
export AIRLOCK_QUOTA_SANDBOXES=${AIRLOCK_QUOTA_SANDBOXES:-1000}
. bench/private-stack.sh
PEER=$STATE/pool/bench-peer-root
VMPEER=$STATE/pool/bench-vmboot

cc -std=gnu17 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE \
	-o "$OUT/lifecycle" bench/lifecycle.c -lcurl -ljson-c
cc -std=gnu17 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE \
	-o "$OUT/vmboot" bench/vmboot.c
# shellcheck source=bench/lib.sh
. bench/lib.sh
# shellcheck disable=SC2086
bench_cc vmcapture bench/vmcapture.c "$BUILD/libairlock.a" $AL_LIBS

bench_before_down() {
	if [ -d "$PEER" ]; then
		btrfs subvolume delete "$PEER" >/dev/null 2>&1
	fi
	rm -rf "$VMPEER"
}

private_stack_up
btrfs subvolume snapshot "$STATE/pool/templates/minimal" "$PEER" >/dev/null

private_stack_drivers

# Bursts first, while the stack is as `make run` leaves it: the first
# one is what a user's first burst meets. The pool sizes itself to the
# creates (AIRLOCK_WARM_POOL_MAX, the spares).
/usr/bin/python3 bench/burst.py --url "$API" --key-file "$KEY_FILE" \
	--peer-root "$PEER" --count "$BURST" --clients 32 --bursts 3 \
	--shim-log "$STATE/log/shim.log"

lifecycle() {
	"$OUT/lifecycle" --url "$API" --key-file "$KEY_FILE" "$@"
}

# Series 1: a warm host. Each create claims a standby from the warm pool
# (the default, AIRLOCK_WARM_POOL=2); the bench waits, untimed, for the
# controller to refill the pool before each round.
lifecycle --driver ns --rounds "$ROUNDS" --peer-root "$PEER" \
	--label "best case: warm pool (AIRLOCK_WARM_POOL=2) refilled, untimed, before each round" \
	--wait-pool "$STATE/run/pool:minimal.ns.:2"

# Series 1b: the same warm pool, not waited for: creates back to back
# as a user's loop makes them, each claiming whatever the controller
# has refilled meanwhile.
lifecycle --driver ns --rounds "$B2B_ROUNDS" --peer-root "$PEER" \
	--label "back to back, warm pool on (AIRLOCK_WARM_POOL=2) but not waited for" \
	--back-to-back-goals

peer_ms=
if [ $vm_ok -eq 1 ]; then
	# The vm peer: a cold boot of the template's disk with the stack's
	# kernel and initrd, no snapshot (5-10 boots of ~4.5 s under TCG).
	vmdir=$(readlink "$STATE/pool/templates/minimal/.airlock-vm" || true)
	disk=${vmdir:+$vmdir/disk.ext4}
	if [ -z "$disk" ] || [ ! -f "$disk" ]; then
		disk=$(find "$STATE/pool" -name disk.ext4 -print -quit)
	fi
	mkdir -p "$VMPEER"
	if "$OUT/vmboot" --kernel "$STATE/vm/kernel/vmlinuz" \
		--initrd "$STATE/vm/initrd.img" --disk "$disk" \
		--workdir "$VMPEER" --runs "$VM_PEER_RUNS" --accel "$accel" \
		>"$OUT/vmboot.out"; then
		cat "$OUT/vmboot.out"
		peer_ms=$(sed -n 's/^vmboot_p50_ms=//p' "$OUT/vmboot.out")
	else
		cat "$OUT/vmboot.out"
		echo "bench: the vm peer (cold QEMU boot) failed; ratios omitted"
	fi
	rm -rf "$VMPEER"

	lifecycle --driver vm --rounds "$VM_ROUNDS" \
		--label "best case: warm pool (AIRLOCK_WARM_POOL_VM=2) refilled, untimed, before each round, accel $accel" \
		--wait-pool "$STATE/run/pool:minimal.vm.:2" \
		${peer_ms:+--peer-ms "$peer_ms" --peer-label "cold QEMU boot"}
	lifecycle --driver vm --rounds "$VM_B2B_ROUNDS" \
		--label "back to back, warm pool on (AIRLOCK_WARM_POOL_VM=2) but not waited for, accel $accel" \
		--back-to-back-goals \
		${peer_ms:+--peer-ms "$peer_ms" --peer-label "cold QEMU boot"}
else
	echo
	echo "bench: vm series skipped: the stack does not list the vm driver"
	echo "  ($info)"
fi

# Series 2: every create starts cold (ns: snapshot, cgroups, namespaces,
# agent; vm: rootfs snapshot, disk reflink, QEMU start, restore of the
# template snapshot), as on a host whose pool is drained by a burst.
export AIRLOCK_WARM_POOL=0 AIRLOCK_WARM_POOL_VM=0
scripts/stack.sh restart fcgi >/dev/null
scripts/stack.sh restart controller >/dev/null
seen=$(wc -l <"$STATE/log/shim.log")
lifecycle --driver ns --rounds "$ROUNDS" --peer-root "$PEER" \
	--label "cold start (AIRLOCK_WARM_POOL=0)"
# Where a cold create's time goes, from the shims' own step timings.
/usr/bin/python3 bench/steps.py "$STATE/log/shim.log" --driver ns \
	--since "$seen"
if [ $vm_ok -eq 1 ]; then
	lifecycle --driver vm --rounds "$VM_ROUNDS" \
		--label "cold restore (AIRLOCK_WARM_POOL_VM=0), accel $accel" \
		${peer_ms:+--peer-ms "$peer_ms" --peer-label "cold QEMU boot"}
	/usr/bin/python3 bench/vmrss.py --url "$API" \
		--key-file "$KEY_FILE" --state "$STATE" \
		--count "$VM_RSS_COUNT"
	/usr/bin/python3 bench/vmidle.py --url "$API" \
		--key-file "$KEY_FILE" --state "$STATE" \
		--count "$VM_IDLE_COUNT"
fi

# A 200 MiB file up and down through the API, per driver, beside a host
# `cat` of it into the sandbox's disk, with the shim's and fcgi's memory.
file_drivers=ns
if [ $vm_ok -eq 1 ]; then file_drivers="ns vm"; fi
for d in $file_drivers; do
	/usr/bin/python3 bench/files.py --url "$API" \
		--key-file "$KEY_FILE" --state "$STATE" --driver "$d" \
		--size "$FILES_MIB"
done

# What each step of a start costs (the shims' timing lines): the user
# namespace, uid range and idmapped mount of the ns jail among them.
echo
echo "bench: start steps, from $STATE/log/shim.log"
/usr/bin/python3 bench/steps.py "$STATE/log/shim.log"

bench/policy.sh # egress policy decision time beside a plain C loop
bench/credmask.sh # response masking speed beside a plain copy

# Pause -> resume through the API on one busy sandbox per driver, beside
# the freezer (ns) or SIGSTOP of QEMU (vm); vm is skipped, with a
# message, where GET /v1/info does not list it.
/usr/bin/python3 bench/pause.py --url "$API" --key-file "$KEY_FILE" \
	--state "$STATE" --rounds "$PAUSE_ROUNDS"

# Suspend, resume and fork through the API per driver, each beside its
# peer (the warm pool is still off: the creates beside them are cold),
# and the vm capture beside QEMU's migrate to a file.
/usr/bin/python3 bench/lifecycle_api.py --url "$API" --key-file "$KEY_FILE" \
	--state "$STATE" --rounds "$LC_ROUNDS" --fork "$LC_FORK"
if [ $vm_ok -eq 1 ]; then
	"$OUT/vmcapture" --template "$STATE/pool/templates/minimal" \
		--rounds "$LC_PEER_ROUNDS"
fi
