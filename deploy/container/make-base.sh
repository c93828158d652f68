#!/usr/bin/env bash
# Makes a Node base image without pulling from an image registry: a minimal Debian root file
# system from the Debian mirror (debootstrap), plus this machine's `node` binary and npm.
# Usage: make-base.sh TAG [SUITE] [MIRROR]. Does nothing when TAG exists already.
set -euo pipefail
tag=$1
suite=${2:-bookworm}
mirror=${3:-http://deb.debian.org/debian}
podman=(podman --runtime runc --cgroup-manager cgroupfs)
if "${podman[@]}" image exists "$tag"; then exit 0; fi
node=$(command -v node)
npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include=ca-certificates "$suite" "$rootfs" "$mirror" >&2
install -m 0755 "$(readlink -f "$node")" "$rootfs/usr/local/bin/node"
mkdir -p "$rootfs/usr/local/lib/node_modules"
cp -a "$npm_dir" "$rootfs/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
# This machine's trust store, which may hold the CA of a proxy that the registries are reached through.
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | "${podman[@]}" import \
  --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' --change 'CMD ["node"]' - "$tag" >&2
