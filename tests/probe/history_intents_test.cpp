// HistoryIntents: the history requests a probe's clients announced (a backfill:<token>
// subscription) and have not sent yet, which the probe's end waits for. Each token is awaited
// once, until its request comes or its connection closes; and the publisher feeds it from real
// subscriptions, without describing the run to them as to a new reader.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "keel/wire/codec.hpp"
#include "transport/history_intents.hpp"
#include "transport/publisher.hpp"

// Named: the tests build as one unity translation unit, where anonymous namespaces merge.
namespace history_intents_test {

using keel::probe::HistoryIntents;

TEST(HistoryIntents, AnAnnouncedRequestIsAwaitedUntilItComes) {
  HistoryIntents intents;
  EXPECT_EQ(intents.awaited(), 0u);
  intents.announced("a1");
  intents.announced("b2");
  EXPECT_EQ(intents.awaited(), 2u);
  intents.asked("a1");
  EXPECT_EQ(intents.awaited(), 1u);
  intents.asked("someone-else");   // a request nobody announced changes nothing awaited
  EXPECT_EQ(intents.awaited(), 1u);
  intents.withdrawn("b2");   // its client went away before asking
  EXPECT_EQ(intents.awaited(), 0u);
}

TEST(HistoryIntents, ARequestThatOvertookItsSubscriptionOrARepeatedSubscriptionAwaitsNothing) {
  HistoryIntents intents;
  intents.asked("early");
  intents.announced("early");
  EXPECT_EQ(intents.awaited(), 0u) << "the request came before the publisher read the subscription";
  intents.announced("again");
  intents.asked("again");
  intents.announced("again");   // the same client, reconnected: it does not ask twice
  EXPECT_EQ(intents.awaited(), 0u);
}

TEST(HistoryIntents, EmptyOrOversizedTokensAndTooManyAreNotAwaited) {
  HistoryIntents intents;
  intents.announced("");
  intents.announced(std::string(HistoryIntents::kMaxTokenBytes + 1, 'x'));
  EXPECT_EQ(intents.awaited(), 0u);
  for (size_t i = 0; i < HistoryIntents::kMaxTokens + 10; ++i) intents.announced("t" + std::to_string(i));
  EXPECT_EQ(intents.awaited(), HistoryIntents::kMaxTokens);
}

// Waits (at most 10 s) until `done` holds.
template <class Condition>
bool eventually(Condition done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

TEST(HistoryIntents, ThePublisherAnnouncesABackfillSubscriptionAndWithdrawsItWhenItsClientLeaves) {
  keel::probe::PublisherOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.describe_interval = std::chrono::milliseconds(60000);   // only new readers get one
  options.history_intents = std::make_shared<HistoryIntents>();
  keel::wire::RunDescription description;
  description.run_id = "intents";
  keel::probe::Publisher publisher(options, description);

  zmq::context_t context{1};
  auto client = std::make_unique<zmq::socket_t>(context, zmq::socket_type::sub);
  client->set(zmq::sockopt::linger, 0);
  client->set(zmq::sockopt::subscribe, std::string(keel::wire::kHistoryIntentPrefix) + "c0ffee");
  client->connect(publisher.bound_endpoint());
  EXPECT_TRUE(eventually([&] { return options.history_intents->awaited() == 1; }));
  // Not a reader: the run is not described again for it (a description would not even reach
  // it), beyond the one the publisher sends as it starts.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(publisher.sent(), 1u);
  client.reset();
  EXPECT_TRUE(eventually([&] { return options.history_intents->awaited() == 0; }));
}

}  // namespace history_intents_test
