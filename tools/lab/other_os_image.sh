#!/usr/bin/env bash
# The lab's image of an unsupported OS: Debian 13 (trixie), minimal, with python3 and systemd, for the
# preflight's refusal check (molecule/shared/tests/test_preflight.py): a host the preflight
# (playbooks/preflight.yml) must refuse, naming it and the supported systems. Reached through podman
# (containers.podman.podman connection): no sshd, no lab packages. As root; tagged by a hash of its
# recipe, so a second run reuses it (about a minute the first time). Prints the image's name.
# tools/lab/setup.sh builds it with the other lab images (make lab-images).
set -euo pipefail

recipe="debootstrap --variant=minbase --include=python3,systemd,systemd-sysv trixie"
tag=$(printf '%s\n' "$recipe" | sha256sum | cut -c1-12)
image="localhost/gpucluster-lab-other-os:$tag"
if podman image exists "$image"; then
  echo "$image"
  exit 0
fi

# The Debian mirror this host already uses (never a host name written into the repo): the same
# lookup as tools/lab/setup.sh.
mirror=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1 || true)
if [ -z "$mirror" ]; then
  mirror=$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
fi
[ -n "$mirror" ] || { echo "no Debian mirror found in /etc/apt/sources.list(.d)" >&2; exit 1; }

rootfs=$(mktemp -d /var/tmp/gpucluster-rootfs-other.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
# shellcheck disable=SC2086
${recipe% trixie} trixie "$rootfs" "$mirror" >/dev/null
tar -C "$rootfs" -c . | podman import --change 'CMD ["/lib/systemd/systemd"]' - "$image" >/dev/null
echo "$image"
