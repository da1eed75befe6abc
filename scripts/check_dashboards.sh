#!/usr/bin/env bash
# The operator's files against a real Prometheus (tests/dashboards_test.go):
# promtool checks deploy/prometheus/alerts.yml, then Prometheus scrapes a
# sluice node, a 3-node cluster and an application running httplimit under
# traffic; every panel of deploy/grafana/sluice.json must return series and
# the alerts a test can provoke must fire. The status page at / is loaded in
# a headless Chromium (tests/statuspage_test.go). Needs Debian's prometheus
# package (prometheus, promtool), chromium and root (it mounts a small tmpfs
# to fill).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v prometheus >/dev/null && command -v promtool >/dev/null ||
	{ echo "prometheus and promtool are needed (Debian: prometheus)" >&2; exit 1; }
command -v chromium >/dev/null || { echo "chromium is needed (Debian: chromium)" >&2; exit 1; }
SLUICE_CHECK_DASHBOARDS=1 go test -count=1 -run 'TestDashboardsAndAlerts|TestStatusPageInChromium|TestStatusPageShardedInChromium' -v ./tests 2>&1 |
	grep -v '^time=' | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|dashboards_test|statuspage_'
