#!/usr/bin/env bash
# Runs what only a CUDA machine can check (docs/DESIGN.md §8), in one go, so a session with a
# GPU spends its device time measuring rather than typing:
#   1. the kernels against their host math      keel_cuda_stats_tests, keel_stats_math_tests
#   2. the probe on the device                   keel_cuda_probe_tests, then keel_probe_tests
#   3. the probe's cost                          keel-bench-gpu on the GPT-2-small shape, then
#                                                on 50,000 small tensors (--model deep-narrow);
#                                                each run's last line is one JSON object
#   4. a poisoned step on the GPT-2-small shape  keel-demo --device cuda --inject-nan, without
#                                                and with keel's GradScaler
#   5. the Python front on the device            pip install ./probe/python (against the
#                                                machine's own torch), pytest tests/python (its
#                                                CUDA tests: test_cuda.py), keel-bench-py --only gpu
# Each step's output goes to its own log in OUTDIR (eight files: few enough to come back from the
# device tool); the last lines printed say which passed. Every step runs even when one before
# it failed, and the exit status is non-zero if any did. Where there is no CUDA device the
# CUDA tests skip with their reason and the bench says so; nothing fails for that alone.
#
# Usage: scripts/gpu-check.sh BINDIR OUTDIR [--quick]
#   BINDIR   where the binaries are (/tmp/keel-build/bin after ../shared/gpu/build-on-device.sh
#            --target keel_cuda_stats_tests keel_stats_math_tests keel_cuda_probe_tests
#            keel_probe_tests keel-bench-gpu keel-demo)
#   --quick  a short bench (2 rounds) and demo (6 steps), to check the plumbing
# The Python front builds with the machine's python3, whose packages must hold torch, pip,
# scikit-build-core and pytest (the CUDA machine's image does), and the Debian packages that
# build-on-device.sh unpacked under /opt/deb. KEEL_GPU_CHECK_PYTHON=0 leaves step 5 out.
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: scripts/gpu-check.sh BINDIR OUTDIR [--quick]" >&2
  exit 2
fi
bin="$1"
out="$2"
quick="${3:-}"
mkdir -p "$out"

rounds=8
deep_rounds=6
demo_steps=16
nan_step=10
if [ "$quick" = "--quick" ]; then
  rounds=2
  deep_rounds=1
  demo_steps=6
  nan_step=3
fi

failed=()
summary=()
# run NAME LOG COMMAND...: runs the command with its output in OUTDIR/LOG, and notes the result.
run() {
  local name="$1" log="$out/$2"
  shift 2
  local start=$SECONDS
  echo "=== gpu-check: $name: $*" | tee -a "$log"
  "$@" >>"$log" 2>&1
  local rc=$?
  local line="$name: exit $rc in $((SECONDS - start)) s"
  echo "=== gpu-check: $line" | tee -a "$log"
  summary+=("$line")
  [ "$rc" -eq 0 ] || failed+=("$name")
}

run "kernels on the device" kernels.log "$bin/keel_cuda_stats_tests"
run "kernel math on the host" kernels.log "$bin/keel_stats_math_tests"
run "probe on the device" cuda_probe.log "$bin/keel_cuda_probe_tests"
run "probe on the host" probe.log "$bin/keel_probe_tests"
run "keel-bench-gpu" bench_gpu.log "$bin/keel-bench-gpu" --rounds "$rounds"
run "keel-bench-gpu, 50,000 small tensors" bench_gpu.log "$bin/keel-bench-gpu" --model deep-narrow --tensors 50000 \
  --rounds "$deep_rounds"
demo=("$bin/keel-demo" --device cuda --model gpt2-small --precision bf16 --steps "$demo_steps" --log-every 1
  --inject-nan "$nan_step:blocks.3.mlp.fc.weight" --no-dump-nonfinite --endpoint "")
if grep -q '"cuda":false' "$out/bench_gpu.log"; then
  summary+=("keel-demo: not run, no CUDA device (keel-bench-gpu said so)")
else
  run "keel-demo, a NaN at step $nan_step" demo.log "${demo[@]}"
  run "keel-demo with a GradScaler, a NaN at step $nan_step" demo.log "${demo[@]}" --scaler
fi

if [ "${KEEL_GPU_CHECK_PYTHON:-1}" != 0 ]; then
  # pip's own build of keel, with the machine's scikit-build-core (nothing can be fetched there)
  # and keel's libraries from /opt/deb; its build folder is kept for a second run.
  py_site=/tmp/keel-python
  run "Python front: pip install" python.log env PKG_CONFIG_PATH=/opt/deb/usr/lib/x86_64-linux-gnu/pkgconfig \
    CUDA_HOME=/usr/local/cuda PATH="/usr/local/cuda/bin:$PATH" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    python3 -m pip install --no-build-isolation --no-deps --no-cache-dir --upgrade --target "$py_site" \
    --config-settings=build-dir=/tmp/keel-python-build \
    --config-settings=cmake.define.CMAKE_PREFIX_PATH=/opt/deb/usr ./probe/python
  run "Python front: pytest" python.log env PYTHONPATH="$py_site" KEEL_BIN_DIR="$bin" \
    python3 -m pytest -q -p no:cacheprovider -rs tests/python
  bench_rounds=100
  [ "$quick" = "--quick" ] && bench_rounds=10
  run "keel-bench-py on the device" bench_py.log env PYTHONPATH="$py_site" \
    python3 -W ignore -m keel.bench --only gpu --rounds "$bench_rounds"
fi

{
  printf '%s\n' "${summary[@]}"
  # gtest's totals per test binary: a CUDA test skipped where a device was expected is a finding.
  grep -HE '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]+ test' "$out"/kernels.log "$out"/cuda_probe.log "$out"/probe.log
  # What the demos said about the poisoned step, and the bench's figures.
  [ -f "$out/demo.log" ] && grep -E "event|=== gpu-check: keel-demo" "$out/demo.log"
  grep '^{' "$out/bench_gpu.log"
  # pytest's last line, and keel-bench-py's GPU rows.
  [ -f "$out/python.log" ] && grep -E '^[0-9]+ (passed|failed)|^FAILED|^SKIPPED' "$out/python.log"
  [ -f "$out/bench_py.log" ] && grep -A4 '^GPU' "$out/bench_py.log"
} | tee "$out/summary.log"

if [ "${#failed[@]}" -gt 0 ]; then
  echo "gpu-check: failed: ${failed[*]}" | tee -a "$out/summary.log"
  exit 1
fi
echo "gpu-check: all passed" | tee -a "$out/summary.log"
