#!/usr/bin/env bash
# Installs keel's Python front into the environment of the given python, as a user does:
#   pip install ./probe/python
# Prints how long the build took. Used by scripts/test.sh before its Python tests.
# Usage: scripts/install-python-front.sh /path/to/venv/bin/python
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${1:?usage: scripts/install-python-front.sh PYTHON}"
start=$SECONDS
# One build folder per torch version, kept for the next run's incremental build (a user's pip
# install builds in a temporary one).
torch_version="$("$python" -W ignore -c 'import torch; print(torch.__version__.split("+")[0])')"
# KEEL_JOBS: as scripts/test.sh, the build's parallelism (scikit-build-core passes it to CMake).
CMAKE_BUILD_PARALLEL_LEVEL="${KEEL_JOBS:-$(nproc)}" "$python" -m pip install --quiet \
  --config-settings=build-dir="$root/probe/python/build/torch-$torch_version" "$root/probe/python"
echo "keel: pip install ./probe/python took $((SECONDS - start)) s" >&2
