#!/usr/bin/env bash
# Start, stop and inspect a local Airlock stack.
#
#   scripts/stack.sh up        start everything in the background, return
#                              once GET /v1/health answers
#   scripts/stack.sh run       up, then stay in the foreground until
#                              Ctrl-C / SIGTERM, then down
#   scripts/stack.sh down      stop everything (state survives)
#   scripts/stack.sh status    what is running
#   scripts/stack.sh start|stop|restart pg|pool|fcgi|nginx|controller
#                              one component (used by the tests)
#
# Environment: the table in docs/operations.md, "Configuration" (its rows
# read by stack.sh: AIRLOCK_STATE, _BUILD, _HTTP_PORT, _HTTPS_PORT, _BIND,
# _FCGI_WORKERS, _PG_MAX_CONNECTIONS, _POOL_SIZE, _RUN_SIZE, _PG_PRISTINE,
# _DRIVERS, _POLICIES). Every other AIRLOCK_* variable is passed on to
# the daemons as it is; AIRLOCK_DB, _SQL_DIR and _LIBEXEC are set here.
#
# When qemu-system-x86_64 is installed, `up` also fetches the guest kernel
# for the vm driver (scripts/vm-kernel.sh, idempotent) before
# `airlock-controller --init` probes the accelerator and builds the
# templates' VM snapshots. A failure there is logged and the stack starts
# with the ns driver only (GET /v1/info says why vm is unavailable).
#
# Nothing outside the state directory is created, changed or stopped,
# except that directories above it get o+x when the postgres or nginx
# user could not otherwise reach it.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

STATE=$(realpath -m -- "${AIRLOCK_STATE:-./var}")
BUILD=$(realpath -m -- "${AIRLOCK_BUILD:-$REPO/build}")
HTTP_PORT=${AIRLOCK_HTTP_PORT:-8080}
HTTPS_PORT=${AIRLOCK_HTTPS_PORT:-8443}
PG_MAX_CONN=${AIRLOCK_PG_MAX_CONNECTIONS:-100}
[[ $PG_MAX_CONN =~ ^[0-9]+$ ]] || {
	echo "AIRLOCK_PG_MAX_CONNECTIONS: not a number" >&2
	exit 100
}
BIND=${AIRLOCK_BIND:-127.0.0.1}
WORKERS=${AIRLOCK_FCGI_WORKERS:-4}
POOL_SIZE=${AIRLOCK_POOL_SIZE:-16G}

RUN=$STATE/run
LOG=$STATE/log
POOL=$STATE/pool
POOL_IMG=$STATE/pool.img
PGDATA=$STATE/pg
PGSOCK=$RUN/pg
NGX=$STATE/nginx

# Every airlock process gets these explicitly; none relies on defaults.
export AIRLOCK_STATE=$STATE
export AIRLOCK_DB="host=$PGSOCK dbname=airlock user=airlock"
export AIRLOCK_SQL_DIR=$REPO/core/model/sql
export AIRLOCK_LIBEXEC=$BUILD

# Never fails: a closed stderr (see stop_run) must not stop what logs.
log() { printf 'airlock: %s\n' "$*" >&2 2>/dev/null || true; }
die() {
	printf 'airlock: error: %s\n' "$*" >&2
	exit 1
}

check_env() {
	# The path ends up unquoted in nginx and postgres configuration.
	[[ $STATE =~ ^[A-Za-z0-9._/+-]+$ ]] ||
		die "AIRLOCK_STATE=$STATE: use only letters, digits and ._/+-"
	[[ $HTTP_PORT =~ ^[0-9]+$ && $HTTPS_PORT =~ ^[0-9]+$ ]] ||
		die "AIRLOCK_HTTP_PORT / AIRLOCK_HTTPS_PORT must be numbers"
	[[ $WORKERS =~ ^[0-9]+$ && $WORKERS -ge 1 ]] ||
		die "AIRLOCK_FCGI_WORKERS must be a positive number"
	# Each fcgi thread (16 per worker) holds a connection once used; the
	# controller one, each running build one. Shims hold none.
	((WORKERS * 16 + 8 <= PG_MAX_CONN)) ||
		log "warning: AIRLOCK_FCGI_WORKERS=$WORKERS may open" \
			"$((WORKERS * 16)) PostgreSQL connections, more than" \
			"AIRLOCK_PG_MAX_CONNECTIONS=$PG_MAX_CONN leaves room for;" \
			"requests past it answer 503"
	[[ $BIND =~ ^[0-9a-fA-F.:]+$ ]] || die "AIRLOCK_BIND must be an IP address"
	[ "$(id -u)" -eq 0 ] ||
		die "run as root (mounts, namespaces and cgroups need it)"
}

