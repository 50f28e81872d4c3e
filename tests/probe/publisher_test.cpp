// The publisher: its ring of recent step records (kept for backfill on late attach) is bounded
// to history_steps, oldest evicted first, every entry a decodable step payload, events not
// kept; a subscriber that stops reading does not take records from the others; and
// subscriptions are bounded in size and number.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <zmq.hpp>

#include "keel/wire/codec.hpp"
#include "transport/publisher.hpp"

namespace {

// Waits (at most 10 s) until `socket` has a message to read, without taking it.
bool wait_readable(zmq::socket_t& socket) {
  zmq::pollitem_t item{static_cast<void*>(socket), 0, ZMQ_POLLIN, 0};
  return zmq::poll(&item, 1, std::chrono::milliseconds(10000)) > 0;
}

}  // namespace

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
  std::vector<keel::probe::KeptMessage> history;
  for (int i = 0; i < 200; ++i) {
    history = publisher.history();
    if (!history.empty()) {
      const auto last = keel::wire::decode(history.back().second->data(), history.back().second->size());
      if (last.ok && std::get<keel::wire::StepRecord>(last.message).step == 7) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(history.size(), 5u);
  for (size_t i = 0; i < history.size(); ++i) {
    EXPECT_STREQ(history[i].first, keel::wire::kTopicStep);
    const auto decoded = keel::wire::decode(history[i].second->data(), history[i].second->size());
    ASSERT_TRUE(decoded.ok) << decoded.error;
    ASSERT_TRUE(std::holds_alternative<keel::wire::StepRecord>(decoded.message));
    EXPECT_EQ(std::get<keel::wire::StepRecord>(decoded.message).step, static_cast<int64_t>(3 + i));
  }
}

}  // namespace

namespace {

// A subscriber that stops reading must cost only itself: with ZMQ_XPUB_NODROP a full pipe
// refused every send for every subscriber, so one frozen dashboard starved the healthy ones
// (found by the fault harness, RELIABILITY.md). 24 KB records fill the frozen pipe within a
// few hundred messages; the reading subscriber must still get all.
TEST(PublisherFanOut, AStalledSubscriberDoesNotStarveAReadingOne) {
  keel::probe::PublisherOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  // Per-subscriber pipes of 64 records (1.5 MB): the stalled one still fills within a few
  // hundred, while the reader's is deep enough that a busy machine's I/O thread falling
  // behind for a moment does not overflow it (with 8, a loaded ASan run lost 23 of 1,500).
  options.send_high_water_mark = 64;
  options.history_steps = 0;
  keel::wire::RunDescription description;
  description.run_id = "fan-out-test";
  keel::probe::Publisher publisher(options, description);

  zmq::context_t context{1};
  zmq::socket_t stalled{context, zmq::socket_type::sub}, reader{context, zmq::socket_type::sub};
  // Only the stalled one has a tiny receive side; the reader keeps ZeroMQ's defaults (with one
  // as small it lost records of its own when the test thread was descheduled: 1,497 of 1,500
  // once under ASan).
  stalled.set(zmq::sockopt::rcvhwm, 8);
  stalled.set(zmq::sockopt::rcvbuf, 4096);
  for (auto* s : {&stalled, &reader}) {
    s->set(zmq::sockopt::linger, 0);
    s->set(zmq::sockopt::subscribe, "step");
    // The description a new subscription is sent says the publisher has read its subscribe
    // frames: the records that follow reach both.
    s->set(zmq::sockopt::subscribe, "run");
    s->connect(publisher.bound_endpoint());
  }
  ASSERT_TRUE(wait_readable(stalled) && wait_readable(reader)) << "no subscription went live";

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
      const auto* step = decoded.ok ? std::get_if<keel::wire::StepRecord>(&decoded.message) : nullptr;
      if (step == nullptr) continue;   // a description
      last_step = step->step;
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
  EXPECT_EQ(publisher.dropped(), 0u) << "the probe's own queue overflowed: not what this test is about";
  EXPECT_EQ(received, kRecords) << "the reading subscriber lost records to the stalled one";
  EXPECT_EQ(last_step, kRecords - 1);
}

}  // namespace

