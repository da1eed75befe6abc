#!/usr/bin/env bash
# Installs what the test suite needs beyond Go: redis-cli (redis-tools),
# redis-py for Debian's python3 (python3-redis), Node.js with npm (the
# ioredis tests), and with --extras what the slower checks need besides
# (redis-server, prometheus, chromium, podman). `make test` and .ci/run both call
# it, so a fresh Debian machine with Go goes from clone to green with
# `make test` alone.
#
# Already installed: nothing happens. Missing and this is root (or sudo
# works without a password): apt-get installs it. Otherwise it stops at
# once and prints the exact command to run.
set -euo pipefail

extras=0
[ "${1:-}" = "--extras" ] && extras=1

need=()
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
/usr/bin/python3 -c 'import redis.cluster' >/dev/null 2>&1 || need+=(python3-redis)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ "$extras" = 1 ]; then
	# The reference check backs envoyproxy/ratelimit with Redis; the
	# dashboard check runs a real Prometheus and a headless Chromium.
	command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
	command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
	command -v chromium >/dev/null 2>&1 || need+=(chromium)
	# The deploy check builds the image without a daemon.
	command -v podman >/dev/null 2>&1 || need+=(podman)
fi
[ ${#need[@]} -eq 0 ] && exit 0

cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y ${need[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
	echo "provision: missing ${need[*]} (Debian package names) and there is no apt-get here: install them, then run make test again" >&2
	exit 1
fi
sudo=()
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
		sudo=(sudo -n)
	else
		echo "provision: missing ${need[*]}; run as root:" >&2
		echo "  sudo sh -c '$cmd'" >&2
		exit 1
	fi
fi
echo "provision: installing ${need[*]}" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
