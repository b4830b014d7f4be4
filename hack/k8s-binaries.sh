#!/usr/bin/env bash
# Prints the folder holding etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl and kwok, building whichever are missing first.
#
# Nothing is downloaded but Go modules: each binary is built from the Go module
# proxy by the small modules under hack/tools. The folder lives outside the
# checkout, keyed by the versions pinned in those modules, so every clone on a
# machine shares one build. Set OPERADOR_CACHE to move it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tools=$here/tools
cache=${OPERADOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/operador-promociones}

version() { # module path, tools module -> pinned version
	(cd "$tools/$2" && go list -m -f '{{.Version}}' "$1")
}
k8s=$(version k8s.io/kubernetes kubernetes)
etcd=$(version go.etcd.io/etcd/server/v3 etcd)
kwok=$(version sigs.k8s.io/kwok kwok)
dir=$cache/bin/k8s-$k8s-etcd-$etcd-kwok-$kwok
mkdir -p "$dir"
# One build at a time per folder: a second caller waits, then finds the binaries.
exec 9>"$dir/.lock"
flock 9

build() { # tools module, package, binary name
	[ -x "$dir/$3" ] && return 0
	echo "building $3 into $dir (the first build takes minutes; later runs reuse it)" >&2
	# Build to a temporary name and rename, so an interrupted build never
	# leaves a half-written binary that a later run would trust.
	(cd "$tools/$1" && CGO_ENABLED=0 go build -trimpath -o "$dir/.$3.tmp" "$2")
	mv "$dir/.$3.tmp" "$dir/$3"
}

build etcd go.etcd.io/etcd/server/v3 etcd
build kubernetes k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver
build kubernetes k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager
build kubernetes k8s.io/kubernetes/cmd/kube-scheduler kube-scheduler
build kubernetes k8s.io/kubernetes/cmd/kubectl kubectl
build kwok sigs.k8s.io/kwok/cmd/kwok kwok

echo "$dir"
