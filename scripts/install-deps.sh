#!/usr/bin/env bash
# Installs keel's build and test dependencies from Debian 12 packages (docs/DESIGN.md §7).
# Idempotent and quiet when everything is already there; uses sudo when not root.
#
# Usage: scripts/install-deps.sh [--official-libtorch | --newest-libtorch]
#   --official-libtorch  also installs the official libtorch 2.x that keel is pinned to (pip's
#                        torch, CUDA build; it runs on the CPU too), with pytest, transformers,
#                        lightning and accelerate for the Python front's tests, into a virtual
#                        environment under the cache directory, and prints its CMake prefix as
#                        the only line on stdout. A second run finds it there and downloads
#                        nothing.
#   --newest-libtorch    the same for the newest torch the package index serves today (asks the
#                        index which one that is), so that a release that breaks keel is seen
#                        the day it appears.
# Everything else this script says goes to stderr.
set -euo pipefail

# The official libtorch keel is tested against: the one place its version is pinned.
official_torch_version="2.11.0"
cache="${KEEL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keel}"

torch_wanted=""
case "${1:-}" in
  "") ;;
  --official-libtorch) torch_wanted=pinned ;;
  --newest-libtorch) torch_wanted=newest ;;
  *) echo "scripts/install-deps.sh: unknown option $1 (use --official-libtorch or --newest-libtorch)" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake pkg-config ccache
  libtorch-dev libopenblas0-pthread
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libzstd-dev
  libimgui-dev libstb-dev libglfw3-dev
  libgtest-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  xvfb xauth xdotool fonts-dejavu-core libgl1-mesa-dri
  # keel-cli watch's test posts an alert to a webhook on loopback, as docs/watching.md shows
  curl
  # scripts/long_functions.py, which the house's test of function lengths runs
  python3
)
# pip's torch goes into a virtual environment (Debian's python3 refuses system-wide pip
# installs); Debian's python3 needs python3-venv for one.
if [ -n "$torch_wanted" ] && ! python3 -m venv --help >/dev/null 2>&1; then
  packages+=(python3-venv)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "keel: installing ${missing[*]}" >&2
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "keel: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq >&2
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ -n "$torch_wanted" ] || exit 0

torch_version="$official_torch_version"
if [ "$torch_wanted" = newest ]; then
  # Asked with a virtual environment's pip: Debian's python3 comes without one.
  index_venv="$cache/index-query"
  [ -x "$index_venv/bin/python" ] || python3 -m venv "$index_venv" >&2
  torch_version="$("$index_venv/bin/python" -m pip index versions torch 2>/dev/null | sed -n 's/^torch (\(.*\))$/\1/p')"
  [ -n "$torch_version" ] || {
    echo "keel: the package index did not say which torch is the newest (pip index versions torch)" >&2
    exit 1
  }
fi

# The torch wheel (about 530 MB) and its CUDA libraries (about 2.5 GB) are downloaded once, into
# $cache/wheels, and installed from there into $cache/torch-<version>; a second run finds the
# environment, and a rebuilt one installs from the wheels with no network.
venv="$cache/torch-$torch_version"
wheels="$cache/wheels"
installed_version() { "$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null; }
if [ "$(installed_version)" != "$torch_version" ]; then
  echo "keel: installing torch==$torch_version (official libtorch) into $venv" >&2
  rm -rf "$venv"
  mkdir -p "$wheels"
  python3 -m venv "$venv" >&2
  pip=("$venv/bin/python" -m pip --quiet)
  if ! "${pip[@]}" install --no-index --find-links "$wheels" "torch==$torch_version" >&2 2>/dev/null; then
    "${pip[@]}" download --dest "$wheels" "torch==$torch_version" >&2
    "${pip[@]}" install --no-index --find-links "$wheels" "torch==$torch_version" >&2
  fi
  [ "$(installed_version)" = "$torch_version" ] || {
    echo "keel: torch==$torch_version did not install into $venv" >&2
    exit 1
  }
fi
# pytest runs the Python front's tests (tests/python) in the same environment, against its torch,
# and those tests run keel inside the Hugging Face Trainer, Lightning and Accelerate (tiny models
# built from configs: nothing else is downloaded). Installed beside the torch, never over it.
if ! "$venv/bin/python" -c 'import pytest, transformers, lightning, accelerate, safetensors' 2>/dev/null; then
  echo "keel: installing pytest, transformers, lightning and accelerate into $venv" >&2
  "$venv/bin/python" -m pip --quiet install pytest transformers lightning accelerate safetensors "torch==$torch_version" >&2
fi
# Numpy is not installed: importing torch warns that it is missing, which is harmless here.
"$venv/bin/python" -W ignore -c 'import torch; print(torch.utils.cmake_prefix_path)'
