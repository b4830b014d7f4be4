#!/usr/bin/env bash
# Installs with apt-get the Debian packages that Go cannot build, when one is
# missing. It needs root only then.
#
#   hack/debian-packages.sh node   what the real node needs: iptables (kube-proxy,
#                                  the kubelet and the CNI bridge program its
#                                  netfilter), libseccomp-dev and pkg-config (runc
#                                  is built with seccomp)
#   hack/debian-packages.sh podman   the image's tests load its tarball with podman
#   hack/debian-packages.sh chromium the lesson's end-to-end tests see the page in a
#                                    real browser
set -euo pipefail

need=()
for group in "$@"; do
	case $group in
	node)
		command -v iptables >/dev/null || need+=(iptables)
		[ -f /usr/include/seccomp.h ] || need+=(libseccomp-dev)
		command -v pkg-config >/dev/null || need+=(pkg-config)
		;;
	podman) command -v podman >/dev/null || need+=(podman) ;;
	chromium) command -v chromium >/dev/null || need+=(chromium) ;;
	*) echo "usage: $0 node|podman|chromium..." >&2; exit 2 ;;
	esac
done
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "missing Debian packages: ${need[*]}; as root: apt-get install ${need[*]}" >&2
	exit 1
fi
echo "installing Debian packages: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have no package lists, or stale ones: update and try once more.
apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
	{ apt-get update >/dev/null && apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; } ||
	{ echo "apt-get install ${need[*]} failed" >&2; exit 1; }
