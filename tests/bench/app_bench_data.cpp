// Synthetic telemetry behind keel-bench-app; see app_bench_data.hpp.

#include "app_bench_data.hpp"

#include <cmath>
#include <limits>

namespace keel::bench {
namespace {

// Parameters of one transformer block, in named_parameters() order: the layer names a real
// model of this size would publish (and the layer list's tree would nest).
constexpr const char* kBlockParams[] = {
    "ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
    "ln2.weight", "ln2.bias", "mlp.fc1.weight",  "mlp.fc1.bias",  "mlp.fc2.weight",   "mlp.fc2.bias"};
constexpr int kBlockParamCount = 12;

// One step in this many spikes one layer's gradient, one in kNanEvery poisons one layer.
constexpr int kSpikeEvery = 500;
constexpr int kNanEvery = 5000;

// Past this many layers the model is a mixture of experts: no dense transformer has 5,000
// parameter tensors, and the dashboard's module grouping is what such a model exercises.
constexpr int kDenseLayersMax = 5000;
// One MoE block: attention and norms, a router, then kExperts experts of three matrices each
// (blocks.17.experts.203.w1.weight), as a DeepSeek-like model names them.
constexpr const char* kMoeBlockParams[] = {"ln1.weight", "attn.qkv.weight", "attn.proj.weight", "ln2.weight",
                                           "router.weight"};
constexpr int kMoeBlockParamCount = 5;
constexpr int kExperts = 256;
constexpr const char* kExpertParams[] = {"w1.weight", "w2.weight", "w3.weight"};
constexpr int kExpertParamCount = 3;
constexpr int kMoeBlockSize = kMoeBlockParamCount + kExperts * kExpertParamCount;

std::string layer_name_at(int index, int count) {
  if (index == 0) return "embed.weight";
  if (index == count - 1) return "head.weight";
  if (count > kDenseLayersMax) {
    const int block = (index - 1) / kMoeBlockSize, at = (index - 1) % kMoeBlockSize;
    const std::string prefix = "blocks." + std::to_string(block) + ".";
    if (at < kMoeBlockParamCount) return prefix + kMoeBlockParams[at];
    const int expert = (at - kMoeBlockParamCount) / kExpertParamCount;
    return prefix + "experts." + std::to_string(expert) + "." +
           kExpertParams[(at - kMoeBlockParamCount) % kExpertParamCount];
  }
  const int block = (index - 1) / kBlockParamCount;
  return "blocks." + std::to_string(block) + "." + kBlockParams[(index - 1) % kBlockParamCount];
}

}  // namespace

SyntheticRun::SyntheticRun(int layer_count, uint64_t seed) : state_(seed | 1) {
  description_.rank = 0;
  description_.seq = 1;
  description_.run_id = "bench-run";
  description_.world_size = 1;
  description_.watches = {"logits"};
  description_.keel_version = "0.1.0";
  description_.torch_version = "synthetic";
  description_.device = "cpu";
  description_.start_unix_ms = 1700000000000;
  for (int i = 0; i < layer_count; ++i) {
    wire::LayerInfo info;
    info.name = layer_name_at(i, layer_count);
    const bool vector = info.name.find(".bias") != std::string::npos ||
                        info.name.find("ln") != std::string::npos;
    info.shape = vector ? std::vector<int64_t>{768} : std::vector<int64_t>{768, 768};
    info.numel = vector ? 768 : 768 * 768;
    info.dtype = "float32";
    description_.layers.push_back(std::move(info));

    // Scales spread log-uniformly, as they are across a real model's parameters: the heatmap
    // colours by log10, so this is what fills its colour range.
    base_grad_norm_.push_back(std::pow(10.0f, -4.0f + 3.0f * uniform()));
    absmax_factor_.push_back(0.02f + 0.1f * uniform());
    zero_frac_.push_back(uniform() < 0.05f ? 0.3f + 0.4f * uniform() : 0.01f * uniform());
    param_norm_.push_back(std::pow(10.0f, 2.0f * uniform()));
    update_ratio_.push_back(std::pow(10.0f, -4.0f + 1.5f * uniform()));
  }
}

uint64_t SyntheticRun::next_bits() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return state_ * 0x2545F4914F6CDD1Dull;
}

float SyntheticRun::uniform() { return float(next_bits() >> 40) * (1.0f / float(1u << 24)); }

void SyntheticRun::fill(int64_t step, wire::StepRecord& record) {
  const size_t layers = base_grad_norm_.size();
  record.rank = 0;
  record.seq = ++description_.seq;
  record.step = step;
  record.metric_mask = wire::kAllLayerMetrics;
  record.layer_count = uint32_t(layers);
  record.layer_values.resize(layers * wire::kLayerMetricCount);
  float* grad_norm = record.layer_values.data();
  float* absmax = grad_norm + layers;
  float* nonfinite = absmax + layers;
  float* zero_frac = nonfinite + layers;
  float* param_norm = zero_frac + layers;
  float* update_ratio = param_norm + layers;

  // Gradients shrink as training settles; weights grow a little.
  const float decay = float(std::pow(1.0 + double(step) / 20000.0, -0.3));
  const float growth = float(1.0 + 1e-7 * double(step));
  double square_sum = 0;
  for (size_t i = 0; i < layers; ++i) {
    grad_norm[i] = base_grad_norm_[i] * decay * (0.7f + 0.6f * uniform());
    absmax[i] = grad_norm[i] * absmax_factor_[i] * (0.8f + 0.4f * uniform());
    nonfinite[i] = 0.0f;
    zero_frac[i] = zero_frac_[i] * (0.9f + 0.2f * uniform());
    param_norm[i] = param_norm_[i] * growth;
    update_ratio[i] = update_ratio_[i] * decay * (0.7f + 0.6f * uniform());
    square_sum += double(grad_norm[i]) * double(grad_norm[i]);
  }
  if (next_bits() % kSpikeEvery == 0) {
    const size_t layer = next_bits() % layers;
    grad_norm[layer] *= 30.0f;
    absmax[layer] *= 50.0f;
  }
  record.skipped = false;
  record.skip_reason.clear();
  if (next_bits() % kNanEvery == 0) {
    // What the probe sends for a poisoned gradient: NaN norm and absmax, a count, no update.
    const size_t layer = next_bits() % layers;
    grad_norm[layer] = std::numeric_limits<float>::quiet_NaN();
    absmax[layer] = std::numeric_limits<float>::quiet_NaN();
    nonfinite[layer] = 17.0f;
    for (size_t i = 0; i < layers; ++i) update_ratio[i] = 0.0f;
    record.skipped = true;
    record.skip_reason = "nonfinite";
  }

  record.loss = 2.2 * std::pow(1.0 + double(step) / 5000.0, -0.25) * (0.95 + 0.1 * uniform());
  record.lr = 3e-4;
  record.grad_norm = record.skipped ? std::numeric_limits<double>::quiet_NaN() : std::sqrt(square_sum);
  record.step_time_us = 80000.0 * (0.95 + 0.1 * uniform());
  record.probe_us = 1100.0 * (0.9 + 0.2 * uniform());
  record.dropped = 0;
  record.scaler.reset();
  if (record.watches.empty()) {
    record.watches.resize(1);
    record.watches[0].name = "logits";
  }
  wire::WatchStats& logits = record.watches[0];
  logits.absmax = 20.0f * (0.9f + 0.2f * uniform());
  logits.rms = 3.0f * (0.95f + 0.1f * uniform());
  logits.z = 8.0f * (0.97f + 0.06f * uniform());
  logits.nonfinite = 0;
}

}  // namespace keel::bench
