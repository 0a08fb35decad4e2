#!/bin/sh
# vm-kernel.sh STATE_DIR [INIT_BIN]
#
# Fetches the guest kernel for the vm driver from Debian's
# linux-image-cloud-amd64 (apt-get download, never installed on the host)
# into STATE_DIR/vm/kernel/:
#
#   vmlinuz          the bzImage QEMU boots (-kernel)
#   version          the image package it came from, e.g.
#                    linux-image-6.1.0-57-cloud-amd64 6.1.192-3
#   modules/*.ko     the virtio modules the guest needs and their
#                    dependencies (ext4, jbd2, crc16, ... are built in)
#   modules.list     module file names in load order (dependencies first)
#
# With INIT_BIN (build/airlock-init) it also writes STATE_DIR/vm/initrd.img:
# an uncompressed newc cpio with /init and /lib/airlock/{*.ko,modules.list},
# rebuilt only when one of its inputs is newer.
#
# Idempotent: nothing is downloaded when the version apt offers is already
# there, and apt is not even asked when its lists are no newer than the
# version file. Prints one line per thing done.
set -eu

usage() {
	echo "usage: $0 STATE_DIR [INIT_BIN]" >&2
	exit 100
}
die() {
	echo "vm-kernel: $*" >&2
	exit 111
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
state=$1
init=${2:-}
meta=linux-image-cloud-amd64
# What the guest init loads. Dependencies are added from each module's
# own .modinfo "depends=" field, so this list names only what we use.
WANT="virtio_mmio virtio_blk virtio_net virtio_console virtio-rng"

mkdir -p "$state/vm"
kdir=$state/vm/kernel

lists=/var/lib/apt/lists
# Complete: the image, its modules and the version they came from.
kernel_complete() {
	[ -f "$kdir/vmlinuz" ] && [ -f "$kdir/modules.list" ] &&
		[ -s "$kdir/version" ] || return 1
	for m in $(cat "$kdir/modules.list"); do
		[ -f "$kdir/modules/$m" ] || return 1
	done
}
# apt's answer can only change when its lists do: a lists dir with
# nothing newer than our version file means apt would offer that version.
lists_unchanged() {
	[ -d "$lists" ] && [ -z "$(find "$lists" -maxdepth 1 \
		-newer "$kdir/version" 2>/dev/null | head -n 1)" ]
}
# "IMAGE VERSION": the image package the meta package points at, as apt
# sees it now (one apt-cache call for both fields).
apt_offer() {
	apt-cache show --no-all-versions "$meta" 2>/dev/null | awk '
		/^Depends:/ && img == "" {
			if (match($0, /linux-image-[^ ,]*/))
				img = substr($0, RSTART, RLENGTH)
		}
		/^Version:/ && ver == "" { ver = $2 }
		END { if (img != "") print img, ver }'
}
# Downloads image package $img into $kdir (replacing what is there).
fetch_kernel() {
	tmp=$(mktemp -d "$state/vm/.kernel.tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root \
		"$img" >/dev/null 2>&1) || die "apt-get download $img failed"
	deb=$(ls "$tmp"/*.deb 2>/dev/null | head -n 1)
	[ -n "$deb" ] || die "apt-get download $img produced no .deb"
	dpkg-deb -x "$deb" "$tmp/x"
	vmlinuz=$(ls "$tmp"/x/boot/vmlinuz-* 2>/dev/null | head -n 1)
	[ -n "$vmlinuz" ] || die "$img has no /boot/vmlinuz-*"
	kver=${vmlinuz##*/vmlinuz-}
	kroot=$tmp/x/lib/modules/$kver/kernel
	[ -d "$kroot" ] || die "$img has no modules for $kver"

	out=$tmp/kernel
	mkdir -p "$out/modules"
	cp "$vmlinuz" "$out/vmlinuz"

	# Depth-first over "depends=": a module is appended after all of
	# its dependencies, so the list is a valid load order.
	find "$kroot" -name '*.ko' >"$tmp/all"
	: >"$out/modules.list"
	add() {
		# dash and bash both scope these; the recursion needs it.
		local name alt ko deps d base
		name=$1
		grep -qx "$name.ko" "$out/modules.list" && return 0
		# Module names use '_' where file names may use '-'.
		alt=$(echo "$name" | tr '_-' '-_')
		ko=$(grep -E "/($name|$alt)\.ko\$" "$tmp/all" | head -n 1)
		[ -n "$ko" ] || die "module $name not in $img"
		deps=$(objcopy -O binary --only-section=.modinfo "$ko" \
			/dev/stdout 2>/dev/null | tr '\0' '\n' |
			sed -n 's/^depends=//p' | tr ',' ' ')
		for d in $deps; do
			add "$d"
		done
		base=${ko##*/}
		grep -qx "$base" "$out/modules.list" && return 0
		cp "$ko" "$out/modules/$base"
		echo "$base" >>"$out/modules.list"
	}
	for m in $WANT; do
		add "$m"
	done
	echo "$img $ver" >"$out/version"

	rm -rf "$kdir.old"
	[ -e "$kdir" ] && mv "$kdir" "$kdir.old"
	mv "$out" "$kdir"
	rm -rf "$kdir.old"
	echo "vm kernel: $img $ver ($kver), modules:" \
		$(cat "$kdir/modules.list")
}

if kernel_complete && lists_unchanged; then
	echo "vm kernel: up to date ($(cat "$kdir/version"), apt lists unchanged)"
else
	offer=$(apt_offer)
	if [ -z "$offer" ]; then
		# apt lists may be missing on a fresh machine.
		apt-get update -qq >/dev/null 2>&1 || true
		offer=$(apt_offer)
	fi
	[ -n "$offer" ] || die "apt does not offer $meta (apt-get update?)"
	img=${offer%% *}
	ver=${offer#* }
	if kernel_complete && [ "$(cat "$kdir/version")" = "$offer" ]; then
		# Now newer than the lists: the next run need not ask apt.
		touch "$kdir/version"
		echo "vm kernel: up to date ($offer)"
	else
		fetch_kernel
	fi
fi

[ -n "$init" ] || exit 0
[ -f "$init" ] && [ -x "$init" ] || die "init $init is not an executable"
initrd=$state/vm/initrd.img
if [ -f "$initrd" ] && [ "$initrd" -nt "$init" ] &&
	[ "$initrd" -nt "$kdir/modules.list" ]; then
	echo "vm initrd: up to date ($initrd)"
	exit 0
fi
# newc cpio written directly: the cpio tool is not a dependency.
python3 - "$initrd.tmp" "$init" "$kdir" <<'EOF'
import os, sys
out, init, kdir = sys.argv[1:4]
entries = [("lib", None, 0o040755), ("lib/airlock", None, 0o040755),
           ("dev", None, 0o040755), ("proc", None, 0o040755),
           ("sys", None, 0o040755), ("root", None, 0o040755),
           ("init", init, 0o100755)]
names = open(os.path.join(kdir, "modules.list")).read().split()
for n in names:
    entries.append(("lib/airlock/" + n, os.path.join(kdir, "modules", n),
                    0o100644))
entries.append(("lib/airlock/modules.list",
                os.path.join(kdir, "modules.list"), 0o100644))
with open(out, "wb") as f:
    def put(name, data, mode, ino):
        nb = name.encode() + b"\0"
        hdr = "070701" + "".join("%08X" % v for v in (
            ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0))
        f.write(hdr.encode() + nb)
        f.write(b"\0" * ((4 - (110 + len(nb)) % 4) % 4))
        f.write(data)
        f.write(b"\0" * ((4 - len(data) % 4) % 4))
    for i, (name, src, mode) in enumerate(entries, 1):
        data = open(src, "rb").read() if src else b""
        put(name, data, mode, i)
    put("TRAILER!!!", b"", 0, 0)
EOF
mv -f "$initrd.tmp" "$initrd"
echo "vm initrd: $initrd"
