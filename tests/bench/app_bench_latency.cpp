// Step-to-pixel measurement behind keel-bench-app; see app_bench_latency.hpp.

#include "app_bench_latency.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <chrono>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <zmq.hpp>

#include "app_bench_data.hpp"
#include "app_bench_stats.hpp"
#include "core/app_core.hpp"
#include "keel/wire/codec.hpp"
#include "ui/dashboard.hpp"
#include "ui/frame_pacer.hpp"

namespace keel::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The probe re-sends its description every few seconds; until the first one arrives the
// subscription may not be live yet (PUB drops what it sends before that), so it is repeated.
constexpr std::chrono::milliseconds kDescribeEvery{50};
// After publishing ends, frames continue this long for the last steps to arrive.
constexpr std::chrono::seconds kDrainGrace{5};
// Steps published before the measured ones, one a millisecond and not measured: more than the
// 400 steps a follow-live view spans by default, so every measured frame draws a full view,
// as it does in a run that has been going for a while (a view still filling up is cheaper).
constexpr int kBacklogSteps = 1000;
constexpr std::chrono::milliseconds kBacklogEvery{1};
// Time for the UI to ingest the backlog before the first measured step.
constexpr std::chrono::seconds kBacklogSettle{2};

// The platform wait of a UI with no window: sleeps until woken or the time is up. In the app
// this is the Window's GLFW event wait; with no input events the two wait alike.
class SleepWait final : public app::ui::EventWait {
 public:
  void wait(double max_secs) override {
    std::unique_lock<std::mutex> lock(mutex_);
    woken_.wait_for(lock, std::chrono::duration<double>(max_secs), [this] { return signalled_; });
    signalled_ = false;
  }
  void wake() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      signalled_ = true;
    }
    woken_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable woken_;
  bool signalled_ = false;
};

int64_t unix_ns_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send(zmq::socket_t& socket, const wire::Message& message, std::vector<char>& payload) {
  wire::encode(message, payload);
  const std::string topic = wire::topic_of(message);
  (void)socket.send(zmq::buffer(topic), zmq::send_flags::sndmore);
  (void)socket.send(zmq::buffer(payload), zmq::send_flags::none);
}

}  // namespace

LatencyResult measure_step_to_pixel(HeadlessUi& ui, int layer_count, double steps_per_s, double seconds) {
  LatencyResult result;
  result.steps_published = int(steps_per_s * seconds);

  // Bound here so the Receiver can connect at once; used only by the publisher thread after.
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::pub};
  socket.set(zmq::sockopt::linger, 0);
  socket.bind("tcp://127.0.0.1:*");
  const std::string endpoint = socket.get(zmq::sockopt::last_endpoint);

  std::atomic<bool> described{false};
  std::atomic<bool> stop{false};
  std::thread publisher([&] {
    SyntheticRun run(layer_count, 7);
    wire::Message description = run.description();
    wire::Message message = wire::StepRecord{};
    wire::StepRecord& record = std::get<wire::StepRecord>(message);
    std::vector<char> payload;
    while (!described.load() && !stop.load()) {
      send(socket, description, payload);
      std::this_thread::sleep_for(kDescribeEvery);
    }
    for (int step = 0; step < kBacklogSteps && !stop.load(); ++step) {
      run.fill(step, record);
      record.stamp_unix_ns = unix_ns_now();
      send(socket, message, payload);
      std::this_thread::sleep_for(kBacklogEvery);
    }
    std::this_thread::sleep_for(kBacklogSettle);
    const auto start = Clock::now();
    const auto period = std::chrono::duration<double>(1.0 / steps_per_s);
    for (int i = 0; i < result.steps_published && !stop.load(); ++i) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(period * i));
      run.fill(kBacklogSteps + i, record);
      record.stamp_unix_ns = unix_ns_now();
      send(socket, message, payload);
    }
  });

  std::vector<double> latency_ms, queued_ms, frame_cpu_ms, interval_ms;
  {
    // The app's loop (core/main.cpp): the same pacer, receiver hook and frame work.
    SleepWait platform;
    app::ui::FramePacer pacer(platform);
    app::AppCoreOptions core_options;
    core_options.receiver.on_data = [&pacer] { pacer.notify_data(); };
    // This publisher has no command socket: a late-attach history request would hold the live
    // stream for the backfill timeout (2 s) and put the first steps' latency in the p99.
    core_options.receiver.backfill = false;
    app::AppCore core({endpoint}, core_options);
    app::ui::Dashboard dashboard;
    dashboard.request_select(SyntheticRun(layer_count, 7).layer_name(layer_count / 2));
    const auto give_up = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(seconds + 60.0));
    Clock::time_point last_frame_start{};
    Clock::time_point last_step_seen = Clock::now();
    while (Clock::now() < give_up && int(latency_ms.size()) < result.steps_published) {
      if (!latency_ms.empty() && Clock::now() - last_step_seen > kDrainGrace) break;
      pacer.wait_for_next_frame();
      const Clock::time_point frame_start = Clock::now();
      const int64_t frame_start_ns = unix_ns_now();
      if (last_frame_start != Clock::time_point{}) {
        interval_ms.push_back(std::chrono::duration<double, std::milli>(frame_start - last_frame_start).count());
      }
      last_frame_start = frame_start;
      const double cpu_ms = ui.frame([&] { core.frame(dashboard); });
      const int64_t drawn_ns = unix_ns_now();
      bool drew_step = false;
      for (const wire::Message& message : core.ingested()) {
        const auto* step = std::get_if<wire::StepRecord>(&message);
        if (!step || step->step < kBacklogSteps) continue;
        latency_ms.push_back(double(drawn_ns - step->stamp_unix_ns) * 1e-6);
        queued_ms.push_back(double(frame_start_ns - step->stamp_unix_ns) * 1e-6);
        drew_step = true;
      }
      if (drew_step) {
        frame_cpu_ms.push_back(cpu_ms);
        last_step_seen = Clock::now();
      }
      if (core.model().run_count() > 0) described.store(true);
    }
    result.queue_dropped = core.input().queue_dropped;
  }
  stop.store(true);
  publisher.join();

  result.steps_drawn = int(latency_ms.size());
  result.p50_ms = percentile(latency_ms, 0.5);
  result.p99_ms = percentile(latency_ms, 0.99);
  result.max_ms = percentile(latency_ms, 1.0);
  result.queued_p50_ms = percentile(queued_ms, 0.5);
  result.frame_cpu_ms_median = percentile(frame_cpu_ms, 0.5);
  result.frame_interval_ms = percentile(interval_ms, 0.5);
  return result;
}

}  // namespace keel::bench