namespace {

// Every message a subscriber receives, in arrival order: topic and seq.
struct Received {
  std::string topic;
  uint64_t seq = 0;
  size_t layers = 0;   // a record's layer_count, a description's layers
};

std::vector<Received> receive_until_quiet(zmq::socket_t& socket, std::chrono::milliseconds quiet) {
  std::vector<Received> out;
  zmq::message_t topic, payload;
  socket.set(zmq::sockopt::rcvtimeo, static_cast<int>(quiet.count()));
  while (socket.recv(topic)) {
    if (!socket.recv(payload)) break;
    const auto decoded = keel::wire::decode(payload.data(), payload.size());
    if (!decoded.ok) continue;
    const uint64_t seq = std::visit([](const auto& m) { return m.seq; }, decoded.message);
    size_t layers = 0;
    if (const auto* record = std::get_if<keel::wire::StepRecord>(&decoded.message)) layers = record->layer_count;
    if (const auto* description = std::get_if<keel::wire::RunDescription>(&decoded.message)) {
      layers = description->layers.size();
    }
    out.push_back({topic.to_string(), seq, layers});
  }
  return out;
}

struct SeqTally {
  uint64_t gaps = 0, missing = 0, rewinds = 0;
};
SeqTally tally(const std::vector<Received>& received) {
  SeqTally t;
  for (size_t i = 1; i < received.size(); ++i) {
    const uint64_t prev = received[i - 1].seq, seq = received[i].seq;
    if (seq <= prev) {
      ++t.rewinds;
    } else if (seq != prev + 1) {
      ++t.gaps;
      t.missing += seq - prev - 1;
    }
  }
  return t;
}

// A publisher with a queue of `queue_capacity` records and no send limit, a subscriber to
// every topic whose subscription is live, and a one-layer record to publish.
struct SeqRig {
  explicit SeqRig(size_t queue_capacity, const std::string& run_id)
      : publisher(options(queue_capacity), described(run_id)) {
    subscriber.set(zmq::sockopt::linger, 0);
    subscriber.set(zmq::sockopt::rcvhwm, 0);
    subscriber.set(zmq::sockopt::subscribe, "");
    subscriber.connect(publisher.bound_endpoint());
    // Live once the description a new subscription is sent has arrived (it stays unread).
    EXPECT_TRUE(wait_readable(subscriber)) << "the subscription never went live";
    record.layer_count = 1;
    record.layer_values.assign(keel::wire::kLayerMetricCount, 0.5f);
  }
  static keel::probe::PublisherOptions options(size_t queue_capacity) {
    keel::probe::PublisherOptions o;
    o.endpoint = "tcp://127.0.0.1:*";
    o.send_high_water_mark = 0;
    o.queue_capacity = queue_capacity;
    return o;
  }
  static keel::wire::RunDescription described(const std::string& run_id) {
    keel::wire::RunDescription d;
    d.run_id = run_id;
    return d;
  }

