#!/usr/bin/env bash
# Builds the sluice image from Containerfile, tagged $IMAGE:<version>
# (IMAGE defaults to sluice; the version is the built binary's own
# --version, so the image's label and `sluice --version` agree).
#   scripts/image.sh            (make image)
# ENGINE=podman|buildah|docker picks the builder; by default the first of
# them found here. podman and buildah build without a daemon.
set -euo pipefail
cd "$(dirname "$0")/.."
ctx=bin/image
rm -rf "$ctx"
mkdir -p "$ctx/etc" "$ctx/data"
CGO_ENABLED=0 go build -tags=vtprotobuf -trimpath -ldflags='-s -w' -o "$ctx/sluice" ./cmd/sluice
version=$("$ctx/sluice" --version | awk '{print $2}')
printf 'root:x:0:0:root:/:/sbin/nologin\nsluice:x:65532:65532:sluice:/data:/sbin/nologin\n' >"$ctx/etc/passwd"
printf 'root:x:0:\nsluice:x:65532:\n' >"$ctx/etc/group"
engine=${ENGINE:-}
if [ -z "$engine" ]; then
	for e in podman buildah docker; do
		if command -v "$e" >/dev/null 2>&1; then engine=$e; break; fi
	done
fi
if [ -z "$engine" ]; then
	echo "image: no podman, buildah or docker here (on Debian: apt-get install podman)" >&2
	exit 1
fi
case $engine in
buildah) build=(buildah bud) ;;
*) build=("$engine" build) ;;
esac
tag="${IMAGE:-sluice}:$version"
# --no-cache: podman 4.3 reused a cached COPY layer after its --chown
# changed; the build is seconds, the compile before it is the cost.
"${build[@]}" -q --no-cache -f Containerfile --build-arg VERSION="$version" -t "$tag" "$ctx" >/dev/null
echo "$tag"
