// The model changes after the probe attached (issue 12, item 2): cast to another type, a
// parameter replaced or added, weights written between steps. The probe notices at the next
// step, plans its layers again, re-sends the run description (in order with the records) and
// says so in a "layout_changed" event. It never keeps measuring a stale handle, reading memory
// the model no longer has, or reusing a copy of weights that were written since.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "transport/command_server.hpp"
#include "keel/probe/grad_scaler.hpp"
#include "keel/probe/probe.hpp"
#include "keel/wire/codec.hpp"
#include "quiet_options.hpp"
#include "reference_stats.hpp"
#include "two_layer_net.hpp"
#include "users_key_client.hpp"

namespace {

using keel::probe::Probe;
using keel::test::close_rel;
using keel::test::backward;
using keel::test::TwoLayer;
using keel::wire::LayerMetric;

using keel::test::quiet;

const keel::wire::Event* find_event(const Probe& probe, const std::string& kind) {
  for (const auto& e : probe.last_events()) {
    if (e.kind == kind) return &e;
  }
  return nullptr;
}

std::string event_kinds(const Probe& probe) {
  std::string kinds;
  for (const auto& e : probe.last_events()) kinds += e.kind + ": " + e.detail + "\n";
  return kinds;
}

// The layer of that name in the probe's current description.
std::optional<uint32_t> layer_of(const Probe& probe, const std::string& name) {
  const auto& layers = probe.description().layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].name == name) return static_cast<uint32_t>(i);
  }
  return std::nullopt;
}

double recorded(const Probe& probe, LayerMetric metric, const std::string& name) {
  const auto layer = layer_of(probe, name);
  if (!layer) {
    ADD_FAILURE() << name << " is not in the description";
    return 0;
  }
  return probe.last_record().layer_value(metric, *layer);
}

TEST(LayoutChange, ACastAfterAttachIsMeasuredInItsNewTypeFromTheNextStep) {
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  Probe probe(*net, opt, quiet());
  backward(net, opt);
  probe.step(torch::tensor(1.0));

  net->to(torch::kBFloat16);
  backward(net, opt, torch::kBFloat16);
  std::vector<double> expected;
  for (const auto& p : net->named_parameters()) expected.push_back(keel::test::reference_norm(p.value().grad()));
  EXPECT_TRUE(probe.step(torch::tensor(1.0)).applied);

  EXPECT_EQ(probe.last_record().probe_errors, 0u) << event_kinds(probe);
  const auto named = net->named_parameters();
  for (size_t i = 0; i < named.size(); ++i) {
    EXPECT_TRUE(close_rel(recorded(probe, LayerMetric::kGradNorm, named[i].key()), expected[i], 1e-6)) << named[i].key();
  }
  for (const auto& layer : probe.description().layers) EXPECT_EQ(layer.dtype, "bfloat16") << layer.name;
  const auto* changed = find_event(probe, "layout_changed");
  ASSERT_TRUE(changed) << event_kinds(probe);
  EXPECT_NE(changed->detail.find("float32 to bfloat16"), std::string::npos) << changed->detail;

  // Planned once: the next step is an ordinary one.
  backward(net, opt, torch::kBFloat16);
  probe.step(torch::tensor(1.0));
  EXPECT_FALSE(find_event(probe, "layout_changed")) << event_kinds(probe);
  EXPECT_EQ(probe.last_record().probe_errors, 0u) << event_kinds(probe);
}

// A Linear, then a child holding one scalar gain: the gain is the last layer planned, so a
// change to it is the last thing the gradient walk finds.
struct GainImpl : torch::nn::Module {
  GainImpl() { gain = register_parameter("gain", torch::ones({})); }
  torch::Tensor gain;
};
TORCH_MODULE(Gain);
struct GainedLinearImpl : torch::nn::Module {
  GainedLinearImpl() {
    fc = register_module("fc", torch::nn::Linear(5, 3));
    head = register_module("head", Gain());
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc->forward(x) * head->gain; }
  torch::nn::Linear fc{nullptr};
  Gain head{nullptr};
};
TORCH_MODULE(GainedLinear);

