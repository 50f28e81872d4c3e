// A small char-level transformer language model: keel-demo's real workload.
//
// Token + position embeddings, `layers` pre-LN blocks (causal multi-head self-attention, GELU
// MLP), a final LayerNorm and a linear head. Parameter names follow the module tree
// ("blocks.0.attn.qkv.weight", ...) so the dashboard's layer tree reads like the model.
// Threads: the training thread. Never: touches the probe (instrumentation stays in main).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <torch/torch.h>

namespace keel::demo {

struct ModelConfig {
  int64_t vocab = 128;
  int64_t context = 64;
  int64_t width = 96;
  int64_t heads = 4;
  int64_t layers = 3;
  // With a value: each attention normalises its queries per head (QK-norm, as OLMo 2 and
  // others do) with this eps. keel-demo's --cause norm builds it with eps 0.
  std::optional<double> q_norm_eps;
};

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);
  // Hands each forward's attention logits (q.k / sqrt(head_dim), before the causal mask, whose
  // -inf would hide their size) to `on_scores`; empty: none.
  void on_scores(std::function<void(const torch::Tensor&)> on_scores) { on_scores_ = std::move(on_scores); }

 private:
  int64_t heads_;
  std::function<void(const torch::Tensor&)> on_scores_;
  torch::nn::Linear qkv_{nullptr}, proj_{nullptr};
  torch::nn::LayerNorm q_norm_{nullptr};
  torch::Tensor mask_;
};
TORCH_MODULE(CausalSelfAttention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Linear fc_{nullptr}, proj_{nullptr};
};
TORCH_MODULE(Mlp);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const ModelConfig& config);
  torch::Tensor forward(torch::Tensor x);
  CausalSelfAttention& attn() { return attn_; }

 private:
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  CausalSelfAttention attn_{nullptr};
  Mlp mlp_{nullptr};
};
TORCH_MODULE(Block);

class CharTransformerImpl : public torch::nn::Module {
 public:
  explicit CharTransformerImpl(const ModelConfig& config);
  // tokens [batch, time] (int64) -> logits [batch, time, vocab]
  torch::Tensor forward(const torch::Tensor& tokens);
  // Hands each block's attention logits to `on_scores` with a name ("blocks.0.attn.scores"),
  // for probe.watch: their growth is one way a run diverges (Wortsman et al. 2023). Empty: none.
  void on_attention_scores(const std::function<void(const std::string&, const torch::Tensor&)>& on_scores);

 private:
  torch::nn::Embedding tok_{nullptr}, pos_{nullptr};
  torch::nn::ModuleList blocks_;
  torch::nn::LayerNorm ln_f_{nullptr};
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE(CharTransformer);

}  // namespace keel::demo
