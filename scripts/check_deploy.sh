#!/usr/bin/env bash
# The deploy check (make check-deploy; .ci/run runs it beside the suite):
# the image built from this checkout with podman, unpacked and run; the
# Helm chart linted, rendered and its pods run as processes; compose.yaml's
# commands against the chart's. helm is built from its Go module into
# bin/tools once (the version below), podman comes from Debian
# (scripts/provision.sh --extras).
set -euo pipefail
cd "$(dirname "$0")/.."
helm_version=v3.22.0
tools=$PWD/bin/tools
# A helm built from its module reports no version of its own; the module's
# is in the binary's build information.
if ! go version -m "$tools/helm" 2>/dev/null | grep -qE "^\s+mod\s+helm.sh/helm/v3\s+$helm_version\s"; then
	echo "check-deploy: building helm $helm_version from its module" >&2
	GOFLAGS= GOBIN=$tools go install "helm.sh/helm/v3/cmd/helm@$helm_version"
fi
command -v podman >/dev/null 2>&1 || { echo "check-deploy: podman is missing: scripts/provision.sh --extras" >&2; exit 1; }
PATH=$tools:$PATH go test -tags 'vtprotobuf deploy' -count=1 -timeout 10m -run 'TestImage|TestHelm|TestCompose' ./tests/
