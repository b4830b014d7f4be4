#!/usr/bin/env bash
# Prints the folder holding golangci-lint (make lint) and promtool (the
# monitoring rules' checks), building whichever is missing first, from the Go
# module proxy through the modules under hack/tools, into the cache that
# hack/lib.sh describes.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

open_cache "checks-golangci-lint-$(version github.com/golangci/golangci-lint/v2 golangci-lint)-prometheus-$(version github.com/prometheus/prometheus prometheus)" golangci-lint prometheus
build golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint golangci-lint
# Without Prometheus's service discoveries (AWS, Azure, GCE, Kubernetes...):
# the rules' checks and unit tests use none, and they are 247 of its 1364
# packages, the cloud SDKs among them, the largest.
build prometheus github.com/prometheus/prometheus/cmd/promtool promtool -tags remove_all_sd
echo "$dir"
