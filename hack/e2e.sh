#!/usr/bin/env bash
# make e2e: the end-to-end suites, each on a cluster of its own
# (e2e/framework), with GO (default go) running their tests.
#
# The lesson's suite runs first, with no other suite beside it: its real nodes
# change the machine's network links, mounts and firewall rules, and every
# suite checks at its end that the machine is as it found it. Then the chaos
# suite and the benchmarks' short run, side by side: on kwok's nodes alone,
# neither changes anything on the machine but its own cluster's folder and
# processes (which each suite's check tells apart by that folder), and each
# waits on its cluster more than it computes, so that on two cores the pair
# takes little more than the chaos suite alone (docs/testing.md has the
# figures). Every suite runs whatever another's result; this fails if any
# failed.
set -uo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}

suite() { echo "$go test -count=1 -timeout 30m -v ./e2e/$1/"; }

failed=()
bash -c "$(suite lesson)" || failed+=(lesson)
hack/side-by-side.sh chaos "$(suite chaos)" bench "$(suite bench)" || failed+=(chaos/bench)

if [ ${#failed[@]} -gt 0 ]; then
	echo "e2e: failed: ${failed[*]}" >&2
	exit 1
fi
