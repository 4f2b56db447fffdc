#!/usr/bin/env bash
# Lab setup on a fresh Debian 12 host, as root; safe to run again (each step checks first).
#  1. the host packages of tests/host-packages.txt (podman, runc, debootstrap, ibsim, ...);
#  2. /etc/containers/containers.conf settings the sandbox needs, and the host's inotify limits;
#  3. the base image (debootstrap + podman import) and the lab image (podman build),
#     each tagged by a hash of its recipe, so a second run reuses them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lab="$root/lab"   # the lab itself: Containerfile (the image's recipe and build context), playbooks, overlay
start=$(date +%s)

bash "$root/tools/setup/host_deps.sh" "$root/tests/host-packages.txt"

python3 "$here/containers_conf.py" /etc/containers/containers.conf

# Each lab container runs systemd, which holds inotify instances (path units, journald, udev):
# the kernel's default of 128 per user is used up by two labs at once ("Failed to enter waiting
# state: Too many open files" on a .path unit). Raise the host's limits (never lowered here).
for kv in fs.inotify.max_user_instances=8192 fs.inotify.max_user_watches=1048576; do
  key=${kv%%=*}; want=${kv#*=}
  [ "$(sysctl -n "$key")" -ge "$want" ] || sysctl -qw "$kv"
done

# The Debian mirror this host already uses (never a host name written into the repo).
mirror=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1 || true)
if [ -z "$mirror" ]; then
  mirror=$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
fi
[ -n "$mirror" ] || { echo "no Debian mirror found in /etc/apt/sources.list(.d)" >&2; exit 1; }

base_recipe="debootstrap --variant=minbase --include=python3,python3-apt,systemd,systemd-sysv,sudo,dbus bookworm"
base_tag=$(printf '%s\n' "$base_recipe" | sha256sum | cut -c1-12)
base="localhost/gpucluster-lab-base:$base_tag"
if podman image exists "$base"; then
  echo "base image $base: cached"
else
  rootfs=$(mktemp -d /var/tmp/gpucluster-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  # shellcheck disable=SC2086
  ${base_recipe% bookworm} bookworm "$rootfs" "$mirror" >/dev/null
  tar -C "$rootfs" -c . | podman import --change 'CMD ["/lib/systemd/systemd"]' - "$base" >/dev/null
  rm -rf "$rootfs"
  echo "base image $base: built"
fi

lab_tag=$( (cat "$lab/Containerfile"; echo "$base") | sha256sum | cut -c1-12)
image="localhost/gpucluster-lab:$lab_tag"
if podman image exists "$image"; then
  echo "lab image $image: cached"
else
  podman build --quiet --build-arg "BASE=$base" -t "$image" -f "$lab/Containerfile" "$lab" >/dev/null
  echo "lab image $image: built"
fi
podman tag "$image" localhost/gpucluster-lab:current
# the unsupported OS the preflight must refuse (molecule/shared/tests/test_preflight.py), cached likewise
echo "other-OS image $(bash "$(dirname "$0")/other_os_image.sh")"
echo "lab setup took $(( $(date +%s) - start )) s"
