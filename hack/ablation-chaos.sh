#!/usr/bin/env bash
# hack/ablation-chaos.sh OUT (make bench-ablation): the chaos half of the
# ablation. For each variant of e2e/framework/ablation.go that takes out a
# mechanism meant to prevent a failure, the chaos scenarios that name that
# failure run (short scale, one seed for all) with the variant as the
# operator (E2E_VARIANT); and first with the operator as it is, which must
# pass them, or a failure of a variant proves nothing. Writes
# OUT/ablation-chaos.json: variant, scenario, whether it failed, and the
# first failure's line. ABLATION_ONLY=key runs that variant alone.
set -uo pipefail
out=$1
cd "$(dirname "$0")/.."
seed=${CHAOS_SEED:-$(date +%s)}
mapfile -t lines < <(go run ./e2e/ablation)
# ABLATION_ONLY=key: that variant alone (to replay one).
if [ -n "${ABLATION_ONLY:-}" ]; then
	mapfile -t lines < <(printf '%s\n' "${lines[@]}" | grep "^$ABLATION_ONLY ")
	[ ${#lines[@]} -gt 0 ] || { echo "ablation-chaos: no variant $ABLATION_ONLY with chaos scenarios" >&2; exit 2; }
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
entries=()
run() { # key pattern: runs the scenarios, appends their outcomes
	local key=$1 pattern=$2 log="$logs/$1.log"
	echo "ablation-chaos: $key: $pattern (CHAOS_SEED=$seed)" >&2
	E2E_VARIANT=${key#ours} CHAOS_SEED=$seed go test -count=1 -timeout 60m -v -run "$pattern" ./e2e/chaos/ >"$log" 2>&1
	local names=${pattern#*^(}
	names=${names%)\$}
	IFS='|' read -ra scenarios <<<"$names"
	for s in "${scenarios[@]}"; do
		local failed=false finding=""
		if grep -q -- "--- FAIL: TestChaos/$s " "$log"; then
			failed=true
			# The first error line of the scenario's test, quoted for JSON.
			finding=$(awk -v s="TestChaos/$s" '$0 ~ "=== RUN +"s"$" {on=1} on && /_test\.go:[0-9]+: [^ ]/ && !/ ok: / && !/=====/ {print; exit}' "$log" |
				sed -e 's/^[[:space:]]*//' -e 's/\\/\\\\/g' -e 's/"/\\"/g' | cut -c1-300)
		elif ! grep -q -- "--- PASS: TestChaos/$s " "$log"; then
			echo "ablation-chaos: $key: scenario $s did not run; its log:" >&2
			tail -30 "$log" >&2
			exit 1
		fi
		entries+=("{\"variant\": \"$key\", \"scenario\": \"$s\", \"failed\": $failed, \"finding\": \"$finding\"}")
		echo "ablation-chaos: $key, $s: failed=$failed $finding" >&2
	done
}
all=()
for line in "${lines[@]}"; do all+=("${line#* }"); done
# The operator as it is, on every scenario any variant runs.
union=$(printf '%s\n' "${all[@]}" | sed -e 's/^TestChaos\/^(//' -e 's/)\$$//' | tr '|' '\n' | sort -u | paste -sd'|' -)
run ours "TestChaos/^($union)\$"
if grep -q '"variant": "ours"[^}]*"failed": true' <<<"${entries[*]}"; then
	echo "ablation-chaos: the operator as it is fails these scenarios: a variant's failure would prove nothing" >&2
	exit 1
fi
for line in "${lines[@]}"; do run "${line%% *}" "${line#* }"; done
mkdir -p "$out"
{ echo "["; printf '  %s,\n' "${entries[@]}" | sed '$ s/,$//'; echo "]"; } >"$out/ablation-chaos.json"
echo "ablation-chaos: $out/ablation-chaos.json" >&2
