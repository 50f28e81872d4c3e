#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds and runs an outside project against it.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR SCRATCH_DIR
set -euo pipefail
build="$1" source="$2" scratch="$3"
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$source/tests/install/consumer" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/consumer" -j2 >/dev/null
"$scratch/consumer/consumer"
