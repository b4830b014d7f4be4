#!/usr/bin/env bash
# How old the committed reports are: for RELIABILITY.md and BENCHMARKS.md, the
# commit each ran on (written by the run: "ran on commit ..."), and the
# product's files changed since. A notice for `make test`, never a failure:
# a report is rerun by hand (make chaos, make bench), not on every change.
set -euo pipefail
cd "$(dirname "$0")/.."
# The product: the operator's code (not its tests), its module, its image and its manifests.
product=(':(glob)*.go' ':(exclude,glob)*_test.go' go.mod go.sum Dockerfile manifiestos)
# A report that joins runs (BENCH_SECTIONS) names each run's commit as
# "(seed N, commit X)": each is checked, the oldest part being what the
# header's "ran on commit" alone would hide.
for report in RELIABILITY.md BENCHMARKS.md; do
	commits=$({ grep -oE '(ran on commit|seed [0-9]+, commit) [0-9a-f]{7,40}' "$report" || true; } | awk '!seen[$NF]++ { print $NF }')
	if [ -z "$commits" ]; then
		echo "notice: $report does not say which commit it ran on (it predates that line): its figures may describe older code"
	fi
	ran="ran"
	if [ "$(wc -w <<<"$commits")" -gt 1 ]; then
		ran="ran in part"
	fi
	for commit in $commits; do
		if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
			echo "notice: $report $ran on commit $commit, which this clone does not have"
		elif changed=$(git diff --name-only "$commit" HEAD -- "${product[@]}") && [ -n "$changed" ]; then
			echo "notice: $report $ran on commit $commit; the product changed since, in:" $changed
		else
			echo "$report $ran on commit $commit; the product has not changed since"
		fi
	done
done
