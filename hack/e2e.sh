#!/usr/bin/env bash
# make e2e: the end-to-end suites, each on a cluster of its own
# (e2e/framework), with GO (default go) running their tests.
#
# The lesson's suite runs first, with no other suite beside it: its real nodes
# change the machine's network links, mounts and firewall rules, and every
# suite checks at its end that the machine is as it found it. Then three
# side by side, each on a cluster of its own: the chaos suite's scenarios,
# its mutants and mutant-scenario pairs (the same suite, on a second cluster:
# E2E_PORT), and the benchmarks' short run. On kwok's nodes alone, none
# changes anything on the machine but its own cluster's folder and processes
# (which each suite's check tells apart by that folder), and each waits on
# its cluster more than it computes, so that on two cores the three take
# little more than the longest alone (docs/testing.md has the figures).
# Every suite runs whatever another's result; this fails if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}

suite() { echo "$go test -count=1 -timeout 30m -v ./e2e/$1/"; }
mutants='TestMutants$|TestMutantPairs$'

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=() why=()
bash -c "$(suite lesson)" 2>&1 | tee "$logs/lesson"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed+=(lesson) why+=("$logs/lesson")
hack/side-by-side.sh chaos "$(suite chaos) -skip '$mutants'" mutants "E2E_PORT=17943 $(suite chaos) -run '$mutants'" \
	bench "$(suite bench)" 2>&1 | tee "$logs/kwok"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed+=(chaos/mutants/bench) why+=("$logs/kwok")

if [ ${#failed[@]} -gt 0 ]; then
	# Whoever reads only the end of the output (CI, whose excerpt is a few
	# kilobytes) learns why here, in a few short lines per suite: a suite
	# that could not start says so on a line of its own (e2e: or panic:),
	# and each test that failed is named after its last messages. A test's
	# error is a line "file.go:N: message"; its steps and progress lines
	# ("===== Step", "    ok: ...") and the dumps made on failure ("-----")
	# are told apart by how their message starts, and only the steps of them
	# are kept, to say where the test was.
	echo "e2e: why, from the output of each suite that failed:" >&2
	for f in "${why[@]}"; do {
		grep -h -E -A4 '^(\[[a-z/]+\] )?(e2e|panic): ' "$f"
		awk '
			# One buffer per suite: the side-by-side suites interleave their lines.
			{ p = match($0, /^\[[a-z\/]+\] /) ? substr($0, 1, RLENGTH) : "" }
			# Not why: the failures that a mutant run must have, recorded, and
			# the dumps of operators that a failure leaves.
			/its queue and workers now:$/ { next }
			/^(\[[a-z\/]+\] )?[ \t]+[A-Za-z0-9_]+\.go:[0-9]+: ([^ =(-]|===== Step)/ {
				last[p, n[p]++ % 6] = substr($0, 1, 200)
			}
			/--- FAIL/ {
				for (i = (n[p] > 6 ? n[p] - 6 : 0); i < n[p]; i++) print last[p, i % 6]
				print; n[p] = 0
			}
			/--- (PASS|SKIP)/ { n[p] = 0 }' "$f"
	} | tail -n 8 >&2
		# The chaos suite's seed, which replays its random choices.
		grep -h -o -E 'random seed [0-9]+ \(CHAOS_SEED=[0-9]+ replays it\)' "$f" | head -1 >&2
	done
	echo "e2e: failed: ${failed[*]}" >&2
	exit 1
fi
