#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds and runs an outside project against it.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR SCRATCH_DIR TORCH_DIR [TORCH_LIBRARY_DIRS]
# TORCH_DIR: the libtorch the build used (its TorchConfig.cmake's folder). The consumer gets
# its CMake prefix on CMAKE_PREFIX_PATH, as the README tells users: with Debian's libtorch-dev
# installed, find_package(Torch) would find 1.13 otherwise.
# TORCH_LIBRARY_DIRS: libtorch's own library folders (':'-separated), where it brings its CUDA
# libraries: the consumer must load those from there, as keel's own programs do.
set -euo pipefail
build="$1" source="$2" scratch="$3" torch_dir="$4" torch_library_dirs="${5:-}"
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$source/tests/install/consumer" -B "$scratch/consumer" \
  -DCMAKE_PREFIX_PATH="$scratch/prefix;$(dirname "$torch_dir")" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/consumer" -j2 >/dev/null
"$scratch/consumer/consumer"
if [ -n "$torch_library_dirs" ]; then
  bash "$source/tests/probe/torch_libraries_first_test.sh" "$torch_library_dirs" "$scratch/consumer/consumer"
fi
