// TextCorpus: the demo's training text as byte tokens, and random training batches from it.
// Threads: the training thread. Never: reads the file again after construction.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

namespace keel::demo {

// A text every Debian machine has (base-files), so the demo needs no download.
inline constexpr const char* kDefaultTextPath = "/usr/share/common-licenses/GPL-3";

class TextCorpus {
 public:
  // Throws std::runtime_error with the path when the file is missing, empty or too short.
  TextCorpus(const std::string& path, int64_t context);

  int64_t vocab_size() const { return static_cast<int64_t>(alphabet_.size()); }
  size_t size_bytes() const { return tokens_.size(); }
  // inputs and next-char targets, both [batch, context] int64
  std::pair<torch::Tensor, torch::Tensor> batch(int64_t batch, torch::Generator& rng) const;

 private:
  int64_t context_;
  std::vector<unsigned char> alphabet_;   // distinct bytes, sorted
  std::vector<int64_t> tokens_;
};

}  // namespace keel::demo
