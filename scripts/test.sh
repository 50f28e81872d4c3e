#!/usr/bin/env bash
# Builds keel and runs its tests (ctest).
# Usage: scripts/test.sh [--official-libtorch | --newest-libtorch | --sanitize | --sanitize=thread]
#                       [ctest arguments]
#   (no flag)           every test, in build/, against Debian's libtorch 1.13
#   --official-libtorch every test whose code can see torch, in build-torch2/, against the
#                       official libtorch 2.x that scripts/install-deps.sh --official-libtorch
#                       pins and installs, and the Python front (pip install ./probe/python,
#                       then pytest) in its environment
#   --newest-libtorch   the probe and its tests (no app), in build-torch-newest/, against the
#                       newest torch the package index serves today, and the Python front in
#                       its environment as above
#   The tests whose code never includes torch (label torch_free) are not built by those two
#   (KEEL_TORCH_FREE_TESTS=OFF): no torch changes them, and the first form runs them.
#   --sanitize          AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
#   --sanitize=thread   ThreadSanitizer build in build-tsan/
# A sanitizer build compiles and runs only the tests of code that parses bytes or runs
# threads (the list below, RELIABILITY.md says why): the wire codec and its mutation tests,
# the fuzz corpora (a recording's reader among them), the flight recorder's thread, the
# app's receiver, subscriber, command client and model, the whole
# dashboard drawn headless (keel_dashboard_vertices_tests), and the probe's publisher,
# command server and reductions. The end-to-end, GUI, install and benchmark
# targets train real models for minutes, and under a sanitizer would cost CI far more than
# they add.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${KEEL_JOBS:-$(nproc)}"

sanitize=""
case "${1:-}" in
  --official-libtorch | --newest-libtorch)
    which="$1"
    shift
    prefix="$("$root/scripts/install-deps.sh" "$which")"
    scope=()
    build="$root/build-torch2"
    if [ "$which" = --newest-libtorch ]; then
      # The probe and its tests, not the app: the app never includes torch.
      scope=(-DKEEL_BUILD_APP=OFF)
      build="$root/build-torch-newest"
    fi
    # A build configured against another libtorch keeps that one's paths in its cache.
    cache="$build/CMakeCache.txt"
    if [ -f "$cache" ] && ! grep -qxF "Torch_DIR:PATH=$prefix/Torch" "$cache"; then rm -f "$cache"; fi
    # The Python front (probe/python) is installed into the torch's environment as a user
    # installs it, and its tests (tests/python, ctest's PythonFront.*) run there: with the newest
    # torch too, since a user's pip install builds against whatever torch they have (about 3
    # minutes of CI for the newest's build; its test of keel-demo's dashboard skips, as that
    # leg builds no keel-cli).
    python="${prefix%%/lib/python*}/bin/python"
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$prefix" \
      -DKEEL_PYTHON="$python" -DKEEL_TORCH_FREE_TESTS=OFF "${scope[@]}" >/dev/null
    cmake --build "$build" -j"$jobs"
    if [ -n "$python" ]; then "$root/scripts/install-python-front.sh" "$python"; fi
    cd "$build"
    exec ctest --output-on-failure -j"$jobs" "$@"
    ;;
  --sanitize | --sanitize=address | --sanitize=address,undefined) sanitize="address,undefined"; shift ;;
  --sanitize=thread) sanitize="thread"; shift ;;
  --sanitize=*) echo "scripts/test.sh: unknown sanitizer in $1 (use --sanitize or --sanitize=thread)" >&2; exit 2 ;;
esac

if [ -z "$sanitize" ]; then
  "$root/scripts/build.sh"
  cd "$root/build"
  exec ctest --output-on-failure -j"$jobs" "$@"
fi

sanitized_targets=(
  keel_wire_tests keel_command_path_tests keel_fuzz_decode_replay keel_fuzz_command_replay
  keel_fuzz_recording_replay keel_flight_recorder_tests
  keel_app_values_tests keel_app_model_tests keel_app_net_tests keel_app_text_tests keel_app_alert_tests
  keel_app_core_tests keel_cli_tests keel_ui_tests
  keel_probe_tests keel_fused_reduce_tests keel_dashboard_vertices_tests
)
if [ "$sanitize" = "thread" ]; then
  build="$root/build-tsan"
  export TSAN_OPTIONS="suppressions=$root/tests/sanitizers/tsan.supp halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
  # libgomp is not built with TSan: its thread pool's hand-offs look like races on every
  # reduction. One OpenMP thread keeps the reductions' code under test without the pool.
  export OMP_NUM_THREADS=1
else
  build="$root/build-asan"
  export ASAN_OPTIONS="detect_leaks=1 strict_string_checks=1 detect_stack_use_after_return=1 ${ASAN_OPTIONS:-}"
  export UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1 ${UBSAN_OPTIONS:-}"
fi

"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKEEL_SANITIZE="$sanitize" >/dev/null
cmake --build "$build" -j"$jobs" --target "${sanitized_targets[@]}"
cd "$build"
# Tests of targets not built above are registered as <target>_NOT_BUILT; the GUI, fault,
# soak, install and libtorch-linked checks are plain add_test entries of targets not built here.
exec ctest --output-on-failure -j"$jobs" -E '_NOT_BUILT$|^keel_.*gui_tests$|^keel_fault_|^InstallPackage\.|^LibtorchLinked\.' "$@"