pg_bin() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[ -n "$d" ] || die "PostgreSQL not found (run: make deps)"
	printf '%s\n' "$d"
}

# pid_alive PID: running and not a zombie.
pid_alive() {
	local st
	[ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] || return 1
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}

# find_pids NAME: processes running the program NAME that belong to this
# state directory (AIRLOCK_STATE in their environment). Matching on the
# environment instead of the command line keeps other stacks untouched.
find_pids() {
	local exe pid
	for exe in /proc/[0-9]*/exe; do
		pid=${exe#/proc/}
		pid=${pid%/exe}
		case "$(readlink "$exe" 2>/dev/null)" in
		*/"$1" | */"$1"" (deleted)") ;;
		*) continue ;;
		esac
		tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null |
			grep -qxF "AIRLOCK_STATE=$STATE" || continue
		echo "$pid"
	done
}

# stop_pids TIMEOUT PID...: SIGTERM, wait, then SIGKILL what is left.
stop_pids() {
	local timeout=$1 p left i
	shift
	[ $# -gt 0 ] || return 0
	kill -TERM "$@" 2>/dev/null || true
	for ((i = 0; i < timeout * 10; i++)); do
		left=0
		for p in "$@"; do pid_alive "$p" && left=1; done
		[ $left -eq 0 ] && return 0
		sleep 0.1
	done
	for p in "$@"; do
		if pid_alive "$p"; then
			log "pid $p did not stop in ${timeout}s; SIGKILL"
			kill -KILL "$p" 2>/dev/null || true
		fi
	done
	for ((i = 0; i < 50; i++)); do
		left=0
		for p in "$@"; do pid_alive "$p" && left=1; done
		[ $left -eq 0 ] && return 0
		sleep 0.1
	done
}

read_pidfile() {
	local p
	[ -r "$1" ] || return 0
	p=$(head -c 32 "$1" | tr -dc 0-9)
	[ -n "$p" ] && echo "$p"
	return 0
}

# ensure_traverse USER DIR...: scripts/traverse.sh (o+x on what stops
# USER on the way to each DIR).
ensure_traverse() {
	"$REPO/scripts/traverse.sh" "$@" || exit 1
}

nginx_user() {
	if id www-data >/dev/null 2>&1; then
		echo "www-data $(id -gn www-data)"
	else
		echo "nobody nogroup"
	fi
}

need_binary() {
	[ -x "$BUILD/$1" ] || die "$BUILD/$1 missing (run: make)"
}

tail_log() {
	local f
	for f in "$@"; do
		[ -s "$f" ] || continue
		printf -- '--- last lines of %s ---\n' "$f" >&2
		tail -n 25 "$f" >&2
	done
}

# ---------------------------------------------------------------- dirs

# run/ is a tmpfs. Its files (sockets, locks, pid files, markers) come
# and go with every create, and on ext4 each new inode cost a scan of
# the recently deleted ones (about a twentieth of a burst's CPU). What
# must outlive a `down`, the spools (events/ and egress/: what no
# controller has recorded yet), is kept on disk in spool/ from `down` to
# the next start. Its size (AIRLOCK_RUN_SIZE) bounds the memory the
# spools can take while PostgreSQL is away: past it a gateway counts
# the decisions it drops (core/net/egress.h), as on a full disk. A run/ left
# on disk by an older stack whose PostgreSQL still listens there stays
# as it is until its `down`.
RUN_SIZE=${AIRLOCK_RUN_SIZE:-512m}
[[ $RUN_SIZE =~ ^[0-9]+[kmgKMG%]?$ ]] || {
	echo "AIRLOCK_RUN_SIZE: a size such as 512m" >&2
	exit 100
}
SPOOL_SAVED=$STATE/spool

mount_run() {
	mkdir -p "$RUN"
	mountpoint -q "$RUN" && return 0
	if pg_running; then
		log "run/ stays on disk until the next down (PostgreSQL listens there)"
		return 0
	fi
	local d
	for d in events egress; do
		if [ -d "$RUN/$d" ]; then
			mkdir -p "$SPOOL_SAVED"
			cp -a "$RUN/$d" "$SPOOL_SAVED/" || die "saving $RUN/$d failed"
			rm -rf "${RUN:?}/$d"
		fi
	done
	mount -t tmpfs -o "mode=0711,nosuid,nodev,size=$RUN_SIZE" airlock-run \
		"$RUN" || die "mounting a tmpfs on $RUN failed"
	if [ -d "$SPOOL_SAVED" ]; then
		cp -a "$SPOOL_SAVED/." "$RUN/" || die "restoring the spools failed"
		rm -rf "$SPOOL_SAVED"
	fi
}

unmount_run() {
	mountpoint -q "$RUN" || return 0
	local d
	for d in events egress; do
		if [ -n "$(ls -A "$RUN/$d" 2>/dev/null)" ]; then
			mkdir -p "$SPOOL_SAVED"
			cp -a "$RUN/$d" "$SPOOL_SAVED/" ||
				{ log "keeping $RUN mounted: saving $d failed"; return 0; }
		fi
	done
	umount "$RUN" 2>/dev/null || umount -l "$RUN" || true
}

make_dirs() {
	mkdir -p "$STATE" "$LOG" "$POOL" "$NGX" "$STATE/keys"
	mount_run
	mkdir -p "$RUN/sbx"
	# Others may traverse (postgres, nginx workers) but not list.
	chmod 0711 "$STATE" "$RUN"
	chmod 0700 "$RUN/sbx" "$STATE/keys"
	chmod 0755 "$LOG"
	# The shims' stream sockets (mode 0666 each): only nginx's group may
	# enter, and not list, the directory.
	local user group
	read -r user group < <(nginx_user)
	mkdir -p "$RUN/stream"
	chown "root:$group" "$RUN/stream"
	chmod 0710 "$RUN/stream"
}

# ---------------------------------------------------------------- postgres

pg_running() {
	local p
	p=$(head -n 1 "$PGDATA/postmaster.pid" 2>/dev/null | tr -dc 0-9) || true
	pid_alive "$p"
}

start_pg() {
	local bin
	bin=$(pg_bin)
	id postgres >/dev/null 2>&1 ||
		die "no postgres system user (is the postgresql package installed?)"
	ensure_traverse postgres "$STATE"
	mkdir -p "$PGDATA" "$PGSOCK"
	chown postgres: "$PGDATA" "$PGSOCK"
	# Trust authentication is safe only because nobody but root and
	# postgres can enter the socket directory.
	chmod 0700 "$PGDATA" "$PGSOCK"
	touch "$LOG/pg.log"
	chown postgres: "$LOG/pg.log"
	chmod 0640 "$LOG/pg.log"

	local pristine=${AIRLOCK_PG_PRISTINE:-}
	if [ ! -s "$PGDATA/PG_VERSION" ] && [ -n "$pristine" ] &&
		[ -s "$pristine/data/PG_VERSION" ]; then
		log "PostgreSQL data from $pristine"
		cp -a "$pristine/data/." "$PGDATA/"
	fi
	if [ ! -s "$PGDATA/PG_VERSION" ]; then
		log "initdb $PGDATA"
		if ! (cd / && runuser -u postgres -- "$bin/initdb" -D "$PGDATA" \
			-U airlock --auth=trust --no-locale -E UTF8) \
			>"$LOG/initdb.log" 2>&1; then
			tail_log "$LOG/initdb.log"
			die "initdb failed"
		fi
		# Never started yet: a clean copy for the next state dir.
		if [ -n "$pristine" ] && [ ! -e "$pristine/data" ]; then
			local tmp=$pristine/data.tmp.$$
			mkdir -p "$pristine" && chmod 0700 "$pristine" &&
				cp -a "$PGDATA" "$tmp" &&
				mv -T "$tmp" "$pristine/data" ||
				{ rm -rf "$tmp"; log "warning: no copy in $pristine"; }
		fi
	fi
	if ! pg_running; then
		# setsid: a Ctrl-C in the terminal of `make run` must reach
		# this script (which stops things in order), not the postmaster.
		if ! (cd / && runuser -u postgres -- setsid "$bin/pg_ctl" \
			-D "$PGDATA" -l "$LOG/pg.log" -w -t 60 -s \
			-o "-k $PGSOCK -c listen_addresses='' -c max_connections=$PG_MAX_CONN" \
			start) >/dev/null 2>&1; then
			tail_log "$LOG/pg.log"
			die "PostgreSQL did not start"
		fi
	fi
	if ! "$bin/psql" -h "$PGSOCK" -U airlock -d postgres -XtAq -c \
		"SELECT 1 FROM pg_database WHERE datname = 'airlock'" |
		grep -qx 1; then
		"$bin/createdb" -h "$PGSOCK" -U airlock airlock ||
			die "createdb airlock failed"
	fi
}

stop_pg() {
	[ -e "$PGDATA/postmaster.pid" ] || return 0
	pg_running || return 0
	(cd / && runuser -u postgres -- "$(pg_bin)/pg_ctl" -D "$PGDATA" \
		-m fast -w -t 60 -s stop) >/dev/null 2>&1 ||
		log "pg_ctl stop failed; see $LOG/pg.log"
}

# ---------------------------------------------------------------- pool

# The loop device backing the pool mount, if it is our image.
pool_loopdev() {
	local src back
	mountpoint -q "$POOL" 2>/dev/null || return 0
	src=$(findmnt -n -o SOURCE --mountpoint "$POOL" 2>/dev/null | head -n 1)
	case "$src" in
	/dev/loop*) ;;
	*) return 0 ;;
	esac
	back=$(losetup -n -O BACK-FILE "$src" 2>/dev/null | sed 's/ *$//')
	[ "$back" = "$POOL_IMG" ] && echo "$src"
	return 0
}

