#!/usr/bin/env bash
# Builds every binary that make test takes from the cache that hack/lib.sh
# describes: etcd and the Kubernetes binaries first, then golangci-lint and
# promtool, Helm, and the real node's where one can run, side by side. Each of
# those scripts still builds alone whatever it lacks when called, and its lock
# makes a second caller wait: this only orders them on a fresh machine.
#
# The tools modules build their shared dependencies at the same versions
# (hack/tools-aligned.sh), so Go's build cache compiles each shared package
# once; but two go builds running at once each compile what neither has cached
# yet. Kubernetes' build compiles most of what the others share (client-go,
# gRPC, protobuf, x/sys...) on both cores, so it goes first, alone; the rest
# then find those in the cache, and run side by side, so that each one's
# single-threaded link leaves no core idle. With everything built, this returns
# in a second.
set -euo pipefail
cd "$(dirname "$0")"

# Empty where a real node can run: its Debian packages install meanwhile.
node=$(./cluster.sh node-support)
[ -n "$node" ] || { ./debian-packages.sh node & apt=$!; }
./k8s-binaries.sh >/dev/null
pids=()
failed=0
./check-tools.sh >/dev/null &
pids+=($!)
./helm.sh >/dev/null &
pids+=($!)
if [ -z "$node" ]; then
	if wait "$apt"; then
		./node-binaries.sh >/dev/null &
		pids+=($!)
	else
		failed=1
	fi
fi
for pid in "${pids[@]}"; do
	wait "$pid" || failed=1
done
exit "$failed"
