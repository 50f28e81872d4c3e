#!/usr/bin/env bash
# Installs keel's build and test dependencies from Debian 12 packages (DESIGN §6).
# Idempotent and quiet when everything is already there; uses sudo when not root.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ccache
  libtorch-dev libopenblas0-pthread
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev
  libimgui-dev libstb-dev libglfw3-dev
  libgtest-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  xvfb xauth xdotool fonts-dejavu-core libgl1-mesa-dri
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "keel: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "keel: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