# The pool is a filesystem of its own: a btrfs the operator mounted on
# $POOL, else the loop image, even when the state directory is on btrfs
# itself. A pool that were only a directory there would share its space
# with PostgreSQL, the logs and the keys, which a full pool (or one
# sandbox filling it) must never take down. airlock-controller --init
# checks it and turns the pool's disk quotas on.
start_pool() {
	mkdir -p "$POOL"
	if mountpoint -q "$POOL"; then
		[ "$(stat -f -c %T "$POOL")" = btrfs ] ||
			die "$POOL is a mount point but not btrfs"
	else
		if [ ! -s "$POOL_IMG" ]; then
			log "creating btrfs pool image $POOL_IMG ($POOL_SIZE, sparse)"
			rm -f "$POOL_IMG"
			truncate -s "$POOL_SIZE" "$POOL_IMG"
			chmod 0600 "$POOL_IMG"
			if ! mkfs.btrfs -q "$POOL_IMG" >"$LOG/mkfs.log" 2>&1; then
				rm -f "$POOL_IMG"
				tail_log "$LOG/mkfs.log"
				die "mkfs.btrfs failed"
			fi
		fi
		# Sandboxes write root-owned files (setuid ones too): the host
		# never honours them.
		mount -o loop,nosuid,nodev "$POOL_IMG" "$POOL" ||
			die "cannot loop-mount $POOL_IMG on $POOL"
	fi
	mkdir -p "$POOL/templates" "$POOL/sandboxes"
	chmod 0711 "$POOL"
	chmod 0700 "$POOL/templates" "$POOL/sandboxes"
}

