// libFuzzer target: the dashboard's receive path. A payload from the network is decoded as
// Subscriber::receive does, and a message that decodes is handed to the model as the UI
// thread's drain does (after a run description, so step records meet named layers, and
// twice, so a repeated step takes the path of a duplicate). Beyond "no crash, no over-read"
// it checks two promises: a rejected payload comes with an error sentence, and a payload that
// decodes survives a re-encode (the decoder accepts nothing that the encoder then writes
// differently or cannot read back).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "keel/wire/codec.hpp"
#include "model/model.hpp"

namespace {

[[noreturn]] void broken(const char* promise) {
  std::fprintf(stderr, "fuzz_decode: %s\n", promise);
  std::abort();
}

keel::wire::RunDescription known_run() {
  keel::wire::RunDescription run;
  run.run_id = "fuzz";
  run.layers = {{"a.weight", {4, 4}, 16, "float32"}, {"a.bias", {4}, 4, "float32"},
                {"b.weight", {2, 4}, 8, "float32"}};
  run.watches = {"logits"};
  return run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace keel;
  const wire::DecodeResult result = wire::decode(data, size);
  if (!result.ok) {
    if (result.error.empty()) broken("rejected without an error sentence");
    return 0;
  }
  const std::vector<char> again = wire::encode(result.message);
  const wire::DecodeResult back = wire::decode(again.data(), again.size());
  if (!back.ok) broken("decoded, but its re-encoding does not decode");
  if (wire::encode(back.message) != again) broken("re-encoding changes on a second round trip");

  // Small series so one input costs microseconds, not a 32 KiB window per layer.
  app::ModelConfig config;
  config.recent_steps = 16;
  config.archive_buckets = 8;
  config.max_events = 4;
  config.max_acks = 4;
  app::Model model(config);
  static const wire::RunDescription kRun = known_run();
  model.ingest(kRun);
  model.ingest(result.message);
  model.ingest(result.message);
  if (model.counters().messages != 3) broken("the model lost count of its messages");
  return 0;
}