// On the CPU each tensor's type and shape are checked on the gradient walk's way to it
// (LayoutCheckInWalk), and a loss scaler's unscale writes the gradients in place in the same
// pass. A tensor reshaped between steps, found last, must stop the walk before anything was
// unscaled: the layers are planned again and every gradient is divided by the scale once.
TEST(LayoutChange, ATensorReshapedBetweenStepsIsPlannedAgainAndEveryGradientUnscaledOnce) {
  torch::manual_seed(0);
  GainedLinear net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  Probe probe(*net, opt, quiet());
  keel::probe::GradScalerOptions so;
  so.init_scale = 1024;
  keel::probe::GradScaler scaler(so);
  probe.use_scaler(&scaler);
  const auto scaled_backward = [&](double scale) {
    torch::manual_seed(1);
    opt.zero_grad();
    (net->forward(torch::randn({4, 5})).pow(2).mean() * scale).backward();
  };
  scaled_backward(scaler.scale_value());
  ASSERT_TRUE(probe.step(torch::tensor(1.0)).applied);

  {
    torch::NoGradGuard no_grad;
    net->head->gain.set_data(torch::full({1}, 0.5));   // [] -> [1]: broadcast alike
  }
  scaled_backward(1.0);
  std::vector<torch::Tensor> expected, before;
  for (const auto& p : net->parameters()) {
    expected.push_back(p.grad().clone());
    before.push_back(p.detach().clone());
  }
  scaled_backward(scaler.scale_value());
  EXPECT_TRUE(probe.step(torch::tensor(1.0)).applied) << event_kinds(probe);

  EXPECT_EQ(probe.last_record().probe_errors, 0u) << event_kinds(probe);
  const auto* changed = find_event(probe, "layout_changed");
  ASSERT_TRUE(changed) << event_kinds(probe);
  EXPECT_NE(changed->detail.find("head.gain reshaped from [] to [1]"), std::string::npos) << changed->detail;
  const auto named = net->named_parameters();
  ASSERT_EQ(named.size(), expected.size());
  for (size_t i = 0; i < named.size(); ++i) {
    const torch::Tensor& p = named[i].value();
    EXPECT_TRUE(torch::allclose(p.grad(), expected[i], 1e-5, 1e-7))
        << named[i].key() << " unscaled by " << (expected[i].abs().sum() / p.grad().abs().sum()).item<double>() << "x";
    EXPECT_TRUE(torch::allclose(p.detach(), before[i] - 0.1 * expected[i], 1e-5, 1e-7)) << named[i].key();
    EXPECT_TRUE(close_rel(recorded(probe, LayerMetric::kGradNorm, named[i].key()), keel::test::reference_norm(expected[i]), 1e-5))
        << named[i].key();
  }

  // Planned once: the next step is an ordinary one.
  scaled_backward(scaler.scale_value());
  EXPECT_TRUE(probe.step(torch::tensor(1.0)).applied);
  EXPECT_FALSE(find_event(probe, "layout_changed")) << event_kinds(probe);
}

// The user swaps fc1 for a new Linear (a new head for fine-tuning) and gives the optimizer its
// parameters. The probe's handles to the old ones still had last step's gradients: it
// reported those, for every step after.
TEST(LayoutChange, AReplacedParameterIsMeasuredInsteadOfItsStaleHandle) {
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  Probe probe(*net, opt, quiet());
  backward(net, opt);
  probe.step(torch::tensor(1.0));

  net->fc1 = net->replace_module("fc1", torch::nn::Linear(5, 8));
  opt.param_groups()[0].params()[0] = net->fc1->weight;
  opt.param_groups()[0].params()[1] = net->fc1->bias;
  backward(net, opt);
  const double expected = keel::test::reference_norm(net->fc1->weight.grad());
  const double weight_norm = keel::test::reference_norm(net->fc1->weight);   // before the update
  probe.step(torch::tensor(1.0));

  EXPECT_TRUE(close_rel(recorded(probe, LayerMetric::kGradNorm, "fc1.weight"), expected, 1e-6));
  EXPECT_TRUE(close_rel(recorded(probe, LayerMetric::kParamNorm, "fc1.weight"), weight_norm, 1e-5));
  const auto* changed = find_event(probe, "layout_changed");
  ASSERT_TRUE(changed) << event_kinds(probe);
  EXPECT_NE(changed->detail.find("fc1.weight, fc1.bias replaced"), std::string::npos) << changed->detail;
}

TEST(LayoutChange, AnAddedParameterBecomesALayerOfTheRecordAndTheDescription) {
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  Probe probe(*net, opt, quiet());
  const std::string run_id = probe.description().run_id;
  backward(net, opt);
  probe.step(torch::tensor(1.0));

  auto temperature = net->register_parameter("temperature", torch::ones({1}) * 2);
  opt.zero_grad();
  (net->forward(torch::randn({4, 5})) * temperature).pow(2).mean().backward();
  const double expected = keel::test::reference_norm(temperature.grad());
  probe.step(torch::tensor(1.0));

  EXPECT_EQ(probe.last_record().layer_count, 5u);
  ASSERT_EQ(probe.description().layers.size(), 5u);
  EXPECT_EQ(probe.description().run_id, run_id) << "the same run, re-described";
  EXPECT_TRUE(close_rel(recorded(probe, LayerMetric::kGradNorm, "temperature"), expected, 1e-6));
  EXPECT_TRUE(close_rel(recorded(probe, LayerMetric::kGradNorm, "fc2.bias"),
                        keel::test::reference_norm(net->fc2->bias.grad()), 1e-6));
  const auto* changed = find_event(probe, "layout_changed");
  ASSERT_TRUE(changed) << event_kinds(probe);
  EXPECT_NE(changed->detail.find("temperature added"), std::string::npos) << changed->detail;
}