# The built-in templates come from templates/<name>/Airlockfile through
# the same builder as any user template. minimal is built on the first
# start (well under a second); a pool made before template versions
# existed holds minimal as a plain subvolume: it is rebuilt.
ensure_template() {
	need_binary airlock-builder
	local link=$POOL/templates/minimal
	if [ -d "$link" ] && [ ! -L "$link" ]; then
		log "rebuilding the minimal template (old pool layout)"
		btrfs subvolume delete "$link" >/dev/null 2>&1 || rm -rf "$link"
	fi
	# A template carries the agent it was built with; after the agent
	# changed, minimal gets a new version (its layers come from cache).
	if [ -e "$link" ] &&
		cmp -s "$link/sbin/airlock-agent" "$BUILD/airlock-agent"; then
		return 0
	fi
	log "building the minimal template"
	if ! AIRLOCK_BUILD=$BUILD "$REPO/scripts/build-template.sh" minimal \
		"$REPO/templates/minimal" >"$LOG/template.log" 2>&1; then
		tail_log "$LOG/template.log"
		die "building the minimal template failed"
	fi
}

stop_pool() {
	local dev i
	dev=$(pool_loopdev)
	[ -n "$dev" ] || return 0
	for ((i = 0; i < 20; i++)); do
		umount "$POOL" 2>/dev/null && break
		sleep 0.25
	done
	if mountpoint -q "$POOL"; then
		log "pool still busy; detaching it lazily"
		umount -l "$POOL" || true
	fi
	# `mount -o loop` sets autoclear, but be sure the device is free.
	if losetup "$dev" 2>/dev/null | grep -qF "$POOL_IMG"; then
		losetup -d "$dev" 2>/dev/null || true
	fi
}

