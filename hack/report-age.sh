#!/usr/bin/env bash
# How old the committed reports are, against the product: the operator's code
# (not its tests), its module, its image and its manifests.
#
# RELIABILITY.md must describe the head: make test fails when a product file
# changed after the commit it ran on ("ran on commit ..."), unless every commit
# since that touched the product says in its message why the report still
# holds, in a trailer line of its own:
#
#   Reliability-Holds: only the log line's wording changed; no write, read or wait moved
#
# Otherwise run make chaos (about an hour) and commit what it wrote. The rule
# costs a line per commit that can show the report holds, and an hour of
# machine for one that cannot.
#
# BENCHMARKS.md (make bench, about 90 minutes) gets a notice only: a figure
# moved by a change is stale, not wrong about what the operator does.
set -euo pipefail
cd "$(dirname "$0")/.."
product=(':(glob)*.go' ':(exclude,glob)*_test.go' go.mod go.sum Dockerfile manifiestos)
failed=0

# commits REPORT: the commits a report says it ran on. A report that joins
# runs (BENCH_SECTIONS) names each as "(seed N, commit X)".
commits() {
	{ grep -oE '(ran on commit|seed [0-9]+, commit) [0-9a-f]{7,40}' "$1" || true; } | awk '!seen[$NF]++ { print $NF }'
}

# RELIABILITY.md: a failure unless it holds.
report=RELIABILITY.md
commit=$(commits "$report" | head -n 1)
if [ -z "$commit" ]; then
	echo "error: $report does not say which commit it ran on: run make chaos"
	failed=1
elif [ "$(git rev-parse --is-shallow-repository)" = true ] && ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
	echo "notice: $report ran on commit $commit, older than this shallow clone's history: not judged here"
elif ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
	echo "error: $report ran on commit $commit, which is not in this repository's history: run make chaos"
	failed=1
else
	unexplained=()
	for c in $(git rev-list "$commit..HEAD" -- "${product[@]}"); do
		why=$(git log -1 --format='%(trailers:key=Reliability-Holds,valueonly,separator=%x20)' "$c")
		if [ -z "${why//[[:space:]]/}" ]; then
			unexplained+=("$(git log -1 --format='%h %s' "$c" | cut -c1-100)")
		fi
	done
	if [ "${#unexplained[@]}" -gt 0 ]; then
		echo "error: $report ran on commit $commit; these commits changed the product since, without saying why the report still holds:"
		printf '  %s\n' "${unexplained[@]}"
		echo "Run make chaos and commit RELIABILITY.md, or give each commit a line 'Reliability-Holds: <why>' (hack/report-age.sh)."
		failed=1
	else
		echo "$report ran on commit $commit; every product change since says why it still holds"
	fi
fi
if [ -n "$(git status --porcelain -- "${product[@]}")" ]; then
	echo "notice: the product has uncommitted changes: their commit must say why $report still holds (Reliability-Holds:), or make chaos must run"
fi

# BENCHMARKS.md: a notice.
report=BENCHMARKS.md
ran="ran"
if [ "$(commits "$report" | wc -l)" -gt 1 ]; then
	ran="ran in part"
fi
for commit in $(commits "$report"); do
	if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
		echo "notice: $report $ran on commit $commit, which this clone does not have"
	elif changed=$(git diff --name-only "$commit" HEAD -- "${product[@]}") && [ -n "$changed" ]; then
		echo "notice: $report $ran on commit $commit; the product changed since, in:" $changed
	else
		echo "$report $ran on commit $commit; the product has not changed since"
	fi
done
exit "$failed"
