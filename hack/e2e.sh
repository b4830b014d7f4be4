#!/usr/bin/env bash
# make e2e: the end-to-end suites, each on a cluster of its own
# (e2e/framework), with GO (default go) running their tests.
#
# The lesson's suite runs first and alone: its real nodes change the machine's
# network links, mounts and firewall rules, and every suite checks at its end
# that the machine is as it found it, so nothing may run beside it. Then the
# chaos suite and the benchmarks' short run, side by side: on kwok's nodes
# alone, neither changes anything on the machine but its own cluster's folder
# and processes (which each suite's check tells apart by that folder), and each
# waits on its cluster more than it computes, so that on two cores the pair
# takes little more than the chaos suite alone (docs/testing.md has the
# figures). Their lines are prefixed with the suite's name; every suite runs
# whatever another's result, and the script fails if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}

suite() { "$go" test -count=1 -timeout 30m -v "./e2e/$1/"; }

failed=()
suite lesson || failed+=(lesson)

pids=() names=()
for name in chaos bench; do
	(suite "$name" 2>&1 | sed -u "s/^/[$name] /") &
	pids+=($!) names+=("$name")
done
for i in "${!pids[@]}"; do
	wait "${pids[i]}" || failed+=("${names[i]}")
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "e2e: failed: ${failed[*]}" >&2
	exit 1
fi
