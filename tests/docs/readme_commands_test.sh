#!/usr/bin/env bash
# Runs the shell commands of the README's ```sh fences as a reader would paste them, against
# the built binaries, so that the front page cannot go stale: a renamed flag, a moved binary
# or a command that stopped working fails here with the README line that broke.
#
# Usage: readme_commands_test.sh README BIN_DIR PROGRAM...
#   README   the README.md to read (the self-test hands it a broken copy)
#   BIN_DIR  the build's bin/ folder; the commands run in a scratch folder where build/bin
#            is that folder, so `build/bin/keel-demo ...` runs as written
#   PROGRAM  the programs the README's commands need (keel-demo, keel-cli). A build that
#            made a subset of the targets (scripts/test.sh --sanitize) lacks them: the test
#            then exits 77, which ctest reports as skipped, not passed
#
# How each line runs:
# - a line that ends in `&` is started in the background, as the reader's shell would, and
#   must still be running (or have exited 0) a moment later; it is stopped at the end;
# - any other line must exit 0. One still running after kLimitSecs is ended with SIGINT, as
#   a reader ends `keel-cli tail` with Ctrl-C: it must then exit 0 and have printed a line.
# - the lines in kSkipped are not run, each for the reason given there. An entry that no
#   longer matches a README line fails the test, so the list cannot outlive its command.
set -uo pipefail
set -m   # every command in a process group of its own, so that SIGINT reaches it whole

readonly kLimitSecs=8
readonly kStartSecs=2

# Command prefix -> why the test does not run it.
declare -A kSkipped=(
  ["scripts/demo.sh"]="installs packages, builds the whole tree and opens the dashboard's window"
  ["scripts/test.sh"]="builds the tree and runs every test, this one included"
  ["python -m pip install ./probe/python"]="builds the Python extension (minutes) into the running environment; PythonFront.Pytest tests the front"
  ["build/bin/keel --connect"]="opens a window: tests/e2e's GUI tests run the dashboard under Xvfb"
)

readme="$1"
bin_dir="$2"
shift 2
[[ -f "$readme" ]] || { echo "no README at '$readme'"; exit 1; }
for program in "$@"; do
  [[ -x "$program" ]] || { echo "skipped: $program is not built in this build"; exit 77; }
done
[[ -d "$bin_dir" ]] || { echo "no bin folder at '$bin_dir'"; exit 1; }
readme_name="$(basename "$readme")"

scratch="$(mktemp -d)"
background_pids=()
background_lines=()
cleanup() {
  for pid in "${background_pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  for pid in "${background_pids[@]}"; do wait "$pid" 2>/dev/null; done
  rm -rf "$scratch"
}
trap cleanup EXIT
mkdir -p "$scratch/build"
ln -s "$(cd "$bin_dir" && pwd)" "$scratch/build/bin"

# Fails the test, naming the README line and what the command printed.
fail() {
  local where="$1" line="$2" why="$3" out="$4" err="$5"
  echo "FAIL $readme_name:$where: $line"
  echo "  $why"
  [[ -s "$out" ]] && { echo "  stdout (last lines):"; tail -n 8 "$out" | sed 's/^/    /'; }
  [[ -s "$err" ]] && { echo "  stderr (last lines):"; tail -n 8 "$err" | sed 's/^/    /'; }
  exit 1
}

# The ```sh fences' lines, as "NUMBER<TAB>TEXT"; a line ending in a backslash joins the next.
commands="$(awk '
  /^```/ { if (in_sh) { in_sh = 0 } else if ($0 ~ /^```(sh|bash|shell)[[:space:]]*$/) { in_sh = 1 }; next }
  !in_sh { next }
  pending != "" { pending = pending " " $0; if ($0 !~ /\\$/) { print start "\t" pending; pending = "" }; next }
  /^[[:space:]]*(#|$)/ { next }
  /\\$/ { start = NR; pending = $0; next }
  { print NR "\t" $0 }
' "$readme")"

declare -A skip_used=()
ran=0
while IFS=$'\t' read -r number line; do
  [[ -z "$number" ]] && continue
  for prefix in "${!kSkipped[@]}"; do
    if [[ "$line" == "$prefix"* ]]; then
      echo "skip $readme_name:$number: $line"
      echo "  (${kSkipped[$prefix]})"
      skip_used["$prefix"]=1
      continue 2
    fi
  done

  # The command without its trailing comment decides whether it runs in the background.
  code="$(sed -E 's/[[:space:]]+#.*$//' <<<"$line")"
  out="$scratch/out.$number" err="$scratch/err.$number"
  if [[ "$code" =~ ^(.*[^&])[[:space:]]*\&[[:space:]]*$ ]]; then
    (cd "$scratch" && exec bash -c "${BASH_REMATCH[1]}") >"$out" 2>"$err" </dev/null &
    pid=$!
    sleep "$kStartSecs"
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"; rc=$?
      [[ $rc -ne 0 ]] && fail "$number" "$line" "exited $rc in the background" "$out" "$err"
    fi
    background_pids+=("$pid")
    background_lines+=("$number")
    echo "ran  $readme_name:$number in the background: $line"
  else
    (cd "$scratch" && exec bash -c "$code") >"$out" 2>"$err" </dev/null &
    pid=$!
    interrupted=0
    for ((tenth = 0; tenth < kLimitSecs * 10; ++tenth)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      interrupted=1
      kill -INT -- "-$pid" 2>/dev/null
      for ((tenth = 0; tenth < 50; ++tenth)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid" 2>/dev/null
    fi
    wait "$pid"; rc=$?
    if [[ $interrupted -eq 1 ]]; then
      [[ $rc -ne 0 ]] && fail "$number" "$line" "still running after ${kLimitSecs} s, then exited $rc on Ctrl-C (SIGINT)" "$out" "$err"
      [[ -s "$out" ]] || fail "$number" "$line" "printed nothing in ${kLimitSecs} s" "$out" "$err"
      echo "ran  $readme_name:$number for ${kLimitSecs} s, then Ctrl-C: $line ($(wc -l <"$out") lines)"
    else
      [[ $rc -ne 0 ]] && fail "$number" "$line" "exited $rc" "$out" "$err"
      echo "ran  $readme_name:$number: $line"
    fi
  fi
  ran=$((ran + 1))
done <<<"$commands"

# A background command that died while the others ran broke too.
for i in "${!background_pids[@]}"; do
  pid="${background_pids[$i]}" number="${background_lines[$i]}"
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"; rc=$?
    line="$(sed -n "${number}p" "$readme")"
    [[ $rc -ne 0 ]] && fail "$number" "$line" "exited $rc in the background" "$scratch/out.$number" "$scratch/err.$number"
  fi
done

for prefix in "${!kSkipped[@]}"; do
  if [[ -z "${skip_used[$prefix]:-}" ]]; then
    echo "FAIL the skip list names '$prefix', which no \`\`\`sh line of $readme_name starts with: remove it"
    exit 1
  fi
done
if [[ $ran -eq 0 ]]; then
  echo "FAIL no \`\`\`sh line of $readme_name was run"
  exit 1
fi
echo "$ran README commands ran as written"
