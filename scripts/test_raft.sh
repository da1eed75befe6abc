#!/usr/bin/env bash
# hashicorp/raft's own test suite on the patched copy sluice builds with
# (third_party/hashicorp-raft/PATCHES.md). A few of its cluster tests flake
# on a small busy machine with or without the patch: their helpers poll
# with fixed timeouts ("peer mismatch", a gauge not yet emitted). A test
# that fails is run again alone, up to twice; one that fails all three
# times fails the check. TestFileSS_BadPerm is skipped: as root, a
# directory's permissions refuse nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
out=$("$GO" test -count=1 -timeout 15m -skip '^TestFileSS_BadPerm$' github.com/hashicorp/raft 2>&1)
rc=$?
if [ $rc -eq 0 ]; then
	echo "$out" | tail -1
	exit 0
fi
failed=$(grep -oE '^--- FAIL: [A-Za-z0-9_]+' <<<"$out" | awk '{print $3}' | sort -u)
if [ -z "$failed" ]; then
	echo "$out" | tail -40
	exit 1
fi
for t in $failed; do
	passed=0
	for _ in 1 2; do
		if "$GO" test -count=1 -run "^${t}\$" github.com/hashicorp/raft >/dev/null 2>&1; then
			passed=1
			break
		fi
	done
	if [ $passed = 0 ]; then
		grep -A20 -- "--- FAIL: $t" <<<"$out" | grep -v 'testing.go:188' | head -20
		echo "hashicorp/raft: $t failed three times"
		exit 1
	fi
	echo "hashicorp/raft: $t failed in the whole run, passed alone (an upstream flake)"
done
echo "ok  	github.com/hashicorp/raft (patched copy)"
