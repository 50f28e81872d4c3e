#!/usr/bin/env bash
# Builds keel and runs every test (ctest). Usage: scripts/test.sh [ctest arguments]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh"
cd "$root/build"
ctest --output-on-failure -j"${KEEL_JOBS:-$(nproc)}" "$@"