// Weights the user writes between steps (a rescale, a checkpoint loaded in place, an EMA swap
// with set_data) are not the copy the probe kept from its last update pass: param_norm and
// update_ratio are measured on what the weights are now.
TEST(LayoutChange, WeightsWrittenBetweenStepsAreMeasuredAfresh) {
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-2));
  Probe probe(*net, opt, quiet());
  for (int i = 0; i < 2; ++i) {
    backward(net, opt);
    probe.step(torch::tensor(1.0));
  }
  {
    torch::NoGradGuard no_grad;
    net->fc1->weight.mul_(3);                                   // in place: same storage
    net->fc2->weight.set_data(net->fc2->weight.detach() * 5);   // another storage, same layout
  }
  backward(net, opt);
  const auto fc1_before = net->fc1->weight.detach().clone();
  const auto fc2_before = net->fc2->weight.detach().clone();
  probe.step(torch::tensor(1.0));

  EXPECT_TRUE(close_rel(recorded(probe, LayerMetric::kParamNorm, "fc1.weight"), keel::test::reference_norm(fc1_before), 1e-5));
  EXPECT_TRUE(close_rel(recorded(probe, LayerMetric::kParamNorm, "fc2.weight"), keel::test::reference_norm(fc2_before), 1e-5));
  EXPECT_TRUE(close_rel(recorded(probe, LayerMetric::kUpdateRatio, "fc1.weight"),
                        keel::test::reference_update_ratio(fc1_before, net->fc1->weight), 1e-4));
  EXPECT_TRUE(close_rel(recorded(probe, LayerMetric::kUpdateRatio, "fc2.weight"),
                        keel::test::reference_update_ratio(fc2_before, net->fc2->weight), 1e-4));
  EXPECT_FALSE(find_event(probe, "layout_changed")) << "the same layers, planned as they were: " << event_kinds(probe);
}

// set_data may give a parameter a view that is not dense (a slice of a larger tensor, here
// every other column) with the same shape, type and device: the layers stand, but the fused
// CPU kernels read a contiguous run of elements and would measure the columns in between.
// Such a weight is measured by the generic path instead, on its own elements.
TEST(LayoutChange, AWeightSetToAStridedViewIsMeasuredOnItsOwnElements) {
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  Probe probe(*net, opt, quiet());
  backward(net, opt);
  probe.step(torch::tensor(1.0));
  const auto wide = torch::randn({8, 10}) * 100;   // the columns skipped are far larger
  {
    torch::NoGradGuard no_grad;
    net->fc1->weight.set_data(wide.index({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)}));
  }
  ASSERT_FALSE(net->fc1->weight.is_contiguous());
  for (int i = 0; i < 2; ++i) {
    backward(net, opt);
    const auto before = net->fc1->weight.detach().clone();
    probe.step(torch::tensor(1.0));
    EXPECT_TRUE(close_rel(recorded(probe, LayerMetric::kParamNorm, "fc1.weight"), keel::test::reference_norm(before), 1e-5))
        << "step " << i << ": " << recorded(probe, LayerMetric::kParamNorm, "fc1.weight") << " vs "
        << keel::test::reference_norm(before);
    EXPECT_TRUE(close_rel(recorded(probe, LayerMetric::kUpdateRatio, "fc1.weight"),
                          keel::test::reference_update_ratio(before, net->fc1->weight), 1e-4))
        << "step " << i;
  }
}

