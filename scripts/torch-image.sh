#!/usr/bin/env bash
# Builds the exact transformer's PyTorch trainer (pkg/exact/torch: train.py and
# depin_exact) as a Docker image from Debian packages, with no registry:
#
#   1. a Debian bookworm root filesystem made by `debootstrap --variant=minbase`
#      with python3-torch (1.13, CPU) and libopenblas0-pthread (without OpenBLAS
#      torch falls back to Debian's reference BLAS, ~40x slower);
#   2. the trainer copied to /opt/depin/exact-torch;
#   3. `docker import`ed as depinchain/exact-torch:<content hash>, ENTRYPOINT
#      python3 train.py (the trainer contract, provider/trainer/CONTRACT.md).
#
# The tag is a hash of what goes into the image (this script, the package list,
# the suite and the trainer's files), so a rerun with nothing changed finds the
# image and only prints it (a second or two). The root filesystem is kept in
# $BUILD_DIR/torch-image/rootfs and the downloaded .debs in
# $BUILD_DIR/torch-image/apt-cache, so a rerun after a trainer change only
# re-imports (about a minute) and one after a package change downloads nothing.
#
# It prints the image reference, its ID and its size, and on the last line
#   digest=sha256:<64 hex>
# the value a `kind: container` job spec pins as workload.digest: the image ID,
# which the container runtime matches (provider/runtime/container.go,
# ResolveImage). Imported images have no RepoDigests; a registry digest exists
# only once the image is pushed to one. The ID depends on the import time, so
# each build (each operator) gets its own: pin the one printed where the job
# runs, or publish one image and `docker save`/`docker load` it elsewhere (the
# ID survives that).
#
# Needs root (debootstrap, chroot) and a Docker Engine; installs debootstrap
# with apt-get when it is missing. Options (environment):
#   BUILD_DIR      where the root filesystem and caches go (default ./build)
#   DEBIAN_MIRROR  the mirror (default http://deb.debian.org/debian)
#   IMAGE_REPO     the image's repository (default depinchain/exact-torch)
#   REBUILD=1      make a fresh root filesystem even if one is cached
#   PUSH_TO=HOST:PORT  also push the image to that registry (a registry on
#                  127.0.0.1 needs no TLS for Docker) and print its manifest
#                  digest; the image then matches a job that pins
#                  image: HOST:PORT/<repo>:<tag> with that digest, and a
#                  runtime that pulls by digest can fetch it from there
set -euo pipefail

root_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(mkdir -p "${BUILD_DIR:-$root_dir/build}" && cd "${BUILD_DIR:-$root_dir/build}" && pwd)
work=$build_dir/torch-image
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
repo=${IMAGE_REPO:-depinchain/exact-torch}
suite=bookworm
packages=(python3-torch libopenblas0-pthread)
trainer_src=$root_dir/pkg/exact/torch
# Inside the image.
trainer_dst=/opt/depin/exact-torch

log() { echo "torch-image: $*" >&2; }
started=$(date +%s)

# The content hash: the rootfs recipe and the trainer's sources.
rootfs_key=$(printf '%s\n' "$suite" "$mirror" "${packages[@]}" | sha256sum | cut -c1-16)
content=$(
	{
		cat "$0"
		echo "$rootfs_key"
		(cd "$trainer_src" && find train.py depin_exact -name '*.py' -type f | LC_ALL=C sort | xargs sha256sum)
	} | sha256sum | cut -c1-16
)
image=$repo:$content

print_image() {
	local id size
	id=$(docker image inspect -f '{{.Id}}' "$image")
	size=$(docker image inspect -f '{{.Size}}' "$image")
	log "image $image"
	log "id $id, size $((size / 1000000)) MB, $(($(date +%s) - started)) s"
	[ -n "${PUSH_TO:-}" ] && push
	echo "image=$image"
	echo "digest=$id"
}

# push tags the image for $PUSH_TO, pushes it and prints the manifest digest
# the push recorded in the image's RepoDigests.
push() {
	local remote=$PUSH_TO/$repo:$content manifest
	docker tag "$image" "$remote"
	log "docker push $remote"
	docker push "$remote" >&2
	manifest=$(docker image inspect -f '{{range .RepoDigests}}{{println .}}{{end}}' "$remote" |
		sed -n "s|^$PUSH_TO/$repo@||p" | head -n1)
	if [ -z "$manifest" ]; then
		log "the push recorded no repo digest for $PUSH_TO/$repo"
		exit 1
	fi
	echo "pushed=$remote"
	echo "manifest_digest=$manifest"
}

if ! docker info >/dev/null 2>&1; then
	log "no Docker Engine answers (docker info failed)"
	exit 1
fi
if docker image inspect "$image" >/dev/null 2>&1; then
	print_image
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	log "debootstrap needs root; run as root (or with sudo)"
	exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
	log "installing debootstrap (apt-get update first)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq debootstrap >/dev/null
fi

rootfs=$work/rootfs
cache=$work/apt-cache
mkdir -p "$cache"
if [ "${REBUILD:-}" = 1 ] || [ "$(cat "$work/rootfs.key" 2>/dev/null)" != "$rootfs_key" ]; then
	rm -rf "$rootfs" "$work/rootfs.key"
	log "debootstrap --variant=minbase $suite with ${packages[*]} (debs cached in $cache)"
	t0=$(date +%s)
	include=$(IFS=,; echo "${packages[*]}")
	if ! debootstrap --variant=minbase --include="$include" --cache-dir="$cache" \
		"$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
		tail -n 30 "$work/debootstrap.log" >&2
		[ -f "$rootfs/debootstrap/debootstrap.log" ] && tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2
		log "debootstrap failed; full log in $work/debootstrap.log"
		exit 1
	fi
	log "debootstrap took $(($(date +%s) - t0)) s"
	# What a trainer does not need: apt's lists and archives, documentation, man
	# pages and translations.
	rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
		"$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
		"$rootfs"/usr/share/locale/* "$rootfs"/var/log/*.log "$rootfs"/debootstrap
	# The smoke test every image must pass: torch imports and sees OpenBLAS.
	chroot "$rootfs" /usr/bin/python3 -c 'import torch; print("torch", torch.__version__)' >&2
	echo "$rootfs_key" >"$work/rootfs.key"
fi

# The trainer, replaced on every build so the image holds exactly the sources hashed.
rm -rf "${rootfs:?}$trainer_dst"
mkdir -p "$rootfs$trainer_dst"
cp "$trainer_src/train.py" "$rootfs$trainer_dst/"
(cd "$trainer_src" && find depin_exact -name '*.py' -type f -exec cp --parents {} "$rootfs$trainer_dst/" \;)
find "$rootfs$trainer_dst" -name __pycache__ -prune -exec rm -rf {} +
chmod -R a+rX "$rootfs$trainer_dst"

log "docker import as $image"
t0=$(date +%s)
# HOME=/tmp: the container runs as the sidecar's uid, which has no home in the image.
tar -C "$rootfs" --numeric-owner -c . |
	docker import \
		-c "ENTRYPOINT [\"/usr/bin/python3\", \"$trainer_dst/train.py\"]" \
		-c 'CMD []' \
		-c 'ENV HOME=/tmp PYTHONDONTWRITEBYTECODE=1 LANG=C.UTF-8' \
		-c "WORKDIR $trainer_dst" \
		-c "LABEL org.opencontainers.image.title=depinchain-exact-torch org.depinchain.content=$content" \
		- "$image" >/dev/null
docker tag "$image" "$repo:latest"
log "docker import took $(($(date +%s) - t0)) s"
print_image