  keel::probe::Publisher publisher;
  zmq::context_t context{1};
  zmq::socket_t subscriber{context, zmq::socket_type::sub};
  keel::wire::StepRecord record;
};

// PROTOCOL §5: seq rises by exactly one per message across topics, so a subscriber that gets
// the whole stream sees no gap and no rewind. The run description is (re)sent by the publisher
// thread while the training thread's records wait in the ring: its seq must follow theirs in
// send order. (When it was taken at the description's send time, records still queued went out
// after it with lower seqs: a dashboard attaching to a fast trainer counted a gap.)
TEST(PublisherSeq, DescriptionsSentBetweenQueuedRecordsKeepSeqInSendOrder) {
  SeqRig rig(8192, "seq-order-test");   // 4,000 records and 200 descriptions queued: none dropped
  keel::probe::Publisher& publisher = rig.publisher;
  keel::wire::StepRecord& record = rig.record;
  const keel::wire::RunDescription description = SeqRig::described("seq-order-test");
  int64_t step = 0;
  for (int burst = 0; burst < 200; ++burst) {
    for (int i = 0; i < 20; ++i) {
      record.step = step++;
      publisher.publish(record);
    }
    publisher.describe(description);   // queued amid the records; the thread also re-sends it
  }
  const std::vector<Received> received = receive_until_quiet(rig.subscriber, std::chrono::milliseconds(1000));
  ASSERT_EQ(publisher.dropped(), 0u);
  size_t steps = 0, descriptions = 0;
  for (const Received& r : received) {
    steps += r.topic == keel::wire::kTopicStep;
    descriptions += r.topic == keel::wire::kTopicRun;
  }
  EXPECT_EQ(steps, size_t(step));
  EXPECT_GT(descriptions, 1u);
  const SeqTally t = tally(received);
  EXPECT_EQ(t.gaps, 0u);
  EXPECT_EQ(t.rewinds, 0u);
}

// A record dropped because the ring was full still consumes its seq (PROTOCOL §5): the
// subscriber's gaps add up to exactly what the probe counted as dropped.
TEST(PublisherSeq, RecordsDroppedFromAFullRingShowAsGapsOfTheSameCount) {
  SeqRig rig(4, "seq-drop-test");
  keel::probe::Publisher& publisher = rig.publisher;
  keel::wire::StepRecord& record = rig.record;
  constexpr int64_t kSteps = 5000;
  for (int64_t step = 0; step < kSteps; ++step) {
    record.step = step;
    publisher.publish(record);
  }
  // One more after the ring has drained, so a drop at the very end is followed by a record.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  record.step = kSteps;
  publisher.publish(record);
  const std::vector<Received> received = receive_until_quiet(rig.subscriber, std::chrono::milliseconds(1000));
  ASSERT_GT(publisher.dropped(), 0u) << "a 4-slot ring kept up with 5,000 records: nothing tested";
  size_t steps = 0;
  for (const Received& r : received) steps += r.topic == keel::wire::kTopicStep;
  const SeqTally t = tally(received);
  EXPECT_EQ(t.rewinds, 0u);
  EXPECT_EQ(t.missing, publisher.dropped());
  EXPECT_EQ(steps + publisher.dropped(), size_t(kSteps + 1));
}

// Every record is read with the layers of the description it was published under (PROTOCOL
// §3.2), even when the ring is too full to take a new description, and whatever the thread
// re-sends meanwhile (to new subscribers, every describe_interval): the model here changes
// between one and two layers every 25 records, into a 4-slot ring that refuses most of them.
TEST(PublisherSeq, EveryRecordFollowsTheDescriptionOfItsOwnLayers) {
  keel::probe::PublisherOptions options = SeqRig::options(4);
  options.describe_interval = std::chrono::milliseconds(1);
  keel::probe::Publisher publisher(options, SeqRig::described("layers-order-test"));
  zmq::context_t context{1};
  zmq::socket_t subscriber{context, zmq::socket_type::sub};
  subscriber.set(zmq::sockopt::linger, 0);
  subscriber.set(zmq::sockopt::rcvhwm, 0);
  subscriber.set(zmq::sockopt::subscribe, "");
  subscriber.connect(publisher.bound_endpoint());
  ASSERT_TRUE(wait_readable(subscriber)) << "the subscription never went live";

  keel::wire::RunDescription description = SeqRig::described("layers-order-test");
  keel::wire::StepRecord record;
  int64_t step = 0;
  auto publish_under = [&](size_t layers, int records) {
    record.layer_count = static_cast<uint32_t>(layers);
    record.layer_values.assign(keel::wire::kLayerMetricCount * layers, 0.5f);
    for (int i = 0; i < records; ++i) {
      record.step = step++;
      publisher.publish(record);
    }
  };
  for (int change = 0; change < 400; ++change) {
    const size_t layers = change % 2 == 0 ? 2 : 1;
    description.layers.assign(layers, keel::wire::LayerInfo{});
    publisher.describe(description);
    publish_under(layers, 25);
  }
  // One more once the ring has drained: the end of the stream (the re-sends never stop).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int64_t last = step;
  publish_under(record.layer_count, 1);

  size_t described_layers = 0;   // the description the subscriber first got: no layers
  size_t records = 0, misread = 0;
  bool ended = false;
  zmq::message_t topic, payload;
  subscriber.set(zmq::sockopt::rcvtimeo, 5000);
  while (!ended && subscriber.recv(topic) && subscriber.recv(payload)) {
    const auto decoded = keel::wire::decode(payload.data(), payload.size());
    ASSERT_TRUE(decoded.ok) << decoded.error;
    if (const auto* d = std::get_if<keel::wire::RunDescription>(&decoded.message)) described_layers = d->layers.size();
    const auto* r = std::get_if<keel::wire::StepRecord>(&decoded.message);
    if (r == nullptr) continue;
    ++records;
    misread += r->layer_count != described_layers;
    ended = r->step == last;
  }
  ASSERT_TRUE(ended) << "the last record never arrived";
  ASSERT_GT(publisher.dropped(), 0u) << "a 4-slot ring kept up: nothing tested";
  EXPECT_EQ(misread, 0u) << "of " << records << " records, under a description of other layers";
}

}  // namespace

