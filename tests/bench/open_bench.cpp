// keel-bench-open: what opening a large recording costs the dashboard (issue 29's target: a
// 1,000,000-step x 150-layer recording shows its first picture within 2 s, in at most twice
// the file's size of memory).
//
// Writes a synthetic run with the wire's own RecordingWriter (zstd, the flight recorder's
// chunking): a description, one step record per step with six metrics per layer drifting as a
// training run's do (a random walk, so the float32 noise compresses as real telemetry does),
// a spike event every 50,000 steps and a NaN gradient (with its first_nonfinite event) at 70%
// of the run. The file is kept for the next run (--file) and written only when missing.
// Then, in a fresh process of its own (so its memory is the opening's alone), it opens the
// file as `keel --open` does (core/recording_loader.hpp, Model::adopt_runs()) and prints:
//   - first picture: from the request to the sample adopted into the app's model and one
//     frame of the heatmap and three plots built over the whole run (headless, no GL);
//   - whole: until the whole file is adopted;
//   - peak memory of the process over its memory before opening, and over the file's size.
// The last line is one JSON object.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>
#include <sys/wait.h>

#include "app_bench_frame.hpp"
#include "core/recording_loader.hpp"
#include "keel/wire/codec.hpp"
#include "keel/wire/recording_writer.hpp"
#include "model/model.hpp"

namespace {

namespace fs = std::filesystem;
namespace wire = keel::wire;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// kB of a /proc/self/status field (VmRSS, VmHWM).
long status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') return std::atol(line.c_str() + n + 1);
  }
  return -1;
}

