// The publisher: its ring of recent step records (kept for backfill on late attach) is bounded
// to history_steps, oldest evicted first, every entry a decodable step payload, events not
// kept; and a subscriber that stops reading does not take records from the others.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <zmq.hpp>

#include "keel/wire/codec.hpp"
#include "publisher.hpp"

namespace {

TEST(PublisherHistory, KeepsTheMostRecentStepRecordsOnly) {
  keel::probe::PublisherOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.history_steps = 5;
  keel::wire::RunDescription description;
  description.run_id = "history-test";
  keel::probe::Publisher publisher(options, description);

  for (int64_t step = 0; step < 8; ++step) {
    keel::wire::StepRecord record;
    record.step = step;
    record.layer_count = 1;
    record.layer_values.assign(keel::wire::kLayerMetricCount, 0.5f);
    publisher.publish(record);
    keel::wire::Event event;
    event.step = step;
    event.kind = "skip";
    publisher.publish(event);
  }
  // The ring is filled by the publisher thread; wait until it has seen the last record.
  std::vector<keel::probe::Publisher::Payload> history;
  for (int i = 0; i < 200; ++i) {
    history = publisher.history();
    if (!history.empty()) {
      const auto last = keel::wire::decode(history.back()->data(), history.back()->size());
      if (last.ok && std::get<keel::wire::StepRecord>(last.message).step == 7) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(history.size(), 5u);
  for (size_t i = 0; i < history.size(); ++i) {
    const auto decoded = keel::wire::decode(history[i]->data(), history[i]->size());
    ASSERT_TRUE(decoded.ok) << decoded.error;
    ASSERT_TRUE(std::holds_alternative<keel::wire::StepRecord>(decoded.message));
    EXPECT_EQ(std::get<keel::wire::StepRecord>(decoded.message).step, static_cast<int64_t>(3 + i));
  }
}

}  // namespace

namespace {

// A subscriber that stops reading must cost only itself: with ZMQ_XPUB_NODROP a full pipe
// refused every send for every subscriber, so one frozen dashboard starved the healthy ones
// (found by the fault harness, RELIABILITY.md). A small high-water mark and 24 KB records fill
// the frozen pipe within a few hundred messages; the reading subscriber must still get all.
TEST(PublisherFanOut, AStalledSubscriberDoesNotStarveAReadingOne) {
  keel::probe::PublisherOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.send_high_water_mark = 8;
  options.history_steps = 0;
  keel::wire::RunDescription description;
  description.run_id = "fan-out-test";
  keel::probe::Publisher publisher(options, description);

  zmq::context_t context{1};
  zmq::socket_t stalled{context, zmq::socket_type::sub}, reader{context, zmq::socket_type::sub};
  for (auto* s : {&stalled, &reader}) {
    s->set(zmq::sockopt::linger, 0);
    s->set(zmq::sockopt::rcvhwm, 8);
    s->set(zmq::sockopt::rcvbuf, 4096);
    s->set(zmq::sockopt::subscribe, "step");
    s->connect(publisher.bound_endpoint());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));   // both subscriptions are live

  constexpr int64_t kRecords = 1500;   // ~36 MB: far past what the frozen pipe and kernel hold
  keel::wire::StepRecord record;
  record.layer_count = 1000;
  record.layer_values.assign(size_t{record.layer_count} * keel::wire::kLayerMetricCount, 0.25f);
  int64_t received = 0, last_step = -1;
  zmq::message_t frame;
  auto drain = [&] {
    while (reader.recv(frame, zmq::recv_flags::dontwait)) {
      if (frame.more()) continue;
      const auto decoded = keel::wire::decode(frame.data(), frame.size());
      if (!decoded.ok) continue;
      last_step = std::get<keel::wire::StepRecord>(decoded.message).step;
      ++received;
    }
  };
  for (int64_t step = 0; step < kRecords; ++step) {
    record.step = step;
    publisher.publish(record);
    // Paced so the reader keeps up; the stalled one never reads.
    for (int i = 0; i < 4; ++i) {
      drain();
      std::this_thread::sleep_for(std::chrono::microseconds(250));
    }
  }
  for (int i = 0; i < 200 && last_step != kRecords - 1; ++i) {
    drain();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(received, kRecords) << "the reading subscriber lost records to the stalled one";
  EXPECT_EQ(last_step, kRecords - 1);
}

}  // namespace
