#!/usr/bin/env bash
# Shows that readme_commands_test.sh can fail: on a copy of the README whose keel-demo line
# has a misspelt flag, it must fail and name that line.
# Usage: readme_commands_self_test.sh README BIN_DIR PROGRAM...   (as readme_commands_test.sh)
set -uo pipefail
readme="$1"
bin_dir="$2"
shift 2
here="$(cd "$(dirname "$0")" && pwd)"
copy_dir="$(mktemp -d)"
trap 'rm -rf "$copy_dir"' EXIT

broken="$copy_dir/README.md"
sed -E 's#^(build/bin/keel-demo .*)--steps #\1--stepz #' "$readme" >"$broken"
line_number="$(grep -n '^build/bin/keel-demo .*--stepz ' "$broken" | cut -d: -f1)"
if [[ -z "$line_number" ]]; then
  echo "FAIL the README has no 'build/bin/keel-demo ... --steps' line to break"
  exit 1
fi

output="$(bash "$here/readme_commands_test.sh" "$broken" "$bin_dir" "$@" 2>&1)"
rc=$?
echo "$output"
[[ $rc -eq 77 ]] && exit 77   # the programs are not built here: nothing to show
if [[ $rc -eq 0 ]]; then
  echo "FAIL the test passed on a README whose line $line_number is broken"
  exit 1
fi
if ! grep -q "^FAIL README.md:$line_number: build/bin/keel-demo " <<<"$output"; then
  echo "FAIL the test failed without naming the broken line $line_number"
  exit 1
fi
echo "the broken line $line_number failed the test, named"
