#!/usr/bin/env bash
# Builds, side by side, every binary that make test takes from the cache that
# hack/lib.sh describes: golangci-lint and promtool, etcd and the Kubernetes
# binaries, Helm, and the real node's where one can run. Each of those scripts
# still builds alone whatever it lacks when called, and its lock makes a second
# caller wait: this only starts them together on a fresh machine, where one
# after the other left a core idle through every single-threaded link. With
# everything built, it returns in a second.
set -euo pipefail
cd "$(dirname "$0")"

pids=()
./check-tools.sh >/dev/null &
pids+=($!)
./k8s-binaries.sh >/dev/null &
pids+=($!)
./helm.sh >/dev/null &
pids+=($!)
if [ -z "$(./cluster.sh node-support)" ]; then
	{ ./debian-packages.sh node && ./node-binaries.sh >/dev/null; } &
	pids+=($!)
fi
failed=0
for pid in "${pids[@]}"; do
	wait "$pid" || failed=1
done
exit "$failed"
