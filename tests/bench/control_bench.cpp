#include "control_bench.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include <zmq.hpp>

#include "dump/checkpoint_capture.hpp"
#include "dump/checkpoint_writer.hpp"
#include "front/libtorch_model.hpp"
#include "front/libtorch_optimizer.hpp"
#include "keel/probe/probe.hpp"
#include "keel/wire/codec.hpp"
#include "dump/remove_tree.hpp"
#include "trainer.hpp"
#include "users_key_client.hpp"

namespace keel::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// One training step of keel-demo's model through the probe; `at_boundary` runs just before
// probe.step(), where the probe applies commands.
void probed_step(keel::demo::Trainer& trainer, keel::probe::Probe& probe, int64_t step,
                 const std::function<void()>& at_boundary = {}) {
  trainer.schedule(step, keel::demo::Faults{});
  auto loss = trainer.forward_backward([&](const torch::Tensor& logits) { probe.watch("logits", logits); }, nullptr);
  if (at_boundary) at_boundary();
  probe.step(loss);
}

// Waits for the ack of command `id`; false on timeout. `step` gets the step it took effect at.
bool await_ack(zmq::socket_t& socket, uint64_t id, std::chrono::milliseconds timeout, int64_t* step) {
  const auto deadline = Clock::now() + timeout;
  zmq::message_t frame;
  while (Clock::now() < deadline) {
    zmq::pollitem_t item{static_cast<void*>(socket), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(10));
    std::vector<zmq::message_t> frames;
    while (socket.recv(frame, zmq::recv_flags::dontwait)) {
      const bool more = frame.more();
      frames.push_back(std::move(frame));
      if (!more) break;
    }
    if (frames.size() != 2) continue;
    const auto decoded = wire::decode(frames[1].data(), frames[1].size());
    const auto* ack = decoded.ok ? std::get_if<wire::Ack>(&decoded.message) : nullptr;
    if (ack != nullptr && ack->id == id) {
      *step = ack->step;
      return ack->ok;
    }
  }
  return false;
}

// write + fsync of `bytes` into a new file, as a plain checkpoint writer would.
void plain_write(const std::filesystem::path& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

double median_of(std::vector<double> values) { return percentile_of(std::move(values), 0.5); }

double percentile_of(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t at = std::min(values.size() - 1, static_cast<size_t>(fraction * static_cast<double>(values.size())));
  return values[at];
}

RoundTrip measure_command_round_trip(double steps_per_s, int samples) {
  keel::demo::Trainer trainer{keel::demo::TrainerConfig{}};
  keel::probe::ProbeOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.record_dir = "";   // recording_bench.cpp measures the recorder
  keel::probe::Probe probe(*trainer.model(), trainer.optimizer(), options);
  const auto interval = std::chrono::duration<double>(1.0 / steps_per_s);

  // When each step reached its boundary (probe.step, where commands are applied), so that a
  // round trip splits into the wait for the boundary (the step clock's) and what follows it
  // (keel's: applying, acknowledging, the socket).
  std::mutex boundaries_mutex;
  std::vector<Clock::time_point> boundaries;
  std::atomic<bool> stop{false};
  std::thread training([&] {
    const auto start = Clock::now();
    for (int64_t step = 0; !stop.load(); ++step) {
      std::this_thread::sleep_until(start + step * interval);
      probed_step(trainer, probe, step, [&] {
        std::lock_guard<std::mutex> lock(boundaries_mutex);
        boundaries.push_back(Clock::now());
      });
    }
  });

  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::dealer};
  socket.set(zmq::sockopt::linger, 0);
  keel::test::present_users_key(socket);
  socket.connect(probe.bound_command_endpoint());
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> phase(0.0, 1.0);
  RoundTrip result;
  result.step_interval_ms = 1000.0 / steps_per_s;
  std::vector<double> rtts, after_boundary;
  for (int i = 0; i < samples + 3; ++i) {
    // A random phase against the step clock, as a user's click would have.
    std::this_thread::sleep_for(interval * (0.5 + phase(rng)));
    wire::Command command;
    command.rank = -1;
    command.id = static_cast<uint64_t>(i + 1);
    command.kind = "policy";
    command.policy = "skip_nonfinite";
    command.enable = true;
    const std::vector<char> payload = wire::encode(command);
    const auto sent = Clock::now();
    socket.send(zmq::buffer(std::string_view(wire::kTopicCommand)), zmq::send_flags::sndmore);
    socket.send(zmq::buffer(payload), zmq::send_flags::none);
    int64_t step = -1;
    const bool acked = await_ack(socket, command.id, std::chrono::milliseconds(2000), &step);
    const auto received = Clock::now();
    // The first few warm up the connection (TCP handshake, ZeroMQ greeting).
    if (!acked || i < 3) continue;
    rtts.push_back(ms_between(sent, received));
    std::lock_guard<std::mutex> lock(boundaries_mutex);
    if (step >= 0 && size_t(step) < boundaries.size() && boundaries[size_t(step)] >= sent) {
      after_boundary.push_back(ms_between(boundaries[size_t(step)], received));
    }
  }
  stop.store(true);
  training.join();
  result.samples = static_cast<int>(rtts.size());
  result.p50_ms = percentile_of(rtts, 0.5);
  result.p99_ms = percentile_of(rtts, 0.99);
  result.max_ms = rtts.empty() ? 0 : *std::max_element(rtts.begin(), rtts.end());
  result.after_boundary_samples = static_cast<int>(after_boundary.size());
  result.after_boundary_p50_ms = percentile_of(after_boundary, 0.5);
  result.after_boundary_p99_ms = percentile_of(after_boundary, 0.99);
  result.after_boundary_max_ms =
      after_boundary.empty() ? 0 : *std::max_element(after_boundary.begin(), after_boundary.end());
  return result;
}

