#!/usr/bin/env bash
# Differential check of sluice's rate limit service against
# envoyproxy/ratelimit, the reference Envoy users run today: the same rule
# file, the same random request sequences, every response field compared
# (tests/rls_reference_test.go). The reference is built from its Go module
# (module proxy only) and backed by a local redis-server.
#
#   scripts/check_rls_reference.sh            # a random seed (printed)
#   SLUICE_RLS_SEED=42 scripts/check_rls_reference.sh
set -euo pipefail
cd "$(dirname "$0")/.."

REF_VERSION=v1.4.1-0.20260122083618-3fb702589d36
BIN_DIR=${RLS_REFERENCE_DIR:-$PWD/bin/reference}
REF=$BIN_DIR/service_cmd

command -v redis-server >/dev/null || { echo "redis-server is needed (Debian: redis-server)" >&2; exit 1; }
if [ ! -x "$REF" ]; then
	mkdir -p "$BIN_DIR"
	GOBIN=$BIN_DIR go install "github.com/envoyproxy/ratelimit/src/service_cmd@$REF_VERSION"
fi
SLUICE_RLS_REFERENCE=$REF go test -count=1 -run 'TestRLSDifferential' -v ./tests 2>&1 | grep -v '^time=' | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|rls_reference_test'
