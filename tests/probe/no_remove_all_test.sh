#!/usr/bin/env bash
# Fails when a keel library or program that links libtorch refers to
# std::filesystem::remove_all: under the official libtorch 2.x that symbol resolves to
# libtorch.so's copy, which jumps to address 0 (probe/src/dump/remove_tree.hpp says why).
# Usage: no_remove_all_test.sh FILE...   (static libraries and executables)
set -euo pipefail
found=0
for file in "$@"; do
  # Not `nm | grep -q`: grep -q stops at the first match, nm dies of SIGPIPE, and pipefail
  # turns the match into a failure of the pipeline, which hid every finding.
  symbols="$(nm -C --undefined-only "$file")"
  if grep -q 'std::filesystem::remove_all' <<<"$symbols"; then
    echo "refers to std::filesystem::remove_all (use keel::probe::remove_tree): $file"
    found=1
  fi
done
[ "$found" -eq 0 ] && echo "none of $# libtorch-linked files refers to std::filesystem::remove_all"
exit "$found"
