#include "char_transformer.hpp"

#include <cmath>
#include <limits>

namespace keel::demo {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& config) : heads_(config.heads) {
  qkv_ = register_module("qkv", torch::nn::Linear(config.width, 3 * config.width));
  proj_ = register_module("proj", torch::nn::Linear(config.width, config.width));
  if (config.q_norm_eps) {
    q_norm_ = register_module(
        "q_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.width / config.heads}).eps(*config.q_norm_eps)));
  }
  mask_ = register_buffer(
      "mask", torch::full({config.context, config.context}, -std::numeric_limits<float>::infinity()).triu(1));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0), time = x.size(1), width = x.size(2);
  const int64_t head_dim = width / heads_;
  auto qkv = qkv_->forward(x).view({batch, time, 3, heads_, head_dim}).permute({2, 0, 3, 1, 4});
  auto q = qkv[0], k = qkv[1], v = qkv[2];
  if (q_norm_) q = q_norm_->forward(q);
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim));
  if (on_scores_) on_scores_(scores);
  scores = scores + mask_.slice(0, 0, time).slice(1, 0, time);
  auto attended = torch::matmul(torch::softmax(scores, -1), v);
  return proj_->forward(attended.transpose(1, 2).reshape({batch, time, width}));
}

MlpImpl::MlpImpl(const ModelConfig& config) {
  fc_ = register_module("fc", torch::nn::Linear(config.width, 4 * config.width));
  proj_ = register_module("proj", torch::nn::Linear(4 * config.width, config.width));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) { return proj_->forward(torch::gelu(fc_->forward(x))); }

BlockImpl::BlockImpl(const ModelConfig& config) {
  ln1_ = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.width})));
  attn_ = register_module("attn", CausalSelfAttention(config));
  ln2_ = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.width})));
  mlp_ = register_module("mlp", Mlp(config));
}

torch::Tensor BlockImpl::forward(torch::Tensor x) {
  x = x + attn_->forward(ln1_->forward(x));
  return x + mlp_->forward(ln2_->forward(x));
}

CharTransformerImpl::CharTransformerImpl(const ModelConfig& config) {
  tok_ = register_module("tok", torch::nn::Embedding(config.vocab, config.width));
  pos_ = register_module("pos", torch::nn::Embedding(config.context, config.width));
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.layers; ++i) blocks_->push_back(Block(config));
  ln_f_ = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.width})));
  head_ = register_module("head", torch::nn::Linear(config.width, config.vocab));
  // GPT-style small init keeps the first steps' loss near log(vocab).
  for (auto& p : named_parameters()) {
    if (p.key().find("weight") != std::string::npos && p.value().dim() == 2) {
      torch::NoGradGuard no_grad;
      p.value().normal_(0.0, 0.02);
    }
  }
}

torch::Tensor CharTransformerImpl::forward(const torch::Tensor& tokens) {
  const int64_t time = tokens.size(1);
  auto positions = torch::arange(time, tokens.options());
  auto x = tok_->forward(tokens) + pos_->forward(positions).unsqueeze(0);
  for (const auto& block : *blocks_) x = block->as<Block>()->forward(x);
  return head_->forward(ln_f_->forward(x));
}

void CharTransformerImpl::on_attention_scores(
    const std::function<void(const std::string&, const torch::Tensor&)>& on_scores) {
  for (size_t i = 0; i < blocks_->size(); ++i) {
    std::function<void(const torch::Tensor&)> named;
    if (on_scores) {
      named = [on_scores, name = "blocks." + std::to_string(i) + ".attn.scores"](const torch::Tensor& scores) {
        on_scores(name, scores);
      };
    }
    (*blocks_)[i]->as<Block>()->attn()->on_scores(std::move(named));
  }
}

}  // namespace keel::demo
