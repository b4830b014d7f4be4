#!/usr/bin/env bash
# Prints the folder holding etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok, and the real node's kubelet and kube-proxy,
# building whichever are missing first.
#
# Nothing is downloaded but Go modules: each binary is built from the Go module
# proxy by the small modules under hack/tools. The folder lives outside the
# checkout, keyed by the versions pinned in those modules (hack/lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

open_cache "k8s-$(version k8s.io/kubernetes kubernetes)-etcd-$(version go.etcd.io/etcd/server/v3 etcd)-kwok-$(version sigs.k8s.io/kwok kwok)" kubernetes etcd kwok
build etcd go.etcd.io/etcd/server/v3 etcd
build_all kubernetes -- k8s.io/kubernetes/cmd/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl,kubelet,kube-proxy}
build kwok sigs.k8s.io/kwok/cmd/kwok kwok
echo "$dir"
