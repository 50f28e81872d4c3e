// keel-bench-probe: what the probe costs a real training step.
//
// Three identical trainers (keel-demo's default model, same seed) step in rotating order, so
// machine noise hits all three alike: plain optimizer.step(), the keel probe with every metric
// every step (publishing on loopback), and naive instrumentation as commonly written. Also
// the fused reduction against memcpy on 64 MB, and the probe's training-thread time outside
// its reductions; and trainer control (control_bench.hpp): command round trip at 10 steps/s,
// dump throughput against a plain write, the step cost of the history ring and command
// socket; the per-step check that the model's parameters are still those the probe planned
// for (parameter_layout.hpp); and the per-step check of a model's floating-point buffers
// (ResNet-50's 53 BatchNorms: listing them, comparing, measuring max |b|); rewind's snapshots
// and one rewind (snapshot_bench.hpp). The last line is one JSON object.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "median.hpp"
#include "reduce/buffer_reducer.hpp"
#include "control_bench.hpp"
#include "front/libtorch_model.hpp"
#include "front/libtorch_optimizer.hpp"
#include "keel/probe/probe.hpp"
#include "layout/model_buffers.hpp"
#include "naive_checks.hpp"
#include "layout/parameter_layout.hpp"
#include "layout/parameter_sequence.hpp"
#include "reduce_bandwidth.hpp"
#include "small_tensor_kernels.hpp"
#include "snapshot_bench.hpp"
#include "telemetry_bench.hpp"
#include "origin_bench.hpp"
#include "recording_bench.hpp"
#include "backward_hook_bench.hpp"
#include "tensor_count_bench.hpp"
#include "training_thread_bench.hpp"
#include "trainer.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using keel::bench::median;
using keel::bench::naive_step;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The probe's per-step layout check on `model` and `optimizer` as the step runs it: their
// parameters, then the comparison with the plan. Median of `rounds` batches of 100, in us per
// check.
// The probe's layout check of every step (ParameterLayout::unchanged over parameter_sequence).
double layout_check_us(torch::nn::Module& model, torch::optim::Optimizer& optimizer, int rounds) {
  keel::probe::LibtorchModel trained(model);
  const keel::probe::LibtorchOptimizer adapter(optimizer);
  const keel::probe::NamedParams params = keel::probe::parameters_of(trained, &adapter).params;
  const keel::probe::ParameterLayout layout(params, keel::probe::parameter_sequence(trained, &adapter));
  std::vector<torch::Tensor> tensors;
  for (const auto& p : params) tensors.push_back(p.second);
  std::vector<const void*> sequence;
  std::vector<double> us;
  size_t changed = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < 100; ++i) {
      keel::probe::parameter_sequence(trained, &adapter, sequence);
      keel::probe::LayoutChange change;
      changed += !layout.unchanged(sequence, tensors, change);
    }
    us.push_back(ms_since(start) * 1000.0 / 100);
  }
  if (changed != 0) std::fprintf(stderr, "keel-bench-probe: the layout check saw a change in an unchanged model\n");
  return median(us);
}

// ResNet-50's BatchNorm2d layers by channel count (stem, then each stage's bottlenecks and
// downsample): 53 of them, 106 float buffers. Only the buffers matter here.
struct ResNet50NormsImpl : torch::nn::Module {
  ResNet50NormsImpl() {
    int n = 0;
    auto add = [&](int64_t channels) { register_module("bn" + std::to_string(n++), torch::nn::BatchNorm2d(channels)); };
    add(64);
    const int64_t widths[4] = {64, 128, 256, 512}, blocks[4] = {3, 4, 6, 3};
    for (int stage = 0; stage < 4; ++stage) {
      for (int64_t b = 0; b < blocks[stage]; ++b) {
        add(widths[stage]);
        add(widths[stage]);
        add(widths[stage] * 4);
      }
      add(widths[stage] * 4);   // the downsample's
    }
  }
};
TORCH_MODULE(ResNet50Norms);

