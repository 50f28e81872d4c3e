// Layer types beyond keel-demo's (issue 12, Also): an Embedding with sparse gradients, and a
// Conv2d + BatchNorm2d model whose running statistics are buffers, not parameters. Each is
// measured against a float64 reference with no probe error.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "keel/probe/grad_scaler.hpp"
#include "keel/probe/probe.hpp"
#include "quiet_options.hpp"
#include "reference_stats.hpp"

namespace {

using keel::wire::LayerMetric;

using keel::test::quiet;

struct SparseEmbeddingNetImpl : torch::nn::Module {
  SparseEmbeddingNetImpl() {
    emb = register_module("emb", torch::nn::Embedding(torch::nn::EmbeddingOptions(50, 8).sparse(true)));
    head = register_module("head", torch::nn::Linear(8, 3));
  }
  torch::Tensor forward(const torch::Tensor& ids) { return head->forward(emb->forward(ids).mean(1)); }
  torch::nn::Embedding emb{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(SparseEmbeddingNet);

// A sparse gradient made every step a probe failure (is_contiguous() throws on it): the update
// went on unmeasured, and with a loss scaler every step ended as an overflow, so the model
// never trained. Now its stored values are measured (repeated ids added up first) and unscaled.
TEST(RealLayers, ASparseEmbeddingGradientIsMeasuredAndUnscaled) {
  torch::manual_seed(0);
  SparseEmbeddingNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, quiet());
  keel::probe::GradScalerOptions so;
  so.init_scale = 256;
  keel::probe::GradScaler scaler(so);
  probe.use_scaler(&scaler);
  const auto ids = torch::tensor({{1, 4, 4, 9}, {4, 7, 1, 1}}, torch::kLong);   // repeated ids

  opt.zero_grad();
  net->forward(ids).pow(2).mean().backward();
  ASSERT_TRUE(net->emb->weight.grad().is_sparse());
  const auto expected = net->emb->weight.grad().to_dense().clone();
  opt.zero_grad();
  (net->forward(ids).pow(2).mean() * scaler.scale_value()).backward();
  const auto outcome = probe.step(torch::tensor(1.0));

  EXPECT_TRUE(outcome.applied) << outcome.skip_reason;
  EXPECT_EQ(probe.last_record().probe_errors, 0u);
  EXPECT_TRUE(torch::allclose(net->emb->weight.grad().to_dense(), expected, 1e-5, 1e-8));
  const auto ref = keel::test::reference_grad(expected);
  const auto& record = probe.last_record();
  EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kGradNorm, 0), ref.norm, 1e-5));
  EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kGradAbsmax, 0), ref.absmax, 1e-5));
  EXPECT_TRUE(keel::test::close_rel(record.layer_value(LayerMetric::kGradZeroFrac, 0), ref.zero_frac, 1e-6));
}

struct ConvBatchNormNetImpl : torch::nn::Module {
  ConvBatchNormNetImpl() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 4, 3).padding(1)));
    bn = register_module("bn", torch::nn::BatchNorm2d(4));
    head = register_module("head", torch::nn::Linear(4 * 6 * 6, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return head->forward(torch::relu(bn->forward(conv->forward(x))).flatten(1));
  }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(ConvBatchNormNet);

TEST(RealLayers, Conv2dAndBatchNorm2dParametersAreLayersAndTheirBuffersAreNot) {
  torch::manual_seed(0);
  ConvBatchNormNet net;
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-3));
  keel::probe::Probe probe(*net, opt, quiet());
  std::vector<std::string> names;
  for (const auto& layer : probe.description().layers) names.push_back(layer.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv.weight", "conv.bias", "bn.weight", "bn.bias", "head.weight",
                                             "head.bias"}));
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    net->forward(torch::randn({4, 2, 6, 6})).pow(2).mean().backward();
    std::vector<double> expected;
    for (const auto& p : net->parameters()) expected.push_back(keel::test::reference_norm(p.grad()));
    EXPECT_TRUE(probe.step(torch::tensor(1.0)).applied);
    EXPECT_EQ(probe.last_record().probe_errors, 0u);
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_TRUE(keel::test::close_rel(probe.last_record().layer_value(LayerMetric::kGradNorm, static_cast<uint32_t>(i)),
                                        expected[i], 1e-5))
          << names[i];
    }
  }
}

}  // namespace