namespace {

// Waits until `reader` receives a run description (sent to every new subscriber).
bool receives_a_description(zmq::socket_t& reader, std::chrono::seconds within) {
  const auto end = std::chrono::steady_clock::now() + within;
  zmq::message_t topic, payload;
  while (std::chrono::steady_clock::now() < end) {
    zmq::pollitem_t item{static_cast<void*>(reader), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    while (reader.recv(topic, zmq::recv_flags::dontwait)) {
      if (!reader.recv(payload, zmq::recv_flags::dontwait)) continue;
      if (topic.to_string() == keel::wire::kTopicRun) return true;
    }
  }
  return false;
}

// Subscriptions cost the trainer memory (libzmq keeps each in a trie): more than the budget
// closes every connection, and healthy subscribers connect again and are served.
TEST(PublisherSubscriptions, MoreThanTheBudgetClosesEveryConnectionAndReadersComeBack) {
  keel::probe::PublisherOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.max_subscriptions = 64;
  options.describe_interval = std::chrono::milliseconds(60000);   // only new subscribers get one
  keel::wire::RunDescription description;
  description.run_id = "subscription-budget";
  keel::probe::Publisher publisher(options, description);

  zmq::context_t context{1};
  zmq::socket_t reader{context, zmq::socket_type::sub};
  reader.set(zmq::sockopt::linger, 0);
  reader.set(zmq::sockopt::subscribe, "");
  reader.connect(publisher.bound_endpoint());
  ASSERT_TRUE(receives_a_description(reader, std::chrono::seconds(10)));
  EXPECT_EQ(publisher.subscription_resets(), 0u);

  zmq::socket_t hostile{context, zmq::socket_type::sub};
  hostile.set(zmq::sockopt::linger, 0);
  for (int i = 0; i < 100; ++i) hostile.set(zmq::sockopt::subscribe, "topic-" + std::to_string(i));
  hostile.connect(publisher.bound_endpoint());
  for (int i = 0; i < 500 && publisher.subscription_resets() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(publisher.subscription_resets(), 1u);
  hostile.close();
  // The reader's connection was closed with the others; ZeroMQ connects it again. Only the
  // new connection can carry records published from now on.
  bool served = false;
  zmq::message_t topic, payload;
  for (int64_t step = 0; step < 1000 && !served; ++step) {
    keel::wire::StepRecord record;
    record.step = step;
    publisher.publish(record);
    zmq::pollitem_t item{static_cast<void*>(reader), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(10));
    while (reader.recv(topic, zmq::recv_flags::dontwait)) {
      if (reader.recv(payload, zmq::recv_flags::dontwait) && topic.to_string() == keel::wire::kTopicStep) served = true;
    }
  }
  EXPECT_TRUE(served) << "the reader was not served after the reset";
}

// Closed connections give their subscriptions back: dashboards attaching and leaving all day
// never add up to the budget.
TEST(PublisherSubscriptions, ClientsComingAndGoingDoNotAddUpToTheBudget) {
  keel::probe::PublisherOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  // A closed connection's subscriptions are given back when libzmq notices it closed, a little
  // later: a few connections may overlap, never 32.
  options.max_subscriptions = 64;
  options.describe_interval = std::chrono::milliseconds(60000);
  keel::wire::RunDescription description;
  description.run_id = "subscription-churn";
  keel::probe::Publisher publisher(options, description);

  zmq::context_t context{1};
  for (int i = 0; i < 250; ++i) {
    zmq::socket_t client{context, zmq::socket_type::sub};
    client.set(zmq::sockopt::linger, 0);
    client.set(zmq::sockopt::subscribe, keel::wire::kTopicRun);
    client.set(zmq::sockopt::subscribe, keel::wire::kTopicStep);
    client.connect(publisher.bound_endpoint());
    // Served means the publisher has taken its subscriptions.
    ASSERT_TRUE(receives_a_description(client, std::chrono::seconds(10))) << "client " << i;
  }
  EXPECT_EQ(publisher.subscription_resets(), 0u) << "500 subscriptions of closed connections were still counted";
}

// A subscription longer than the limit closes only that connection.
TEST(PublisherSubscriptions, AnOversizedSubscriptionIsRefusedAndOthersAreServed) {
  keel::probe::PublisherOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.max_subscription_bytes = 64;
  options.describe_interval = std::chrono::milliseconds(100);
  keel::wire::RunDescription description;
  description.run_id = "subscription-size";
  keel::probe::Publisher publisher(options, description);

  zmq::context_t context{1};
  zmq::socket_t oversized{context, zmq::socket_type::sub}, reader{context, zmq::socket_type::sub};
  for (auto* s : {&oversized, &reader}) s->set(zmq::sockopt::linger, 0);
  // "run" followed by 100 more bytes: it would match the description if it were accepted.
  oversized.set(zmq::sockopt::subscribe, std::string(keel::wire::kTopicRun) + std::string(100, 'x'));
  oversized.set(zmq::sockopt::subscribe, "");
  oversized.connect(publisher.bound_endpoint());
  reader.set(zmq::sockopt::subscribe, "");
  reader.connect(publisher.bound_endpoint());
  EXPECT_TRUE(receives_a_description(reader, std::chrono::seconds(10)));
  // The oversized subscription was sent first on its connection, so that connection is
  // dropped before its "" subscription is stored, each time it reconnects.
  EXPECT_FALSE(receives_a_description(oversized, std::chrono::seconds(1)));
  EXPECT_EQ(publisher.subscription_resets(), 0u);
}

}  // namespace
