#!/usr/bin/env bash
# Build the offline base image used when no image registry answers (an air-gapped machine or CI):
# Debian bookworm (minbase) with its Python 3.11 and venv, imported into the local Docker engine.
# Usage: docker/offline-base.sh [TAG]   (default meshward/base:bookworm). Needs root and debootstrap.
set -euo pipefail
tag=${1:-meshward/base:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "offline base $tag already present"
    exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install -y debootstrap" >&2; exit 1; }
root=$(mktemp -d /tmp/meshward-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
# python3 here is CPython 3.11, the version the services are built and tested with.
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,tini bookworm "$root" "$mirror"
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* "$root"/usr/share/man/*
tar -C "$root" -c . | docker import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["python3"]' - "$tag"
echo "built offline base $tag"
