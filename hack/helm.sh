#!/usr/bin/env bash
# Prints the path of Helm v4 (the chart's lint, template, install, test and
# push), building it first if it is missing, from the Go module proxy through
# hack/tools/helm, into the cache that hack/lib.sh describes.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

open_cache "helm-$(version helm.sh/helm/v4 helm)" helm
build helm helm.sh/helm/v4/cmd/helm helm
echo "$dir/helm"
