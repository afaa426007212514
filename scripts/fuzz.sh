#!/usr/bin/env bash
# Runs one fuzz target: scripts/fuzz.sh <package> <target> <budget>
#
# The budget is a -fuzztime: an execution count (`50000x`, what `make test-fuzz`
# uses) or a duration (`30s`). Go's fuzz coordinator (go1.26 and earlier,
# go.dev/issue/75804) can fail a duration run right at its end with a bare
# `context deadline exceeded`: the -fuzztime deadline leaks past the check that is
# meant to treat it as a normal stop. A count budget never sets that deadline.
# For a duration budget, a failure whose only message is that error, with no
# failing input written to testdata/fuzz/<target>/, is the engine's and is run
# once more; every other failure (a failing input, a panic, a -timeout) fails.
set -uo pipefail
pkg=$1 name=$2 budget=$3
go=${GO:-go}
corpus="$pkg/testdata/fuzz/$name"

run() {
	local before after out rc
	before=$(ls "$corpus" 2>/dev/null | sort)
	out=$(mktemp)
	# -timeout only guards against a hang: it is far above any budget's wall time.
	"$go" test -run '^$' -fuzz "^$name\$" -fuzztime "$budget" -timeout 15m "$pkg" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	after=$(ls "$corpus" 2>/dev/null | sort)
	if [ "$rc" -eq 0 ]; then rm -f "$out"; return 0; fi
	if [[ "$budget" != *x ]] && [ "$before" = "$after" ] && ! grep -q 'Failing input written to' "$out" &&
		[ "$(grep -A1 -- "^--- FAIL: $name " "$out" | tail -n1 | sed 's/^[[:space:]]*//')" = "context deadline exceeded" ]; then
		rm -f "$out"
		return 75 # the engine's own deadline, not a finding
	fi
	rm -f "$out"
	return 1
}

run
rc=$?
if [ "$rc" -eq 75 ]; then
	echo "fuzz $name: the fuzz engine's own 'context deadline exceeded' at the end of -fuzztime $budget"
	echo "fuzz $name: (go.dev/issue/75804; no failing input was written) — running it once more"
	run
	rc=$?
fi
[ "$rc" -eq 0 ] || { echo "fuzz $name ($pkg) FAILED"; exit 1; }
