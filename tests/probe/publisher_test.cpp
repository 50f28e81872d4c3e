// The publisher's ring of recent step records (kept for backfill on late attach): bounded to
// history_steps, oldest evicted first, every entry a decodable step payload; events are not kept.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

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