// The probe's per-step buffer check as the step runs it: the model's float buffers listed and
// compared with the plan (WatchedBuffers::follow), then max |b| of each measured and read. Median of
// `rounds` batches of 100, in us per check.
double buffer_check_us(int rounds, size_t& buffers) {
  ResNet50Norms model;
  keel::probe::LibtorchModel trained(*model);
  const keel::probe::ModelBuffers planned = keel::probe::float_buffers_of(trained);
  buffers = planned.tensors.size();
  keel::probe::BufferReducer reducer(planned.tensors);
  std::vector<float> absmax;
  std::vector<double> us;
  size_t changed = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < 100; ++i) {
      changed += !keel::probe::float_buffers_of(trained).same_as(planned);
      reducer.enqueue();
      reducer.collect(absmax);
    }
    us.push_back(ms_since(start) * 1000.0 / 100);
  }
  if (changed != 0) std::fprintf(stderr, "keel-bench-probe: the buffer check saw a change in an unchanged model\n");
  return median(us);
}

void print_tensor_counts(const std::vector<keel::bench::TensorCountCost>& rows) {
  std::printf("per-tensor host cost (deep narrow models: Linear(16,16) x N/2, SGD, 1 thread; A/B interleaved)\n");
  std::printf("  %8s %6s %10s %10s %9s %9s %10s %10s %12s %12s\n", "tensors", "rounds", "plain ms", "probed ms", "A/B %",
              "A/A %", "probe us", "reduce us", "ns/tensor", "outside ns");
  for (const keel::bench::TensorCountCost& r : rows) {
    std::printf("  %8lld %6d %10.2f %10.2f %9.2f %9.2f %10.1f %10.1f %12.1f %12.1f\n", static_cast<long long>(r.tensors),
                r.rounds, r.plain_ms, r.probed_ms, r.overhead_pct, r.control_pct, r.probe_us, r.reduce_us,
                r.probe_ns_per_tensor, r.outside_ns_per_tensor);
  }
  std::printf("  (A/A: a second plain copy of the model against the first, the A/B's floor on this machine)\n");
  if (rows.size() >= 2) {
    double lo = rows[0].probe_ns_per_tensor, hi = lo;
    for (const auto& r : rows) {
      lo = std::min(lo, r.probe_ns_per_tensor);
      hi = std::max(hi, r.probe_ns_per_tensor);
    }
    std::printf("  per-tensor cost, largest over smallest: %.2fx (target <= 1.5x)\n", lo > 0 ? hi / lo : 0.0);
    // The plain step's own cost per tensor grows with the model too (its data leaves the
    // caches): the probe's time as a share of it shows whether the probe grows faster.
    double share_lo = 0, share_hi = 0;
    std::printf("  the probe's time as a share of the plain step:");
    for (const auto& r : rows) {
      const double share = r.plain_ms > 0 ? 100.0 * r.probe_us / (1000.0 * r.plain_ms) : 0.0;
      std::printf(" %.2f%% (%lld)", share, static_cast<long long>(r.tensors));
      share_lo = share_lo == 0 ? share : std::min(share_lo, share);
      share_hi = std::max(share_hi, share);
    }
    std::printf("; largest over smallest %.2fx\n", share_lo > 0 ? share_hi / share_lo : 0.0);
  }
  std::printf("  small gradients measured in backward or in the pass alone (measure_in_backward; unset, the default\n"
              "  is backward when they outgrow half the last-level cache):\n");
  std::printf("  %8s %9s %14s %14s %16s %16s\n", "tensors", "default", "A/B backward", "A/B pass", "probe us backward",
              "probe us pass");
  for (const keel::bench::TensorCountCost& r : rows) {
    const bool b = r.default_in_backward;
    std::printf("  %8lld %9s %13.2f%% %13.2f%% %16.1f %16.1f\n", static_cast<long long>(r.tensors),
                b ? "backward" : "pass", b ? r.overhead_pct : r.other_overhead_pct, b ? r.other_overhead_pct : r.overhead_pct,
                b ? r.probe_us : r.other_probe_us, b ? r.other_probe_us : r.probe_us);
  }
  std::printf("  where it goes, median ns per tensor (ProbeTiming's stages):\n");
  std::printf("  %8s %10s %10s %10s %12s %10s %10s %10s\n", "tensors", "begin", "layout", "grads", "(backward)", "update",
              "record", "end");
  for (const keel::bench::TensorCountCost& r : rows) {
    std::printf("  %8lld %10.1f %10.1f %10.1f %12.1f %10.1f %10.1f %10.1f\n", static_cast<long long>(r.tensors), r.begin_ns,
                r.layout_ns, r.grads_ns, r.backward_ns, r.update_ns, r.record_ns, r.end_ns);
  }
}