# Processes still inside a sandbox root after their shim is gone (a shim
# killed with SIGKILL cannot tear its jail down): their / is on our pool,
# seen either as a path under it (chroot) or, in their own mount
# namespace after pivot_root, as a "/" mount of the pool's device.
kill_jail_leftovers() {
	local dev d pid pids=()
	mountpoint -q "$POOL" 2>/dev/null || return 0
	dev=$(mountpoint -d "$POOL" 2>/dev/null) || return 0
	for d in /proc/[0-9]*; do
		pid=${d#/proc/}
		[ "$pid" = $$ ] && continue
		case "$(readlink "$d/root" 2>/dev/null)" in
		"$POOL"/*)
			pids+=("$pid")
			continue
			;;
		esac
		if awk -v dev="$dev" '$5 == "/" && $3 == dev { f = 1 }
			END { exit !f }' "$d/mountinfo" 2>/dev/null; then
			pids+=("$pid")
			continue
		fi
		# A vm sandbox's QEMU (it dies with its shim; this is for one
		# that is still on its way out) holds its disk in the pool.
		case "$(readlink "$d/exe" 2>/dev/null)" in
		*/qemu-system-*)
			if ls -l "$d/fd" 2>/dev/null | grep -qF -- "-> $POOL/"; then
				pids+=("$pid")
			fi
			;;
		esac
	done
	if [ ${#pids[@]} -gt 0 ]; then
		log "killing ${#pids[@]} leftover sandbox processes"
		kill -KILL "${pids[@]}" 2>/dev/null || true
		sleep 0.5
	fi
}

# Network slots nobody removed (a controller stopped with SIGKILL
# cannot drain its ready ones; a killed shim leaves its leased one for
# the next controller's reconcile, and there is none after down): each
# is a bind mount of a namespace under run/net, which keeps the
# namespace, its links and its rules alive.
remove_net_slots() {
	local m n=0
	[ -d "$RUN/net" ] || return 0
	while read -r m; do
		umount -l "$m" 2>/dev/null && n=$((n + 1))
	done < <(awk -v d="$RUN/net/" 'index($5, d) == 1 { print $5 }' \
		/proc/self/mountinfo)
	[ $n -eq 0 ] || log "removed $n leftover network slot mount(s)"
	rm -rf "${RUN:?}/net"
}

# ---------------------------------------------------------------- daemons

component_pids() {
	local name=$1 pidfile=$2
	{
		read_pidfile "$pidfile" | while read -r p; do
			pid_alive "$p" && echo "$p"
		done
		find_pids "$name"
	} | sort -un
}

# spawn NAME LOGFILE PIDFILE ARGS...: detached (own session), cwd /.
spawn() {
	local name=$1 logf=$2 pidf=$3 pid
	shift 3
	(cd / && exec setsid "$BUILD/$name" "$@") >>"$logf" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$pidf"
}

start_fcgi() {
	local i
	need_binary airlock-fcgi
	need_binary airlock-shim
	[ -n "$(component_pids airlock-fcgi "$RUN/fcgi.pid")" ] && return 0
	local user group
	read -r user group < <(nginx_user)
	rm -f "$RUN/fcgi.sock"
	# Only nginx's group may connect (mode 0660, set by airlock-fcgi).
	spawn airlock-fcgi "$LOG/fcgi.log" "$RUN/fcgi.pid" \
		--socket "$RUN/fcgi.sock" --socket-group "$group" \
		--workers "$WORKERS"
	for ((i = 0; i < 100; i++)); do
		[ -S "$RUN/fcgi.sock" ] && break
		pid_alive "$(read_pidfile "$RUN/fcgi.pid")" || break
		sleep 0.1
	done
	if [ ! -S "$RUN/fcgi.sock" ]; then
		tail_log "$LOG/fcgi.log"
		die "airlock-fcgi did not create $RUN/fcgi.sock"
	fi
}

stop_fcgi() {
	# shellcheck disable=SC2046
	stop_pids 10 $(component_pids airlock-fcgi "$RUN/fcgi.pid")
	rm -f "$RUN/fcgi.pid" "$RUN/fcgi.sock"
}

# The guest kernel and initrd of the vm driver, into $STATE/vm.
ensure_vm_kernel() {
	[ -x /usr/bin/qemu-system-x86_64 ] || return 0
	case ",${AIRLOCK_DRIVERS:-vm}," in *,vm,*) ;; *) return 0 ;; esac
	if [ ! -x "$BUILD/airlock-init" ]; then
		log "vm driver unavailable: $BUILD/airlock-init missing (run: make)"
		return 0
	fi
	if ! "$REPO/scripts/vm-kernel.sh" "$STATE" "$BUILD/airlock-init" \
		>"$LOG/vm-kernel.log" 2>&1; then
		tail_log "$LOG/vm-kernel.log"
		log "vm driver unavailable: scripts/vm-kernel.sh failed (see $LOG/vm-kernel.log); starting with ns only"
	fi
	return 0
}

