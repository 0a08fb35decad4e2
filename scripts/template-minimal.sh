#!/bin/sh
# template-minimal.sh POOL_DIR AGENT_BIN
#
# Builds the `minimal` template, POOL_DIR/templates/minimal: a btrfs
# subvolume with Debian's static busybox (applets as symlinks in /bin),
# airlock-agent at /sbin/airlock-agent and the few files a shell expects.
# Idempotent: an existing template only gets its agent replaced when
# AGENT_BIN differs. The template is built in a temporary subvolume and
# renamed into place, so a half-built template never exists under its name.
# Prints one line on success.
set -eu

usage() {
	echo "usage: $0 POOL_DIR AGENT_BIN" >&2
	exit 100
}
[ $# -eq 2 ] || usage
pool=$1
agent=$2
busybox=/bin/busybox
name=minimal

die() {
	echo "template-minimal: $*" >&2
	exit 111
}

[ -d "$pool" ] || die "pool $pool is not a directory"
[ -f "$agent" ] && [ -x "$agent" ] ||
	die "agent $agent is not an executable file"
[ -x "$busybox" ] || die "$busybox missing (apt-get install busybox-static)"
# Only the static busybox works inside the jail (no libc in the template).
if command -v file >/dev/null 2>&1; then
	file -L "$busybox" | grep -q 'statically linked' ||
		die "$busybox is not statically linked (install busybox-static)"
fi
[ "$(stat -f -c %T "$pool")" = btrfs ] || die "pool $pool is not on btrfs"

mkdir -p "$pool/templates"
dst=$pool/templates/$name

if [ -e "$dst" ]; then
	btrfs subvolume show "$dst" >/dev/null 2>&1 ||
		die "$dst exists but is not a subvolume; remove it"
	if cmp -s "$agent" "$dst/sbin/airlock-agent"; then
		echo "template $name: up to date ($dst)"
		exit 0
	fi
	# Replace by rename: a sandbox snapshotting the template at this
	# moment sees the old agent or the new one, never half of it.
	cp "$agent" "$dst/sbin/.airlock-agent.new"
	chmod 0755 "$dst/sbin/.airlock-agent.new"
	mv -f "$dst/sbin/.airlock-agent.new" "$dst/sbin/airlock-agent"
	echo "template $name: agent updated ($dst)"
	exit 0
fi

# Leftovers of an interrupted build.
for old in "$pool/templates/.$name.tmp."*; do
	[ -e "$old" ] || continue
	btrfs subvolume delete "$old" >/dev/null 2>&1 ||
		die "cannot remove $old"
done

tmp=$pool/templates/.$name.tmp.$$
cleanup() {
	if [ -e "$tmp" ]; then
		btrfs subvolume delete "$tmp" >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT
trap 'exit 111' INT TERM HUP

btrfs subvolume create "$tmp" >/dev/null
chmod 0755 "$tmp"

for d in bin sbin etc proc dev sys root home usr usr/bin usr/sbin var \
	var/tmp tmp; do
	mkdir -p "$tmp/$d"
done
chmod 0700 "$tmp/root"
chmod 1777 "$tmp/tmp" "$tmp/var/tmp"

cp "$busybox" "$tmp/bin/busybox"
chmod 0755 "$tmp/bin/busybox"
# Run the template's own busybox chrooted, so the symlinks point at
# /bin/busybox inside the template and nothing touches the host's /bin.
chroot "$tmp" /bin/busybox --install -s /bin
[ -L "$tmp/bin/sh" ] || ln -s busybox "$tmp/bin/sh"

cp "$agent" "$tmp/sbin/airlock-agent"
chmod 0755 "$tmp/sbin/airlock-agent"

cat >"$tmp/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$tmp/etc/group" <<'EOF'
root:x:0:
tty:x:5:
nogroup:x:65534:
EOF
cat >"$tmp/etc/hosts" <<'EOF'
127.0.0.1	localhost
::1	localhost
EOF
echo sandbox >"$tmp/etc/hostname"
: >"$tmp/etc/resolv.conf"
chmod 0644 "$tmp/etc/passwd" "$tmp/etc/group" "$tmp/etc/hosts" \
	"$tmp/etc/hostname" "$tmp/etc/resolv.conf"

# -T: if another run finished first, fail instead of moving into it.
if ! mv -T "$tmp" "$dst" 2>/dev/null; then
	[ -e "$dst" ] || die "cannot rename $tmp to $dst"
	echo "template $name: created concurrently ($dst)"
	exit 0
fi
trap - EXIT
echo "template $name: created ($dst)"
