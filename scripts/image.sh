#!/usr/bin/env bash
# Builds the sluice image from Containerfile, tagged $IMAGE:<version>
# (IMAGE defaults to sluice; the version is sluice's own, server/config.go,
# which the image's label and `sluice --version` both say).
#   scripts/image.sh            (make image)
# ENGINE=podman|buildah|docker picks the builder; by default the first of
# them found here. podman and buildah build without a daemon. The image
# goes into the engine's own store (it says which, and how to hand it to
# docker); the last line out is its tag.
# GO_IMAGE is the build stage's Go toolchain image. By default the one
# made here from the Go installed on this machine (`go env GOROOT`, with
# the system's CA certificates for the module proxy): no registry is
# needed. GO_IMAGE=docker.io/library/golang:1.26 uses the official one.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^[[:space:]]*Version:[[:space:]]*"\([^"]*\)",$/\1/p' server/config.go)
if [ -z "$version" ]; then
	echo "image: no Version in server/config.go" >&2
	exit 1
fi
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
import=("$engine" import)
case $engine in
buildah)
	# buildah has no import: podman does, into the same storage.
	import=(podman import)
	build=(buildah bud --isolation chroot) ;;
# chroot isolation runs the build stage's steps without a container
# runtime, which also works where cgroups are not delegated (sandboxes,
# CI runners). --no-cache: podman 4.3 reused a cached COPY layer after its
# --chown changed.
podman) build=(podman build --isolation chroot --no-cache --layers=false) ;;
*) build=("$engine" build --no-cache) ;;
esac
go_image=${GO_IMAGE:-}
images=("$engine")
[ "$engine" = buildah ] && images=(podman)
if [ -z "$go_image" ]; then
	goroot=$(go env GOROOT)
	gover=$(go env GOVERSION)
	go_image="localhost/sluice-go-builder:$gover"
fi
# Made once per Go version, then reused.
if [ -z "${GO_IMAGE:-}" ] && ! "${images[@]}" image inspect "$go_image" >/dev/null 2>&1; then
	stage=$(mktemp -d)
	trap 'rm -rf "$stage"' EXIT
	mkdir -p "$stage/usr/local" "$stage/etc/ssl/certs" "$stage/tmp" "$stage/root"
	chmod 1777 "$stage/tmp"
	ln -s "$goroot" "$stage/usr/local/go"
	cp /etc/ssl/certs/ca-certificates.crt "$stage/etc/ssl/certs/"
	if ! out=$(tar -c -h -C "$stage" usr etc tmp root |
		"${import[@]}" --change 'ENV PATH=/usr/local/go/bin' --change 'ENV HOME=/root' \
			--change 'ENV GOTOOLCHAIN=local' - "$go_image" 2>&1); then
		echo "image: making the Go builder image $go_image: $out" >&2
		exit 1
	fi
fi
tag="${IMAGE:-sluice}:$version"
"${build[@]}" -q -f Containerfile --build-arg GO_IMAGE="$go_image" --build-arg VERSION="$version" -t "$tag" . >/dev/null
# Where the image went: each engine keeps its own store, which the others
# (docker compose's docker in particular) do not see.
case $engine in
docker) echo "image: built $tag in docker's image store" >&2 ;;
*) echo "image: built $tag in ${images[0]}'s image store (docker does not see it: ${images[0]} save $tag | docker load)" >&2 ;;
esac
echo "$tag"
