#!/usr/bin/env bash
# A base image for machines that reach Debian's archive but no image registry: Debian 12
# (bookworm, the release BASE_IMAGE in container/pins.env names) made with debootstrap and
# imported into podman under the name printed on the last line.
#   bash container/local-base.sh [NAME]       # default: localhost/debian-bookworm-base
# Needs root, debootstrap and podman. Does nothing when the image already exists.
set -euo pipefail
NAME=${1:-localhost/debian-bookworm-base}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if podman image exists "$NAME"; then
    echo "$NAME"
    exit 0
fi
for tool in debootstrap podman; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed" >&2; exit 2; }
done
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase bookworm "$root" "$MIRROR" >&2
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
tar -C "$root" -c . | podman import - "$NAME" >&2
echo "$NAME"
