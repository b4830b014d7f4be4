#!/usr/bin/env bash
# Prints the folder holding what the real node of `make cluster` runs beside the
# kubelet (k8s-binaries.sh builds that): containerd, ctr, the runc shim, runc,
# the CNI plugins, and the registry the node pulls from (the CNCF Distribution
# registry, and htpasswd for its credentials), building whichever are missing
# first, from the Go module proxy, with the same cache and locking (hack/lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

open_cache "node-containerd-$(version github.com/containerd/containerd/v2 containerd)-runc-$(version github.com/opencontainers/runc runc)-cni-$(version github.com/containernetworking/plugins cni)-registry-$(version github.com/distribution/distribution/v3 registry)" containerd runc cni registry
build_all containerd -tags 'no_btrfs no_devmapper no_zfs' -- github.com/containerd/containerd/v2/cmd/{containerd,ctr,containerd-shim-runc-v2}
# runc is C as well as Go (its nsenter), and applies seccomp profiles with libseccomp.
if [ -z "${TOOLS_DEPS:-}" ] && [ ! -x "$dir/runc" ]; then "$(dirname "$0")/debian-packages.sh" node >&2; fi
CGO_ENABLED=1 build runc github.com/opencontainers/runc runc -tags seccomp
build_all cni -- github.com/containernetworking/plugins/plugins/{main/bridge,main/loopback,ipam/host-local,meta/portmap}
build registry github.com/distribution/distribution/v3/cmd/registry registry
build registry ./htpasswd htpasswd
echo "$dir"