void print_snapshots(const keel::bench::SnapshotCost& s) {
  std::printf("rewind's snapshots (keel-demo's model, rewind_every %lld, %lld steps; docs/rewind.md)\n",
              static_cast<long long>(s.every), static_cast<long long>(s.steps));
  std::printf("%-44s %12.2f\n", "  median step, no snapshot due (ms)", s.step_ms);
  std::printf("%-44s %12.3f\n", "  a snapshot on the training thread (ms)", s.snapshot_ms);
  std::printf("%-44s %12.3f\n", "  amortised over rewind_every steps (%)", s.share_pct);
  if (!s.error.empty()) {
    std::printf("  a rewind: not measured: %s\n", s.error.c_str());
    return;
  }
  std::printf("%-44s %12.2f\n", "  the step that took a rewind (ms)", s.rewind_step_ms);
  std::printf("%-44s %12.3f\n", "  of which the rewind's pause (ms)", s.rewind_pause_ms);
}

void print_small_tensor_kernels(const std::vector<keel::bench::SmallTensorKernelCost>& rows) {
  std::printf("the fused kernels on one tensor in cache, median ns a call\n");
  std::printf("  %8s %12s %12s %12s\n", "elements", "grad stats", "sumsq", "snapshot");
  for (const keel::bench::SmallTensorKernelCost& r : rows) {
    std::printf("  %8lld %12.1f %12.1f %12.1f\n", static_cast<long long>(r.elements), r.grad_stats_ns, r.sumsq_ns,
                r.snapshot_ns);
  }
}

void print_backward_hooks(const keel::bench::BackwardHookCost& h) {
  std::printf("noting each gradient's arrival (deep narrow model, %lld tensors, no probe; %d rounds, interleaved)\n",
              static_cast<long long>(h.tensors), h.rounds);
  std::printf("  %-58s %9.2f ms\n", "plain step", h.plain_ms);
  std::printf("  %-58s %+8.2f %%\n", "a tensor hook per parameter (register_hook: keel before)", h.tensor_hooks_pct);
  std::printf("  %-58s %+8.2f %%\n", "a post hook per held accumulator (keel's BackwardOrder)", h.keel_hooks_pct);
  std::printf("  %-58s %+8.2f %%\n", "the accumulators held, no hooks", h.held_accumulators_pct);
  std::printf("  %-58s %+8.2f %%\n", "keel's hooks and the small gradients measured in them", h.measuring_hooks_pct);
}