init_controller() {
	need_binary airlock-controller
	local had_key=0
	[ -s "$STATE/api-key" ] && had_key=1
	if ! (cd / && "$BUILD/airlock-controller" --init) \
		>>"$LOG/controller.log" 2>&1 </dev/null; then
		tail_log "$LOG/controller.log"
		die "airlock-controller --init failed (migrations / api key)"
	fi
	[ -s "$STATE/api-key" ] ||
		die "airlock-controller --init did not write $STATE/api-key"
	chmod 0600 "$STATE/api-key"
	[ $had_key -eq 1 ] || FIRST_KEY=1
}

start_controller() {
	need_binary airlock-controller
	[ -n "$(component_pids airlock-controller "$RUN/controller.pid")" ] &&
		return 0
	spawn airlock-controller "$LOG/controller.log" "$RUN/controller.pid"
}

stop_controller() {
	# shellcheck disable=SC2046
	stop_pids 10 $(component_pids airlock-controller "$RUN/controller.pid")
	rm -f "$RUN/controller.pid"
}

render_nginx() {
	local user group
	read -r user group < <(nginx_user)
	ensure_traverse "$user" "$RUN"
	mkdir -p "$NGX/tmp/body" "$NGX/tmp/fastcgi" "$NGX/tmp/proxy" \
		"$NGX/tmp/scgi" "$NGX/tmp/uwsgi"
	chown -R "$user:$group" "$NGX/tmp"
	chmod 0700 "$NGX/tmp"/*
	sed -e "s|unix:/var/lib/airlock/run/fcgi.sock|unix:$RUN/fcgi.sock|" \
		-e "s|unix:/var/lib/airlock/run/stream/|unix:$RUN/stream/|" \
		"$REPO/nginx/airlock.conf" >"$NGX/airlock.conf"
	cp "$REPO/nginx/airlock-http.conf" "$NGX/airlock-http.conf"
	sed -e "s|@STATE@|$STATE|g" -e "s|@HTTP_PORT@|$HTTP_PORT|g" \
		-e "s|@HTTPS_PORT@|$HTTPS_PORT|g" -e "s|@BIND@|$BIND|g" \
		-e "s|@USER@|$user|g" -e "s|@GROUP@|$group|g" \
		"$REPO/nginx/nginx.conf.in" >"$NGX/nginx.conf"
	if [ ! -s "$NGX/cert.pem" ] || [ ! -s "$NGX/key.pem" ]; then
		log "generating a self-signed certificate for localhost"
		(umask 077 && openssl req -x509 -newkey ec \
			-pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
			-subj /CN=localhost \
			-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
			-keyout "$NGX/key.pem" -out "$NGX/cert.pem") \
			>"$LOG/openssl.log" 2>&1 || {
			tail_log "$LOG/openssl.log"
			die "openssl could not make a certificate"
		}
		chmod 0644 "$NGX/cert.pem"
	fi
}

nginx_cmd() {
	nginx -p "$NGX/" -c "$NGX/nginx.conf" -e "$LOG/nginx-error.log" "$@"
}

start_nginx() {
	local p
	render_nginx
	if ! nginx_cmd -t -q 2>"$LOG/nginx-test.log"; then
		cat "$LOG/nginx-test.log" >&2
		die "nginx rejected $NGX/nginx.conf"
	fi
	p=$(read_pidfile "$RUN/nginx.pid")
	if pid_alive "$p"; then
		nginx_cmd -s reload
		return 0
	fi
	nginx_cmd || {
		tail_log "$LOG/nginx-error.log"
		die "nginx did not start (ports $HTTP_PORT/$HTTPS_PORT in use?)"
	}
}

stop_nginx() {
	local p kids
	p=$(read_pidfile "$RUN/nginx.pid")
	pid_alive "$p" || {
		rm -f "$RUN/nginx.pid"
		return 0
	}
	# Workers are collected first so none survives a master that has to
	# be killed.
	kids=$(pgrep -P "$p" 2>/dev/null || true)
	# shellcheck disable=SC2086
	stop_pids 10 "$p" $kids
	rm -f "$RUN/nginx.pid"
}

stop_shims() {
	local f pids
	pids=$(
		{
			for f in "$RUN"/sbx/*.pid; do
				[ -e "$f" ] || continue
				read_pidfile "$f"
			done
			find_pids airlock-shim
		} | sort -un | while read -r p; do
			# A stale pid file may name a recycled pid: only
			# shims of this state directory are signalled.
			find_pids_check "$p" airlock-shim && echo "$p"
		done
	)
	if [ -n "$pids" ]; then
		log "stopping $(echo "$pids" | wc -w) sandbox shim(s)"
		# shellcheck disable=SC2086
		stop_pids 10 $pids
	fi
}

find_pids_check() {
	local exe
	exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
	exe=${exe% (deleted)}
	[ "${exe##*/}" = "$2" ] || return 1
	tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null |
		grep -qxF "AIRLOCK_STATE=$STATE"
}

