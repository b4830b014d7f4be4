#!/usr/bin/env bash
# Fails if two tools modules under hack/tools build the same dependency at
# different versions. Go's build cache compiles a package once for all the
# tools only where the package and everything below it are alike: on a fresh
# machine each disagreement compiles its packages, and all above them, again
# (k8s.io/client-go and its dependencies for Kubernetes, kwok, Helm, promtool
# and containerd; x/sys, protobuf and gRPC for nearly all). make test runs it.
#
# To align a dependency, raise it in the module that has it lower:
#   go -C hack/tools/MODULE get PATH@VERSION && go -C hack/tools/MODULE mod tidy
# and run this again: a raise can pull others up with it.
set -euo pipefail
cd "$(dirname "$0")"

TOOLS_DEPS=$(mktemp)
export TOOLS_DEPS
trap 'rm -f "$TOOLS_DEPS"' EXIT
# In this mode the build scripts list what their builds compile and build nothing.
for script in check-tools k8s-binaries helm node-binaries; do
	./$script.sh >/dev/null
done

# etcd's server is v3.6 while Kubernetes' clients are v3.7: on purpose
# (hack/tools/etcd/go.mod), and their packages are not the same anyway.
split=$(grep -v '^go\.etcd\.io/etcd/' "$TOOLS_DEPS" | sort -u | awk '{print $1, $2}' | sort -u | awk '{print $1}' | uniq -d)
if [ -n "$split" ]; then
	echo "hack/tools: these dependencies are built at more than one version, so they and all above them compile once per version:" >&2
	for path in $split; do
		awk -v p="$path" '$1 == p {print "  " $1 " " $2 " in hack/tools/" $3}' "$TOOLS_DEPS" | sort -u >&2
	done
	echo "raise the lower ones (go -C hack/tools/MODULE get PATH@VERSION && go -C hack/tools/MODULE mod tidy) and run $0 again" >&2
	exit 1
fi
echo "hack/tools: $(awk '{print $1}' "$TOOLS_DEPS" | sort -u | wc -l) dependencies, each at one version in every tools module"