void print_wide_wire(const keel::bench::WideWireCost& w) {
  std::printf("the wire at a mixture of experts' width (%lld tensors, %zu modules; %d steps of each, interleaved)\n",
              static_cast<long long>(w.tensors), w.modules, w.steps);
  std::printf("  %-48s %12.0f bytes  probe %9.1f us\n", "per layer every step (layer_detail_above 0)",
              w.per_layer_bytes_per_step, w.per_layer_probe_us);
  std::printf("  %-48s %12.0f bytes  probe %9.1f us\n", "defaults (per layer every 16th step, modules between)",
              w.rollup_bytes_per_step, w.rollup_probe_us);
  std::printf("  step record bytes, per layer over defaults: %.1fx\n",
              w.rollup_bytes_per_step > 0 ? w.per_layer_bytes_per_step / w.rollup_bytes_per_step : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  // The other end of the telemetry measurement (telemetry_bench.hpp), in a process of its own.
  if (argc == 4 && std::string(argv[1]) == keel::bench::kTelemetryReaderFlag) {
    return keel::bench::run_telemetry_reader(argv[2], std::string(argv[3]) == "curve");
  }
  CLI::App app{"keel-bench-probe: the keel probe's cost on keel-demo's model"};
  bool quick = false;
  int pairs = 0;
  int64_t reduce_mb = 64;
  app.add_flag("--quick", quick, "short run (30 rounds)");
  app.add_option("--pairs", pairs, "rounds of A/B/C steps (default 30 quick, 100 full)");
  app.add_option("--reduce-mb", reduce_mb, "gradient bytes for the bandwidth test")->capture_default_str();
  std::string dump_dir = "keel-bench-dumps";
  app.add_option("--dump-dir", dump_dir, "scratch directory for the dump throughput test")->capture_default_str();
  std::string record_dir = "keel-bench-runs";
  app.add_option("--record-dir", record_dir, "scratch directory for the recording test")->capture_default_str();
  std::vector<int64_t> tensor_counts = {42, 2000, 50000};
  app.add_option("--tensors", tensor_counts, "tensor counts of the deep narrow models (per-tensor cost)")
      ->capture_default_str();
  bool tensors_only = false;
  bool snapshots_only = false;
  int64_t rewind_every = 100;
  app.add_flag("--tensors-only", tensors_only, "measure the per-tensor cost and the wide model's wire alone");
  app.add_flag("--snapshots-only", snapshots_only, "measure rewind's snapshots and one rewind alone");
  app.add_option("--rewind-every", rewind_every, "steps between snapshots in the snapshot measure")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  int wide_blocks = 48, wide_experts = 512, wide_steps = 16;
  app.add_option("--wide-blocks", wide_blocks, "blocks of the wide (mixture of experts) model")->capture_default_str();
  app.add_option("--wide-experts", wide_experts, "experts per block (2 tensors each)")->capture_default_str();
  app.add_option("--wide-steps", wide_steps, "measured steps of the wide model (0: not measured)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (pairs <= 0) pairs = quick ? 30 : 100;
  if (snapshots_only) {
    print_snapshots(keel::bench::measure_snapshot_cost(rewind_every, std::max<int64_t>(3 * rewind_every, 3 * pairs)));
    return 0;
  }
  if (tensors_only) {
    print_tensor_counts(keel::bench::measure_tensor_counts(tensor_counts, pairs));
    print_backward_hooks(keel::bench::measure_backward_hooks(2000, 2 * pairs));
    print_small_tensor_kernels(keel::bench::measure_small_tensor_kernels({16, 256, 4096}, 200000));
    if (wide_steps > 0) print_wide_wire(keel::bench::measure_wide_wire(wide_blocks, wide_experts, wide_steps));
    return 0;
  }
  const int warmup = 5;

  keel::demo::TrainerConfig config;
  keel::demo::Trainer plain(config), probed(config), naive(config);
  keel::demo::Faults no_faults;
  keel::probe::ProbeOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.record_dir = record_dir;   // the defaults record: into the scratch directory
  keel::probe::Probe probe(*probed.model(), probed.optimizer(), options);
  std::vector<torch::Tensor> copies;

  std::vector<double> plain_ms, probe_ms, naive_ms, probe_us, outside_us, reduce_us;
  for (int round = 0; round < warmup + pairs; ++round) {
    const bool record = round >= warmup;
    for (int k = 0; k < 3; ++k) {
      const int mode = (round + k) % 3;   // rotate the order so no mode always runs first
      const auto start = Clock::now();
      if (mode == 0) {
        plain.schedule(round, no_faults);
        plain.forward_backward(nullptr, nullptr);
        plain.optimizer().step();
        if (record) plain_ms.push_back(ms_since(start));
      } else if (mode == 1) {
        probed.schedule(round, no_faults);
        auto loss = probed.forward_backward([&](const torch::Tensor& logits) { probe.watch("logits", logits); },
                                            nullptr);
        probe.step(loss);
        if (record) {
          probe_ms.push_back(ms_since(start));
          probe_us.push_back(probe.last_timing().probe_us);
          reduce_us.push_back(probe.last_timing().reduce_us);
          outside_us.push_back(probe.last_timing().probe_us - probe.last_timing().reduce_us);
        }
      } else {
        naive.schedule(round, no_faults);
        naive.forward_backward(nullptr, nullptr);
        naive_step(naive, copies);
        if (record) naive_ms.push_back(ms_since(start));
      }
    }
  }
  const double plain_med = median(plain_ms), probe_med = median(probe_ms), naive_med = median(naive_ms);
  const double overhead_pct = 100.0 * (probe_med - plain_med) / plain_med;
  const double naive_pct = 100.0 * (naive_med - plain_med) / plain_med;
  // The probe's own measured time as a share of the step: immune to the other modes' noise.
  const double self_pct = 100.0 * median(probe_us) / 1000.0 / plain_med;

  const auto bandwidth = keel::bench::measure_reduce_bandwidth(reduce_mb << 20, quick ? 7 : 21);
  const auto control = keel::bench::measure_control_overhead(pairs);
  const auto round_trip = keel::bench::measure_command_round_trip(10.0, quick ? 30 : 100);
  const auto dump = keel::bench::measure_dump_speed(dump_dir, quick ? 5 : 15);

  const double layout_us = layout_check_us(*plain.model(), plain.optimizer(), quick ? 11 : 31);
  size_t buffers = 0;
  const double buffers_us = buffer_check_us(quick ? 11 : 31, buffers);
  const std::vector<keel::bench::TrainingThreadCost> thread_costs = keel::bench::measure_training_thread(pairs);
  const keel::bench::OriginCost origin = keel::bench::measure_origin_cost(pairs);
  const keel::bench::RecordingCost recording = keel::bench::measure_recording_cost(pairs, record_dir);
  const std::vector<keel::bench::TensorCountCost> tensor_rows = keel::bench::measure_tensor_counts(tensor_counts, pairs);
  const keel::bench::WideWireCost wide =
      keel::bench::measure_wide_wire(wide_blocks, wide_experts, quick ? std::min(wide_steps, 8) : wide_steps);
  // keel-demo's 42 layers, and a deep model's 2,000.
  std::vector<keel::bench::TelemetryCost> telemetry;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  for (size_t layers : {size_t{42}, size_t{2000}}) {
    telemetry.push_back(keel::bench::measure_telemetry_cost(self, layers, quick ? 2000 : 5000, quick ? 3 : 7));
  }

  int64_t params = 0;
  for (const auto& p : plain.model()->parameters()) params += p.numel();
  std::printf("keel-bench-probe: keel-demo default model, %lld parameters, %d rounds (+%d warm-up)\n",
              static_cast<long long>(params), pairs, warmup);
  std::printf("%-44s %12s\n", "measure", "value");
  std::printf("%-44s %12.2f\n", "median step, no probe (ms)", plain_med);
  std::printf("%-44s %12.2f\n", "median step, keel probe (ms)", probe_med);
  std::printf("%-44s %12.2f\n", "median step, naive instrumentation (ms)", naive_med);
  std::printf("%-44s %12.2f\n", "probe overhead, A/B (%)", overhead_pct);
  std::printf("%-44s %12.2f\n", "probe's own time / step (%)", self_pct);
  std::printf("%-44s %12.2f\n", "naive overhead, A/B (%)", naive_pct);
  std::printf("%-44s %12.1f\n", "probe time per step, median (us)", median(probe_us));
  std::printf("%-44s %12.1f\n", "  of which reductions (us)", median(reduce_us));
  std::printf("%-44s %12.1f\n", "  training thread outside reductions (us)", median(outside_us));
  std::printf("%-44s %12.1f\n", "  layout check, per step (us)", layout_us);
  std::printf("%-44s %12.1f\n", ("buffer check, ResNet-50's " + std::to_string(buffers) + " BN buffers (us)").c_str(),
              buffers_us);
  std::printf("%-44s %12.3f\n", "  as a share of this model's step (%)", 100.0 * buffers_us / 1000.0 / plain_med);
  std::printf("%-44s %12.2f\n", "fused reduce, GB/s", bandwidth.reduce_gbps);
  std::printf("%-44s %12.2f\n", "memcpy, GB/s", bandwidth.memcpy_gbps);
  std::printf("%-44s %12.2f\n", "fused reduce / memcpy", bandwidth.ratio);
  std::printf("%-44s %12llu\n", "records dropped", static_cast<unsigned long long>(probe.dropped()));
  std::printf("%-44s %12.2f\n", "median step, ring + command socket (ms)", control.with_ms);
  std::printf("%-44s %12.2f\n", "median step, neither (ms)", control.without_ms);
  std::printf("%-44s %12.2f\n", "control overhead, A/B (%)", control.pct);
  std::printf("%-44s %12.1f\n", "command round trip p50 at 10 steps/s (ms)", round_trip.p50_ms);
  std::printf("%-44s %12.1f\n", "command round trip p99 (ms)", round_trip.p99_ms);
  std::printf("%-44s %12.1f\n", "command round trip max (ms)", round_trip.max_ms);
  std::printf("%-44s %12d\n", "command round trips measured", round_trip.samples);
  std::printf("%-44s %12.2f\n", "  boundary -> ack p50 (ms)", round_trip.after_boundary_p50_ms);
  std::printf("%-44s %12.2f\n", "  boundary -> ack p99 (ms)", round_trip.after_boundary_p99_ms);
  std::printf("%-44s %12.2f\n", "  boundary -> ack max (ms)", round_trip.after_boundary_max_ms);
  std::printf("%-44s %12.2f\n", "dump size (MB)", dump.bytes / 1e6);
  std::printf("%-44s %12.1f\n", "dump, capture on training thread (ms)", dump.capture_ms);
  std::printf("%-44s %12.1f\n", "dump throughput (MB/s)", dump.dump_mb_per_s);
  std::printf("%-44s %12.1f\n", "plain write + fsync of the same bytes (MB/s)", dump.write_mb_per_s);
  std::printf("%-44s %12.2f\n", "dump / plain write", dump.ratio);
  std::printf("the flight recorder (keel-demo's model, recording on vs off, %lld steps)\n",
              static_cast<long long>(recording.steps));
  std::printf("%-44s %12.2f\n", "  median step, recording on (ms)", recording.step_on_ms);
  std::printf("%-44s %12.2f\n", "  median step, recording off (ms)", recording.step_off_ms);
  std::printf("%-44s %12.2f\n", "  recording on over off, A/B (%)", recording.step_pct);
  std::printf("%-44s %12.1f\n", "  probe time per step, on (us)", recording.probe_on_us);
  std::printf("%-44s %12.1f\n", "  probe time per step, off (us)", recording.probe_off_us);
  std::printf("%-44s %12.3f\n", "  training thread, on - off / step (%)", recording.training_thread_pct);
  std::printf("%-44s %12llu\n", "  file bytes", static_cast<unsigned long long>(recording.file_bytes));
  std::printf("%-44s %12.2f\n", "  bytes on disk per layer-step (6 metrics)", recording.bytes_per_layer_step);
  std::printf("%-44s %12.2f\n", "  bytes on disk per sample (one metric)", recording.bytes_per_sample);
  std::printf("  bytes per layer-step, %d mantissa bits kept %9.2f\n", recording.rounded_mantissa_bits,
              recording.rounded_bytes_per_layer_step);
  std::printf("%-44s %12llu\n", "  messages the recorder dropped", static_cast<unsigned long long>(recording.dropped));
  std::printf("where a NaN was born: the closure form and its re-run (keel-demo's model)\n");
  std::printf("%-44s %12.2f\n", "  median step, no probe (ms)", origin.plain_ms);
  std::printf("%-44s %12.2f\n", "  median step, probe.step(loss) (ms)", origin.probe_ms);
  std::printf("%-44s %12.2f\n", "  median step, probe.step(closure) (ms)", origin.closure_ms);
  std::printf("%-44s %12.2f\n", "  closure form over probe.step(loss), A/B (%)", origin.closure_pct);
  std::printf("%-44s %12.1f\n", "  closure form's own time per step (us)", origin.closure_extra_us);
  std::printf("%-44s %12.2f\n", "  forward and backward, median (ms)", origin.forward_backward_ms);
  std::printf("%-44s %12.2f\n", "  an unsafe step's traced re-run (ms)", origin.rerun_ms);
  std::printf("%-44s %12.2f\n", "  re-run / forward and backward", origin.rerun_per_forward_backward);
  std::printf("training thread outside reductions, by configuration (us, median; reductions in brackets)\n");
  for (const keel::bench::TrainingThreadCost& t : thread_costs) {
    std::printf("  %-42s %12.1f  (%.1f)\n", t.configuration.c_str(), t.outside_us, t.reduce_us);
  }
  for (const keel::bench::TelemetryCost& t : telemetry) {
    const std::string of = "telemetry, " + std::to_string(t.layers) + " layers (" + std::to_string(t.record_bytes) + " B)";
    if (!t.error.empty()) {
      std::printf("%s: not measured: %s\n", of.c_str(), t.error.c_str());
      continue;
    }
    std::printf("%-44s\n", of.c_str());
    std::printf("%-44s %12.1f\n", "  process CPU per record, no keys (us)", t.plain_us_per_record);
    std::printf("%-44s %12.1f\n", "  process CPU per record, CURVE (us)", t.curve_us_per_record);
    std::printf("%-44s %12.1f\n", "  CURVE's cost per record (us)", t.curve_us_per_record - t.plain_us_per_record);
    std::printf("%-44s %12.3f\n", "  as a share of keel-demo's step (%)",
                100.0 * (t.curve_us_per_record - t.plain_us_per_record) / 1000.0 / plain_med);
  }
  print_tensor_counts(tensor_rows);
  print_snapshots(keel::bench::measure_snapshot_cost(rewind_every, std::max<int64_t>(3 * rewind_every, 3 * pairs)));
  print_backward_hooks(keel::bench::measure_backward_hooks(2000, 2 * pairs));
  if (wide.steps > 0) print_wide_wire(wide);
  std::printf(
      "{\"overhead_pct\":%.3f,\"probe_self_pct\":%.3f,\"naive_overhead_pct\":%.3f,\"reduce_vs_memcpy\":%.3f,"
      "\"train_thread_us\":%.1f,\"probe_us\":%.1f,\"step_ms_plain\":%.3f,\"step_ms_probe\":%.3f,"
      "\"step_ms_naive\":%.3f,\"reduce_gbps\":%.2f,\"memcpy_gbps\":%.2f,\"rounds\":%d,"
      "\"command_rtt_p50_ms\":%.2f,\"command_rtt_p99_ms\":%.2f,\"command_rtt_max_ms\":%.2f,"
      "\"command_boundary_to_ack_p99_ms\":%.2f,"
      "\"dump_vs_write\":%.3f,\"dump_mb_per_s\":%.1f,\"dump_capture_ms\":%.2f,\"control_overhead_pct\":%.3f,"
      "\"layout_check_us\":%.1f,\"buffer_check_us\":%.1f,\"telemetry_curve_us_per_record\":[%.1f,%.1f]}\n",
      overhead_pct, self_pct, naive_pct, bandwidth.ratio, median(outside_us), median(probe_us), plain_med,
      probe_med, naive_med, bandwidth.reduce_gbps, bandwidth.memcpy_gbps, pairs, round_trip.p50_ms,
      round_trip.p99_ms, round_trip.max_ms, round_trip.after_boundary_p99_ms, dump.ratio, dump.dump_mb_per_s, dump.capture_ms, control.pct,
      layout_us, buffers_us, telemetry[0].curve_us_per_record - telemetry[0].plain_us_per_record,
      telemetry[1].curve_us_per_record - telemetry[1].plain_us_per_record);
  return 0;
}