health_url() {
	local host=$BIND
	case "$host" in 0.0.0.0 | ::) host=127.0.0.1 ;; esac
	case "$host" in *:*) host="[$host]" ;; esac
	echo "http://$host:$HTTP_PORT/v1/health"
}

wait_health() {
	local url i
	url=$(health_url)
	for ((i = 0; i < 200; i++)); do
		if curl -fsS -m 2 -o /dev/null "$url" 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	log "GET $url did not answer within 20 s"
	tail_log "$LOG/nginx-error.log" "$LOG/fcgi.log" "$LOG/controller.log"
	return 1
}

# The controller's first fill of spare snapshots and network slots
# (run/controller.ready): a burst right after `up` finds them instead of
# making its own. A few seconds on a fresh pool; not waited for past 30 s.
wait_pools() {
	local i
	for ((i = 0; i < 300; i++)); do
		[ -e "$RUN/controller.ready" ] && return 0
		pid_alive "$(read_pidfile "$RUN/controller.pid")" || break
		sleep 0.1
	done
	log "the controller's spare snapshots and network slots are not all ready yet (see $LOG/controller.log)"
}

print_banner() {
	local host=$BIND
	case "$host" in 0.0.0.0 | ::) host=127.0.0.1 ;; esac
	local base="http://$host:$HTTP_PORT"
	cat <<EOF

Airlock is up (state: $STATE).
  API:      $base/v1
  API/TLS:  https://$host:$HTTPS_PORT/v1  (self-signed: curl --cacert $NGX/cert.pem)
  API key:  $STATE/api-key
  Logs:     $LOG/
EOF
	if [ "${FIRST_KEY:-0}" -eq 1 ]; then
		printf '  New admin API key (shown once; kept in the file above): %s\n' \
			"$(cat "$STATE/api-key")"
	fi
	cat <<EOF

Try it:
  KEY=\$(cat $STATE/api-key)
  ID=\$(curl -s -H "Authorization: Bearer \$KEY" -d '{"template":"minimal"}' \\
        $base/v1/sandboxes | sed -n 's/.*"id": *"\([a-z0-9-]*\)".*/\1/p')
  curl -s -H "Authorization: Bearer \$KEY" -H 'Accept: application/json' \\
       -d '{"cmd":["sh","-c","echo hello from \$(hostname)"]}' $base/v1/sandboxes/\$ID/exec
  curl -N -H "Authorization: Bearer \$KEY" -H 'Accept: text/event-stream' \\
       -d '{"cmd":["sh","-c","for i in 1 2 3; do echo \$i; sleep 1; done"]}' \\
       $base/v1/sandboxes/\$ID/exec
  curl -s -X DELETE -H "Authorization: Bearer \$KEY" $base/v1/sandboxes/\$ID

EOF
}

# ---------------------------------------------------------------- verbs