// A subscriber reads the new description before the first record of the new layout: the
// description travels in order with the records, not beside them.
TEST(LayoutChange, TheNewDescriptionReachesSubscribersBeforeTheRecordsItDescribes) {
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::ProbeOptions options = quiet();
  options.endpoint = "tcp://127.0.0.1:*";
  options.accept_commands = false;
  options.describe_interval_secs = 60;   // only the change (and the new subscriber) sends one
  Probe probe(*net, opt, options);

  zmq::context_t context(1);
  zmq::socket_t sub(context, zmq::socket_type::sub);
  sub.set(zmq::sockopt::linger, 0);
  sub.set(zmq::sockopt::subscribe, "");
  keel::test::present_users_key(sub);
  sub.connect(probe.bound_endpoint());
  // The description a new subscriber gets says the subscription is live.
  auto receive = [&sub](std::string& topic, keel::wire::Message& message) {
    zmq::pollitem_t item{static_cast<void*>(sub), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(5000)) == 0) return false;
    zmq::message_t frame;
    if (!sub.recv(frame)) return false;
    topic = frame.to_string();
    if (!sub.recv(frame)) return false;
    auto decoded = keel::wire::decode(frame.data(), frame.size());
    if (!decoded.ok) return false;
    message = decoded.message;
    return true;
  };
  std::string topic;
  keel::wire::Message message;
  ASSERT_TRUE(receive(topic, message));
  ASSERT_EQ(topic, "run");

  for (int step = 0; step < 6; ++step) {
    if (step == 3) net->register_parameter("temperature", torch::ones({1}));
    backward(net, opt);
    probe.step(torch::tensor(1.0));
  }
  size_t described_layers = std::get<keel::wire::RunDescription>(message).layers.size();
  int records = 0;
  while (records < 6 && receive(topic, message)) {
    if (const auto* d = std::get_if<keel::wire::RunDescription>(&message)) described_layers = d->layers.size();
    if (const auto* r = std::get_if<keel::wire::StepRecord>(&message)) {
      EXPECT_EQ(r->layer_count, described_layers) << "step " << r->step;
      EXPECT_EQ(r->layer_count, r->step < 3 ? 4u : 5u) << "step " << r->step;
      ++records;
    }
  }
  EXPECT_EQ(records, 6);
}

// A history reply that spans a change (a late dashboard's backfill) says which layers each of
// its records has: the description the first record was published under comes first, and the
// new one sits between the records in its place.
TEST(LayoutChange, AHistoryReplyAcrossAChangeCarriesEachRecordsDescription) {
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  keel::probe::ProbeOptions options = quiet();
  options.endpoint = "tcp://127.0.0.1:*";
  options.history_steps = 16;
  Probe probe(*net, opt, options);
  for (int step = 0; step < 6; ++step) {
    if (step == 3) net->register_parameter("temperature", torch::ones({1}));
    backward(net, opt);
    probe.step(torch::tensor(1.0));
  }

  zmq::context_t context(1);
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  keel::test::present_users_key(dealer);
  dealer.connect(probe.bound_command_endpoint());
  // "r4" for a description of 4 layers, "s2" for the record of step 2, then "ack:<count>".
  auto ask = [&dealer](uint64_t id, int64_t count) {
    keel::wire::Command command;
    command.rank = -1;
    command.id = id;
    command.kind = "history";
    command.count = count;
    const std::vector<char> payload = keel::wire::encode(command);
    dealer.send(zmq::buffer(std::string_view("cmd")), zmq::send_flags::sndmore);
    dealer.send(zmq::buffer(payload.data(), payload.size()));
    std::vector<std::string> seen;
    while (true) {
      zmq::pollitem_t item{static_cast<void*>(dealer), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(5000)) == 0) return seen;
      zmq::message_t topic, frame;
      if (!dealer.recv(topic) || !dealer.recv(frame)) return seen;
      const auto decoded = keel::wire::decode(frame.data(), frame.size());
      if (!decoded.ok) return seen;
      if (const auto* d = std::get_if<keel::wire::RunDescription>(&decoded.message)) {
        seen.push_back("r" + std::to_string(d->layers.size()));
      } else if (const auto* r = std::get_if<keel::wire::StepRecord>(&decoded.message)) {
        seen.push_back("s" + std::to_string(r->step));
      } else if (const auto* a = std::get_if<keel::wire::Ack>(&decoded.message)) {
        if (a->id != id) continue;
        seen.push_back("ack:" + std::to_string(a->count));
        return seen;
      }
    }
  };
  using Seen = std::vector<std::string>;
  // The publisher thread keeps what it has sent: it may trail the last step a little.
  Seen whole;
  for (uint64_t attempt = 1; attempt <= 50; ++attempt) {
    whole = ask(attempt, keel::probe::kMaxHistoryCount);
    if (whole.size() >= 2 && whole[whole.size() - 2] == "s5") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(whole, (Seen{"r4", "s0", "s1", "s2", "r5", "s3", "s4", "s5", "ack:6"}));
  EXPECT_EQ(ask(100, 4), (Seen{"r4", "s2", "r5", "s3", "s4", "s5", "ack:4"}));
  EXPECT_EQ(ask(101, 2), (Seen{"r5", "s4", "s5", "ack:2"})) << "the description in force at its first record";
}

}  // namespace
