#!/usr/bin/env bash
# Install the Debian packages listed in $1 (one per line, '#' comments) that are missing.
# Needs root and apt; elsewhere it only lists what is missing and leaves the decision to you.
set -euo pipefail
list=${1:?usage: host_deps.sh PACKAGE_LIST}
mapfile -t wanted < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$list")
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && { echo "host packages: all present"; exit 0; }
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "host packages missing (install them as root): ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# policy-rc.d keeps packaged services (prometheus, opensm, ...) from starting on this host:
# the suite runs its own copies where it needs them.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "host packages installed: ${missing[*]}"