do_up() {
	check_env
	for b in airlock-fcgi airlock-shim airlock-controller airlock-agent \
		airlock-builder; do
		need_binary "$b"
	done
	make_dirs
	# Each gateway runs as its own uid and execs its program, then reads
	# the operator's policies, by path.
	ensure_traverse nobody "$BUILD" "${AIRLOCK_POLICIES:-$REPO/policies}"
	start_pg
	start_pool
	ensure_vm_kernel
	init_controller
	ensure_template
	start_fcgi
	start_nginx
	start_controller
	if ! wait_health; then
		die "the stack did not come up; stop it with: scripts/stack.sh down"
	fi
	wait_pools
	print_banner
}

do_down() {
	if [ ! -d "$STATE" ]; then
		return 0
	fi
	[ "$(id -u)" -eq 0 ] || die "run as root"
	stop_controller
	stop_nginx
	stop_fcgi
	stop_shims
	kill_jail_leftovers
	remove_net_slots
	stop_pg
	unmount_run
	stop_pool
}

do_status() {
	local p name rc=0
	printf 'state:      %s\n' "$STATE"
	if pg_running; then
		printf 'postgres:   running (socket %s)\n' "$PGSOCK"
	else
		printf 'postgres:   stopped\n'
		rc=1
	fi
	if mountpoint -q "$POOL" 2>/dev/null ||
		[ "$(stat -f -c %T "$POOL" 2>/dev/null)" = btrfs ]; then
		printf 'pool:       %s (btrfs)\n' "$POOL"
	else
		printf 'pool:       not mounted\n'
		rc=1
	fi
	for name in fcgi controller; do
		p=$(component_pids "airlock-$name" "$RUN/$name.pid" | tr '\n' ' ')
		if [ -n "$p" ]; then
			printf '%-11s running (pid %s)\n' "$name:" "${p% }"
		else
			printf '%-11s stopped\n' "$name:"
			rc=1
		fi
	done
	p=$(read_pidfile "$RUN/nginx.pid")
	if pid_alive "$p"; then
		printf 'nginx:      running (pid %s, http %s, https %s)\n' \
			"$p" "$HTTP_PORT" "$HTTPS_PORT"
	else
		printf 'nginx:      stopped\n'
		rc=1
	fi
	p=$(find_pids airlock-shim | wc -l)
	printf 'sandboxes:  %s shim(s)\n' "$p"
	if pid_alive "$(read_pidfile "$RUN/nginx.pid")" &&
		curl -fsS -m 2 -o /dev/null "$(health_url)" 2>/dev/null; then
		printf 'health:     ok\n'
	else
		printf 'health:     no answer\n'
		rc=1
	fi
	return $rc
}

# Ctrl-C on `make run | tee run.log` ends tee as well: the stop must not
# die of a write to its pipe. SIGPIPE is ignored for the whole run (a
# write then fails with EPIPE instead); the stop's stdout goes to the
# log directory, and so does stderr once it is found closed.
stop_run() {
	trap '' INT TERM PIPE
	printf '\n' 2>/dev/null || true
	exec >>"$LOG/stack-stop.log"
	printf 'airlock: stopping\n' >&2 2>/dev/null ||
		exec 2>>"$LOG/stack-stop.log"
	# The loop's sleep, when only this script was signalled (SIGTERM).
	[ -z "${RUN_SLEEP:-}" ] || kill "$RUN_SLEEP" 2>/dev/null || true
	do_down
	log "stopped"
	exit 0
}

do_run() {
	trap '' PIPE
	trap stop_run INT TERM
	if ! do_up; then
		do_down
		exit 1
	fi
	echo "Running in the foreground; Ctrl-C stops everything."
	while :; do
		# A script's background job ignores SIGINT; this one must
		# end with the rest of the group on Ctrl-C.
		(
			trap - INT
			exec sleep 3600
		) &
		RUN_SLEEP=$!
		wait "$RUN_SLEEP" || true
	done
}

component() {
	local verb=$1 what=${2:-}
	case "$what" in
	pg | pool | fcgi | nginx | controller) ;;
	*) die "usage: $0 $verb pg|pool|fcgi|nginx|controller" ;;
	esac
	check_env
	make_dirs
	case "$verb" in
	stop | restart) "stop_$what" ;;
	esac
	case "$verb" in
	start | restart) "start_$what" ;;
	esac
}

case "${1:-}" in
up) do_up ;;
down) do_down ;;
run) do_run ;;
status) do_status ;;
start | stop | restart) component "$1" "${2:-}" ;;
*)
	echo "usage: $0 run|up|down|status|start|stop|restart [component]" >&2
	exit 2
	;;
esac