DumpSpeed measure_dump_speed(const std::string& dir, int repeats) {
  namespace fs = std::filesystem;
  keel::demo::Trainer trainer{keel::demo::TrainerConfig{}};
  keel::probe::ProbeOptions options;
  options.endpoint = "";
  options.record_dir = "";
  keel::probe::Probe probe(*trainer.model(), trainer.optimizer(), options);
  for (int64_t step = 0; step < 3; ++step) probed_step(trainer, probe, step);   // AdamW state exists
  fs::create_directories(dir);

  std::vector<double> dump_ms, write_ms, capture_ms;
  double bytes = 0;
  for (int i = 0; i < repeats; ++i) {
    keel::probe::DumpReason why;
    why.step = i;
    why.reason = "bench";
    const auto start = Clock::now();
    keel::probe::CheckpointJob job;
    job.dir = dir;
    job.name = keel::probe::checkpoint_name(why);
    keel::probe::LibtorchModel model(*trainer.model());
    keel::probe::LibtorchOptimizer optimizer(trainer.optimizer());
    job.files = keel::probe::capture_checkpoint(model, optimizer, probe.description(), {}, why);
    const auto captured = Clock::now();
    const auto result = keel::probe::write_checkpoint(job);
    const auto written = Clock::now();
    if (!result.ok) continue;
    std::string same_bytes;
    for (const auto& f : job.files) same_bytes += f.bytes;
    const auto plain_start = Clock::now();
    plain_write(fs::path(dir) / "plain.bin", same_bytes);
    write_ms.push_back(ms_between(plain_start, Clock::now()));
    dump_ms.push_back(ms_between(start, written));
    capture_ms.push_back(ms_between(start, captured));
    bytes = static_cast<double>(result.bytes);
    keel::probe::remove_tree(result.path);   // not fs::remove_all: remove_tree.hpp says why
    fs::remove(fs::path(dir) / "plain.bin");
  }
  DumpSpeed speed;
  speed.bytes = bytes;
  speed.capture_ms = median_of(capture_ms);
  const double dump = median_of(dump_ms), write = median_of(write_ms);
  if (dump > 0 && write > 0) {
    speed.dump_mb_per_s = bytes / 1e6 / (dump / 1000.0);
    speed.write_mb_per_s = bytes / 1e6 / (write / 1000.0);
    speed.ratio = speed.dump_mb_per_s / speed.write_mb_per_s;
  }
  return speed;
}

ControlOverhead measure_control_overhead(int rounds) {
  keel::demo::TrainerConfig config;
  keel::demo::Trainer with_trainer(config), without_trainer(config);
  keel::probe::ProbeOptions with_control;
  with_control.endpoint = "tcp://127.0.0.1:*";
  with_control.record_dir = "";   // the ring and the command socket alone
  keel::probe::ProbeOptions without_control = with_control;
  without_control.history_steps = 0;
  without_control.accept_commands = false;
  keel::probe::Probe with_probe(*with_trainer.model(), with_trainer.optimizer(), with_control);
  keel::probe::Probe without_probe(*without_trainer.model(), without_trainer.optimizer(), without_control);
  std::vector<double> with_ms, without_ms;
  const int warmup = 5;
  for (int round = 0; round < warmup + rounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      const bool with = (round + k) % 2 == 0;   // alternate which runs first
      const auto start = Clock::now();
      probed_step(with ? with_trainer : without_trainer, with ? with_probe : without_probe, round);
      if (round >= warmup) (with ? with_ms : without_ms).push_back(ms_between(start, Clock::now()));
    }
  }
  ControlOverhead overhead;
  overhead.with_ms = median_of(with_ms);
  overhead.without_ms = median_of(without_ms);
  overhead.pct = 100.0 * (overhead.with_ms - overhead.without_ms) / overhead.without_ms;
  return overhead;
}

}  // namespace keel::bench