// xorshift64*: fast, and the same run on every machine.
struct Random {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  double uniform() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return static_cast<double>((state * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
  }
};

bool write_recording(const std::string& path, int64_t steps, uint32_t layers) {
  std::string error;
  wire::RecordingWriterOptions options;
  if (!wire::recording_codec_available(options.codec)) options.codec = wire::recording::Codec::none;
  auto writer = wire::RecordingWriter::create(path, options, error);
  if (!writer) {
    std::fprintf(stderr, "keel-bench-open: %s\n", error.c_str());
    return false;
  }
  const auto append = [&](wire::recording::FrameKind kind, int64_t step, const wire::Message& message) {
    const std::vector<char> payload = wire::encode(message);
    return writer->append(kind, step, payload.data(), payload.size());
  };
  uint64_t seq = 1;
  wire::RunDescription run;
  run.run_id = "bench-open";
  run.seq = seq++;
  run.world_size = 1;
  run.start_unix_ms = 1795000000000;
  run.keel_version = "bench";
  run.device = "cpu";
  for (uint32_t l = 0; l < layers; ++l) {
    run.layers.push_back({"blocks." + std::to_string(l / 6) + ".layer" + std::to_string(l % 6) + ".weight",
                          {64, 64}, 4096, "float32"});
  }
  append(wire::recording::FrameKind::run, -1, run);

  const int64_t nan_step = steps * 7 / 10;
  Random random;
  std::vector<float> level(size_t{layers} * wire::kLayerMetricCount);
  for (size_t i = 0; i < level.size(); ++i) level[i] = static_cast<float>(0.01 + random.uniform());
  wire::StepRecord record;
  record.run = run.run_id;
  record.layer_count = layers;
  record.layer_values.resize(level.size());
  for (int64_t s = 0; s < steps; ++s) {
    for (size_t i = 0; i < level.size(); ++i) {
      level[i] *= static_cast<float>(1.0 + 0.02 * (random.uniform() - 0.5));
      record.layer_values[i] = level[i];
    }
    if (s == nan_step) record.layer_values[0] = std::nanf("");
    record.step = s;
    record.seq = seq++;
    record.loss = 4.0 / (1.0 + 1e-5 * static_cast<double>(s)) + 0.1 * random.uniform();
    record.lr = 3e-4;
    record.grad_norm = 1.0 + random.uniform();
    record.step_time_us = 20000 + 1000 * random.uniform();
    record.probe_us = 300 + 50 * random.uniform();
    record.stamp_unix_ns = 1795000000000000000 + s * 20000000;
    if (!append(wire::recording::FrameKind::step, s, record)) break;
    if (s == nan_step || (s > 0 && s % 50000 == 0)) {
      wire::Event event;
      event.run = run.run_id;
      event.seq = seq++;
      event.step = s;
      event.kind = s == nan_step ? "first_nonfinite" : "spike";
      event.layer = run.layers[0].name;
      event.detail = s == nan_step ? "non-finite gradient values" : "grad norm spike";
      append(wire::recording::FrameKind::event, s, event);
    }
    if (s % 4096 == 4095 && !writer->flush()) break;
  }
  if (!writer->close()) {
    std::fprintf(stderr, "keel-bench-open: %s\n", writer->error().c_str());
    return false;
  }
  return true;
}

// Opens `path` as `keel --open` does and prints the figures; the process's own measurement.
int measure(const std::string& path, int64_t steps, uint32_t layers) {
  const long rss_before_kb = status_kb("VmRSS");
  const uint64_t file_bytes = fs::file_size(path);
  keel::app::Model app;
  keel::bench::HeadlessUi ui(1600, 1000);
  keel::app::RecordingLoaderOptions options;
  options.model = app.config();
  const Clock::time_point asked = Clock::now();
  keel::app::RecordingLoader loader(options);
  loader.open({path});
  double first_secs = -1, whole_secs = -1, frame_ms = 0;
  int64_t first_steps_shown = 0, first_first = 0, first_last = 0;
  std::vector<keel::app::LoadedRecording> loaded;
  while (whole_secs < 0 && seconds_since(asked) < 3600) {
    loaded.clear();
    loader.take(loaded);
    for (keel::app::LoadedRecording& l : loaded) {
      app.adopt_runs(std::move(*l.model));
      if (first_secs < 0) {
        const Clock::time_point frame_start = Clock::now();
        keel::bench::time_views_frame(ui, app, 1);
        frame_ms = seconds_since(frame_start) * 1e3;
        first_secs = seconds_since(asked);
        const keel::app::RunModel& run = app.run(0);
        first_first = run.first_step();
        first_last = run.last_step();
        first_steps_shown = static_cast<int64_t>(run.counters().steps_stored);
      }
      if (l.whole) whole_secs = seconds_since(asked);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::vector<keel::app::RecordingState> states = loader.states();
  const long hwm_kb = status_kb("VmHWM");
  const double grown = static_cast<double>(hwm_kb - rss_before_kb) * 1024.0;
  const keel::app::RunModel& run = app.run(0);
  std::printf("opening it (`keel --open`: the loader's thread, Model::adopt_runs, one headless frame)\n");
  std::printf("%-52s %12.2f\n", "  first picture, request to frame built (s)", first_secs);
  std::printf("%-52s %12lld\n", "    steps in it (sampled)", static_cast<long long>(first_steps_shown));
  std::printf("%-52s %7lld to %lld\n", "    step range shown", static_cast<long long>(first_first),
              static_cast<long long>(first_last));
  std::printf("%-52s %12lld\n", "    one step record in (stride)", static_cast<long long>(states[0].sample_stride));
  std::printf("%-52s %12.1f\n", "    the frame over the whole run (ms, wall)", frame_ms);
  std::printf("%-52s %12.2f\n", "  whole file adopted (s)", whole_secs);
  std::printf("%-52s %12llu\n", "    steps stored", static_cast<unsigned long long>(run.counters().steps_stored));
  std::printf("%-52s %12.1f\n", "    layer-samples per second",
              whole_secs > 0 ? static_cast<double>(steps) * layers * wire::kLayerMetricCount / whole_secs : 0.0);
  std::printf("%-52s %12.1f\n", "  peak memory over before opening (MB)", grown / 1e6);
  std::printf("%-52s %12.3f\n", "    over the file's size (x)", grown / static_cast<double>(file_bytes));
  std::printf("%-52s %12.1f\n", "  the model's own bytes (MB)", static_cast<double>(app.bytes_used()) / 1e6);
  std::printf(
      "{\"bench\":\"keel-bench-open\",\"steps\":%lld,\"layers\":%u,\"file_bytes\":%llu,\"first_picture_s\":%.3f,"
      "\"first_picture_steps\":%lld,\"whole_s\":%.3f,\"peak_over_file\":%.4f,\"model_bytes\":%zu}\n",
      static_cast<long long>(steps), layers, static_cast<unsigned long long>(file_bytes), first_secs,
      static_cast<long long>(first_steps_shown), whole_secs, grown / static_cast<double>(file_bytes), app.bytes_used());
  return first_secs >= 0 && whole_secs >= 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"keel-bench-open: what opening a large recording costs the dashboard"};
  int64_t steps = 1000000;
  uint32_t layers = 150;
  std::string file;
  std::string measure_only;
  cli.add_option("--steps", steps, "steps in the synthetic run")->capture_default_str()->check(CLI::Range(int64_t{1000}, int64_t{100000000}));
  cli.add_option("--layers", layers, "layers in the synthetic run")->capture_default_str()->check(CLI::Range(1u, 100000u));
  cli.add_option("--file", file, "the recording (written when missing; default: in the temp directory)");
  cli.add_option("--measure", measure_only, "(internal) open this file and print the figures")->group("");
  CLI11_PARSE(cli, argc, argv);
  if (!measure_only.empty()) return measure(measure_only, steps, layers);

  if (file.empty()) {
    file = (fs::temp_directory_path() /
            ("keel-bench-open-" + std::to_string(steps) + "x" + std::to_string(layers) + ".keelrec")).string();
  }
  std::printf("keel-bench-open: %lld steps x %u layers x %d metrics\n", static_cast<long long>(steps), layers,
              wire::kLayerMetricCount);
  if (!fs::exists(file)) {
    const Clock::time_point start = Clock::now();
    const std::string partial = file + ".partial";
    fs::remove(partial);
    if (!write_recording(partial, steps, layers)) return 1;
    fs::rename(partial, file);
    std::printf("%-52s %12.1f\n", "writing it (s)", seconds_since(start));
  } else {
    std::printf("using the recording already written at %s\n", file.c_str());
  }
  const uint64_t bytes = fs::file_size(file);
  std::printf("%-52s %12llu\n", "file bytes", static_cast<unsigned long long>(bytes));
  std::printf("%-52s %12.2f\n", "  bytes per layer-step (6 metrics)",
              static_cast<double>(bytes) / (static_cast<double>(steps) * layers));
  std::fflush(stdout);

  // A process of its own, so its peak memory is the opening's alone.
  const pid_t child = ::fork();
  if (child == 0) {
    const std::string s = std::to_string(steps), l = std::to_string(layers);
    ::execl("/proc/self/exe", argv[0], "--measure", file.c_str(), "--steps", s.c_str(), "--layers", l.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
