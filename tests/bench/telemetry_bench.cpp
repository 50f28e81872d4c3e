#include "telemetry_bench.hpp"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "keel/wire/codec.hpp"
#include "keel/wire/user_keys.hpp"
#include "median.hpp"
#include "transport/publisher.hpp"
#include "users_key_client.hpp"

extern char** environ;

namespace keel::bench {
namespace {

double process_cpu_us() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto us = [](const timeval& t) { return t.tv_sec * 1e6 + t.tv_usec; };
  return us(usage.ru_utime) + us(usage.ru_stime);
}

// The reader process, stopped (SIGTERM) and reaped when this goes out of scope.
class Reader {
 public:
  Reader(const std::string& self, const std::string& endpoint, bool curve) {
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::vector<std::string> args{self, kTelemetryReaderFlag, endpoint, curve ? "curve" : "plain"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, self.c_str(), &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_ = fds[0];
  }
  ~Reader() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }
  // Whether it said "ready" within timeout_ms.
  bool ready(int timeout_ms) {
    std::string said;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (pid_ > 0 && std::chrono::steady_clock::now() < until) {
      pollfd item{out_, POLLIN, 0};
      if (poll(&item, 1, 50) <= 0) continue;
      char buffer[64];
      const ssize_t got = read(out_, buffer, sizeof buffer);
      if (got <= 0) return false;
      said.append(buffer, static_cast<size_t>(got));
      if (said.find("ready") != std::string::npos) return true;
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

wire::RunDescription description_of(size_t layers) {
  wire::RunDescription run;
  run.run_id = "telemetry-bench";
  for (size_t i = 0; i < layers; ++i) run.layers.push_back({"layers." + std::to_string(i) + ".weight", {16, 16}, 256, "float32"});
  return run;
}

wire::StepRecord record_of(size_t layers) {
  wire::StepRecord record;
  record.run = "telemetry-bench";
  record.layer_count = static_cast<uint32_t>(layers);
  record.layer_values.resize(layers * wire::kLayerMetricCount);
  for (size_t i = 0; i < record.layer_values.size(); ++i) record.layer_values[i] = 1.0f + 1e-3f * static_cast<float>(i);
  record.loss = 2.5;
  record.grad_norm = 1.25;
  return record;
}

// Process CPU per record of one mode; -1 when the reader never attached.
double publish_round(const std::string& self, size_t layers, int records, bool curve) {
  probe::PublisherOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.history_steps = 0;   // the ring for late clients is not what is measured
  if (curve) {
    const wire::CurveKeyPair own = wire::user_key_pair();
    options.secret_key = own.secret_key;
    options.allowed_client_keys = {own.public_key};
  }
  probe::Publisher publisher(options, description_of(layers));
  Reader reader(self, publisher.bound_endpoint(), curve);
  if (!reader.ready(20000)) return -1;
  wire::StepRecord record = record_of(layers);
  const uint64_t sent_before = publisher.sent();
  const double start = process_cpu_us();
  for (int i = 0; i < records; ++i) {
    record.step = i;
    // Paced so the ring (256) never refuses one: a dropped record would be cheaper.
    while (static_cast<int64_t>(i) - static_cast<int64_t>(publisher.sent() - sent_before) > 128) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    publisher.publish(record);
  }
  while (publisher.sent() - sent_before < static_cast<uint64_t>(records)) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // What ZeroMQ's I/O thread still has queued is sealed and written within a moment.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return (process_cpu_us() - start) / records;
}

}  // namespace

TelemetryCost measure_telemetry_cost(const std::string& self, size_t layers, int records, int rounds) {
  TelemetryCost cost;
  cost.layers = layers;
  cost.records = records;
  cost.record_bytes = wire::encode(record_of(layers)).size();
  std::vector<double> plain, curve;
  for (int round = 0; round < rounds; ++round) {
    // Alternating which goes first, so neither always pays for a cold start.
    for (int k = 0; k < 2; ++k) {
      const bool with_curve = (round + k) % 2 == 1;
      const double us = publish_round(self, layers, records, with_curve);
      if (us < 0) {
        cost.error = std::string("the ") + (with_curve ? "CURVE" : "plain") + " reader never attached";
        return cost;
      }
      (with_curve ? curve : plain).push_back(us);
    }
  }
  cost.plain_us_per_record = median(plain);
  cost.curve_us_per_record = median(curve);
  return cost;
}

int run_telemetry_reader(const std::string& endpoint, bool curve) {
  zmq::context_t context(1);
  zmq::socket_t socket(context, zmq::socket_type::sub);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::rcvhwm, 0);
  socket.set(zmq::sockopt::subscribe, "");
  if (curve) keel::test::present_users_key(socket);
  socket.connect(endpoint);
  zmq::message_t frame;
  bool told = false;
  while (socket.recv(frame)) {
    if (!told) {
      std::printf("ready\n");
      std::fflush(stdout);
      told = true;
    }
  }
  return 0;
}

}  // namespace keel::bench
