#include "text_corpus.hpp"

#include <array>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace keel::demo {

TextCorpus::TextCorpus(const std::string& path, int64_t context) : context_(context) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read training text " + path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (static_cast<int64_t>(text.size()) < context + 2) {
    throw std::runtime_error("training text " + path + " is too short (" + std::to_string(text.size()) +
                             " bytes; need more than " + std::to_string(context + 1) + ")");
  }
  std::array<int64_t, 256> index{};
  index.fill(-1);
  for (unsigned char c : text) index[c] = 0;
  for (int c = 0; c < 256; ++c) {
    if (index[c] == 0) {
      index[c] = static_cast<int64_t>(alphabet_.size());
      alphabet_.push_back(static_cast<unsigned char>(c));
    }
  }
  tokens_.reserve(text.size());
  for (unsigned char c : text) tokens_.push_back(index[c]);
}

std::pair<torch::Tensor, torch::Tensor> TextCorpus::batch(int64_t batch, torch::Generator& rng) const {
  const int64_t limit = static_cast<int64_t>(tokens_.size()) - context_ - 1;
  auto starts = torch::randint(0, limit, {batch}, rng, torch::kLong);
  auto inputs = torch::empty({batch, context_}, torch::kLong);
  auto targets = torch::empty({batch, context_}, torch::kLong);
  auto* in = inputs.data_ptr<int64_t>();
  auto* out = targets.data_ptr<int64_t>();
  const auto* s = starts.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < context_; ++t) {
      in[b * context_ + t] = tokens_[s[b] + t];
      out[b * context_ + t] = tokens_[s[b] + t + 1];
    }
  }
  return {inputs, targets};
}

}  // namespace keel::demo
