#!/usr/bin/env bash
# Fails when a program that links libtorch would load one of the libraries libtorch was built
# with (NCCL, cuDNN, cuBLAS, the CUDA runtime, ...) from anywhere but libtorch's own folders:
# the CUDA toolkit's older copy, say, which left torch 2.15 unlinkable
# (cmake/keelTorchLibraries.cmake, section 3). ldd resolves them as the loader will.
# Usage: torch_libraries_first_test.sh TORCH_LIBRARY_DIRS PROGRAM...
#   TORCH_LIBRARY_DIRS: libtorch's own folders, ':'-separated (KEEL_TORCH_LIBRARY_DIRS)
set -euo pipefail
IFS=: read -r -a own_dirs <<<"$1"
shift
failed=0
checked=0
for program in "$@"; do
  resolved="$(ldd "$program")" || { echo "ldd failed on $program"; exit 1; }
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    own=""
    for dir in "${own_dirs[@]}"; do
      if [ -e "$dir/$name" ]; then own="$dir/$name"; break; fi
    done
    [ -n "$own" ] || continue
    checked=$((checked + 1))
    if [ "$path" = "not" ] || [ "$(realpath "$path")" != "$(realpath "$own")" ]; then
      echo "$program loads $name from $path, not libtorch's own $own"
      failed=1
    fi
  done <<<"$resolved"
done
if [ "$checked" -eq 0 ]; then
  echo "none of $# programs loads a library from libtorch's folders: nothing was checked"
  exit 1
fi
[ "$failed" -eq 0 ] && echo "$# programs load all $checked of libtorch's own libraries from its folders"
exit "$failed"
