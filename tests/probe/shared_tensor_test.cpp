// One tensor under two names (issue 12, item 4): a submodule registered twice, whose
// parameters libtorch's named_parameters() lists under both names. It is one layer, under its
// first name, with the other names as its aliases: its gradient is unscaled once and measured
// once (it was unscaled twice, by two spans writing the same memory in one parallel region).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "keel/probe/grad_scaler.hpp"
#include "keel/probe/probe.hpp"
#include "quiet_options.hpp"
#include "reference_stats.hpp"

namespace {

using keel::wire::LayerMetric;

// enc is applied twice, and registered a second time as dec: named_parameters() gives enc.weight,
// enc.bias, dec.weight, dec.bias (the same two tensors), head.weight, head.bias.
struct SharedNetImpl : torch::nn::Module {
  SharedNetImpl() {
    enc = register_module("enc", torch::nn::Linear(5, 5));
    register_module("dec", enc);
    head = register_module("head", torch::nn::Linear(5, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return head->forward(torch::tanh(enc->forward(torch::tanh(enc->forward(x)))));
  }
  torch::nn::Linear enc{nullptr}, head{nullptr};
};
TORCH_MODULE(SharedNet);

using keel::test::quiet;

void backward(SharedNet& net, torch::optim::Optimizer& opt, int64_t seed, double scale) {
  torch::manual_seed(seed);
  opt.zero_grad();
  (net->forward(torch::randn({4, 5})).pow(2).mean() * scale).backward();
}

TEST(SharedTensor, IsOneLayerWithItsOtherNamesAsAliases) {
  torch::manual_seed(0);
  SharedNet net;
  ASSERT_EQ(net->named_parameters().size(), 6u) << "libtorch lists the shared tensors under both names";
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, quiet());
  const auto& layers = probe.description().layers;
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[0].name, "enc.weight");
  EXPECT_EQ(layers[0].aliases, std::vector<std::string>{"dec.weight"});
  EXPECT_EQ(layers[1].name, "enc.bias");
  EXPECT_EQ(layers[1].aliases, std::vector<std::string>{"dec.bias"});
  EXPECT_EQ(layers[2].name, "head.weight");
  EXPECT_TRUE(layers[2].aliases.empty());

  backward(net, opt, 1, 1.0);
  const double expected = keel::test::reference_norm(net->enc->weight.grad());
  probe.step(torch::tensor(1.0));
  EXPECT_EQ(probe.last_record().layer_count, 4u);
  EXPECT_TRUE(keel::test::close_rel(probe.last_record().layer_value(LayerMetric::kGradNorm, 0), expected, 1e-6));
}

// With a loss scaler, the shared gradient is divided by the scale once.
TEST(SharedTensor, ItsGradientIsUnscaledOnce) {
  torch::manual_seed(0);
  SharedNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, quiet());
  keel::probe::GradScalerOptions so;
  so.init_scale = 1024;
  keel::probe::GradScaler scaler(so);
  probe.use_scaler(&scaler);

  backward(net, opt, 7, 1.0);
  const auto expected = net->enc->weight.grad().clone();
  backward(net, opt, 7, scaler.scale_value());
  EXPECT_TRUE(probe.step(torch::tensor(1.0)).applied);
  EXPECT_TRUE(torch::allclose(net->enc->weight.grad(), expected, 1e-5, 1e-7))
      << "unscaled by " << (expected.abs().sum() / net->enc->weight.grad().abs().sum()).item<double>() << "x too much";
  EXPECT_TRUE(keel::test::close_rel(probe.last_record().layer_value(LayerMetric::kGradNorm, 0),
                                    keel::test::reference_norm(expected), 1e-5));
}

// A name added for a tensor after attach (a weight tied by registering it again) changes no
// layer, only its other names: the run is re-described with them, and the event says so. They
// were never re-described, as the set of tensors had not changed.
TEST(SharedTensor, ANameAddedAfterAttachIsReDescribed) {
  torch::manual_seed(0);
  SharedNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, quiet());
  backward(net, opt, 1, 1.0);
  probe.step(torch::tensor(1.0));
  ASSERT_TRUE(probe.description().layers[2].aliases.empty());

  net->head->register_parameter("tied", net->enc->bias);   // enc.bias, now also head.tied
  backward(net, opt, 2, 1.0);
  probe.step(torch::tensor(1.0));
  const auto& layers = probe.description().layers;
  ASSERT_EQ(layers.size(), 4u) << "still one layer per tensor";
  EXPECT_EQ(layers[1].aliases, (std::vector<std::string>{"dec.bias", "head.tied"}));
  std::string detail;
  for (const auto& e : probe.last_events()) {
    if (e.kind == "layout_changed") detail = e.detail;
  }
  EXPECT_NE(detail.find("enc.bias now also named dec.bias, head.tied"), std::string::npos) << detail;
}

}  // namespace
