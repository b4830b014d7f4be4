#!/usr/bin/env bash
# side-by-side.sh NAME COMMAND [NAME COMMAND...]: runs every COMMAND (a line
# for bash) at once, each line of its output prefixed with [NAME], waits for
# them all, and fails naming those that failed. make test and make e2e run
# so what waits more than it computes (hack/e2e.sh says which, and why).
set -uo pipefail
[ $# -gt 0 ] && [ $(($# % 2)) -eq 0 ] || { echo "usage: $0 NAME COMMAND [NAME COMMAND...]" >&2; exit 2; }

pids=() names=()
while [ $# -gt 0 ]; do
	(bash -c "$2" 2>&1 | sed -u "s/^/[$1] /") &
	pids+=($!) names+=("$1")
	shift 2
done
failed=()
for i in "${!pids[@]}"; do
	wait "${pids[i]}" || failed+=("${names[i]}")
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "failed: ${failed[*]}" >&2
	exit 1
fi
