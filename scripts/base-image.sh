#!/usr/bin/env bash
# Builds the local base image for hosts that reach no image registry: a minimal Debian bookworm
# root filesystem made with mmdebstrap from Debian's packages (python3 + venv for ramplab,
# redis-server and prometheus so the compose stack's Redis and Prometheus run from the same
# image, wget for their healthchecks), imported with `docker import`.
#   scripts/base-image.sh      prints the image's tag: ramplab-base:<hash of this script>
# (The time zone database Prometheus's web UI depends on ships 220 MB of unpacked sources the
# UI never loads: left out.) A tag that already exists is reused: editing this script (the package list) makes a new one.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=python3,python3-venv,redis-server,prometheus,wget,ca-certificates,passwd
tag="ramplab-base:$(sha256sum scripts/base-image.sh | cut -c1-12)"
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi
if ! command -v mmdebstrap >/dev/null 2>&1; then
  echo "base-image: no mmdebstrap (apt-get install mmdebstrap)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The host's Debian sources (with its security and updates suites) when it is bookworm itself.
mirrors=()
if grep -qs '^Suites: bookworm' /etc/apt/sources.list.d/debian.sources; then
  mirrors=(/etc/apt/sources.list.d/debian.sources)
fi
echo "base-image: building $tag with mmdebstrap (a few minutes)" >&2
mmdebstrap --variant=apt --include="$packages" \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/javascript/moment-timezone/data/*' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
  bookworm "$work/rootfs.tar" "${mirrors[@]}" >&2
docker import --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' \
  "$work/rootfs.tar" "$tag" >/dev/null
echo "$tag"
