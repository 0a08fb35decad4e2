# Sourced by bench/run.sh and bench/scale.sh: a private stack for one
# bench run, in a temporary state directory on free ports, with the
# optimized build (AIRLOCK_BUILD, default build/), torn down on exit.
#
# Before sourcing: REPO (the checkout, also the working directory), and
# whatever AIRLOCK_* settings the bench wants the stack to run with;
# a function bench_before_down, when defined, runs before the teardown
# (to remove what the bench made in the pool). After sourcing: BUILD,
# OUT (BUILD/bench, the bench's binaries and logs), STATE, API (the
# stack's URL), KEY_FILE; private_stack_up starts it.
#
# BENCH_VM_CACHE: a directory prepared like AIRLOCK_TEST_VM_CACHE (it
# holds vm/kernel/ and vm/initrd.img), copied in so that `up` finds the
# guest kernel instead of fetching it.

BUILD=$(realpath -m -- "${AIRLOCK_BUILD:-$REPO/build}")
OUT=$BUILD/bench
mkdir -p "$OUT"

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

STATE=$(mktemp -d /tmp/airlock-bench-XXXXXX)
export AIRLOCK_STATE=$STATE AIRLOCK_BUILD=$BUILD
export AIRLOCK_HTTP_PORT=${BENCH_HTTP_PORT:-$(free_port)}
export AIRLOCK_HTTPS_PORT=${BENCH_HTTPS_PORT:-$(free_port)}
export AIRLOCK_POOL_SIZE=${AIRLOCK_POOL_SIZE:-4G}
API=http://127.0.0.1:$AIRLOCK_HTTP_PORT
KEY_FILE=$STATE/api-key

private_stack_down() {
	set +e
	if declare -F bench_before_down >/dev/null; then bench_before_down; fi
	scripts/stack.sh down
	if mountpoint -q "$STATE/pool"; then umount -l "$STATE/pool"; fi
	for dev in $(losetup -j "$STATE/pool.img" -n -O NAME 2>/dev/null); do
		losetup -d "$dev"
	done
	rm -rf "$STATE"
}
trap private_stack_down EXIT
trap 'exit 130' INT TERM

private_stack_up() {
	local cache=${BENCH_VM_CACHE:-}
	if [ -n "$cache" ] && [ -f "$cache/vm/kernel/vmlinuz" ]; then
		mkdir -p "$STATE/vm"
		cp -r "$cache/vm/kernel" "$STATE/vm/"
		if [ -f "$cache/vm/initrd.img" ]; then
			cp -p "$cache/vm/initrd.img" "$STATE/vm/"
		fi
	fi
	echo "bench: starting a private stack in $STATE"
	scripts/stack.sh up >"$OUT/stack-up.log" 2>&1 || {
		cat "$OUT/stack-up.log"
		cp -r "$STATE/log" "$OUT/failed-logs" 2>/dev/null || true
		exit 1
	}
}

# The drivers GET /v1/info lists: vm_ok=1 (and accel, its accelerator)
# where vm is usable, else vm_ok=0 and info says why.
private_stack_drivers() {
	info=$(curl -fsS -m 10 -H "Authorization: Bearer $(cat "$KEY_FILE")" \
		"$API/v1/info" 2>&1) || info="GET /v1/info failed: $info"
	vm_ok=0
	if /usr/bin/python3 -c 'import json,sys; sys.exit(0 if "vm" in json.loads(sys.argv[1]).get("drivers", []) else 1)' "$info" 2>/dev/null; then
		vm_ok=1
		accel=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["vm_accel"])' "$info")
	fi
}
