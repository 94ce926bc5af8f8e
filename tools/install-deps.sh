#!/bin/sh
# Installs the Debian 12 packages shardrec builds and tests with (as root, or
# through sudo when not root). Skips the network when everything is present.
set -e
PKGS="build-essential pkg-config zlib1g-dev libopenblas-dev libcjson-dev libcmocka-dev libopenmpi-dev openmpi-bin clang libclang-rt-14-dev python3-torch python3-numpy"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "installing Debian packages:$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
