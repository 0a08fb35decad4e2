#!/usr/bin/env bash
# Install the Debian packages Airlock needs. Idempotent and silent when
# everything is already there: dpkg-query first, apt only for what is missing.
set -euo pipefail

PKGS=(
	gcc make clang clang-format curl openssl
	libfcgi-dev nginx-light postgresql libpq-dev libjson-c-dev
	libnftnl-dev libmnl-dev libbtrfsutil-dev btrfs-progs libssl-dev
	libluajit-5.1-dev libcmocka-dev libseccomp-dev libcap-dev
	libevent-dev libcurl4-openssl-dev busybox-static e2fsprogs libarchive-dev
	nftables bubblewrap crun python3-pytest python3-requests debootstrap
	qemu-system-x86 squid-openssl
)

missing=()
for p in "${PKGS[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	case "$st" in
	ii*) ;;
	*) missing+=("$p") ;;
	esac
done

[ "${#missing[@]}" -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
SUDO=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || {
		echo "deps: need root (or sudo) to install: ${missing[*]}" >&2
		exit 1
	}
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The postgresql package starts a system cluster on 5432; Airlock runs its
# own private cluster on a unix socket and does not need it.
