// measures_in_backward: the option as set wins; unset, the hooks go on only when the tensors
// they would measure, weights and gradients, outgrow half the last-level cache.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "reduce/backward_measuring.hpp"

namespace {

using keel::probe::measures_in_backward;

// `count` float32 leaves of 1,000 elements that require grad: 8,000 bytes each with gradients.
std::vector<torch::Tensor> small_leaves(int count) {
  std::vector<torch::Tensor> params;
  for (int i = 0; i < count; ++i) params.push_back(torch::zeros({1000}, torch::requires_grad()));
  return params;
}

TEST(BackwardMeasuring, UnsetItFollowsTheSmallTensorsBytesAgainstHalfTheCache) {
  const std::vector<torch::Tensor> params = small_leaves(10);   // 80,000 bytes
  EXPECT_FALSE(measures_in_backward(std::nullopt, params, {}, 160'000));
  EXPECT_TRUE(measures_in_backward(std::nullopt, params, {}, 159'998));
}

TEST(BackwardMeasuring, SetItIsTakenAsItIsWhateverTheSize) {
  const std::vector<torch::Tensor> params = small_leaves(10);
  EXPECT_TRUE(measures_in_backward(true, params, {}, int64_t{1} << 40));
  EXPECT_FALSE(measures_in_backward(false, params, {}, 1));
}

// Only what a hook would be placed on counts: not a frozen tensor, a double, a tensor larger
// than the hooks measure, a non-leaf, or a parameter whose data a wrapper swaps.
TEST(BackwardMeasuring, OnlyTheTensorsTheHooksWouldMeasureCount) {
  std::vector<torch::Tensor> params = small_leaves(1);   // 8,000 bytes
  params.push_back(torch::zeros({1000}));                                                   // frozen
  params.push_back(torch::zeros({1000}, torch::dtype(torch::kDouble).requires_grad(true)));  // not float32
  params.push_back(torch::zeros({1 << 16}, torch::requires_grad()));                         // too large
  params.push_back(torch::zeros({1000}, torch::requires_grad()) * 2);                        // not a leaf
  params.push_back(torch::zeros({1000}, torch::requires_grad()));                            // swapped
  const std::vector<bool> swapped = {false, false, false, false, false, true};
  EXPECT_FALSE(measures_in_backward(std::nullopt, params, swapped, 16'000));
  EXPECT_TRUE(measures_in_backward(std::nullopt, params, swapped, 15'998));
}

TEST(BackwardMeasuring, TheCacheSizeIsAPositiveCount) { EXPECT_GT(keel::probe::last_level_cache_bytes(), 0); }

TEST(BackwardMeasuring, CacheSizesReadAsSysfsWritesThem) {
  using keel::probe::parse_cache_size;
  EXPECT_EQ(parse_cache_size("32768K"), int64_t{32} << 20);
  EXPECT_EQ(parse_cache_size("1M"), int64_t{1} << 20);
  EXPECT_EQ(parse_cache_size("512"), 512);
  EXPECT_EQ(parse_cache_size(""), 0);
  EXPECT_EQ(parse_cache_size("K"), 0);
  EXPECT_EQ(parse_cache_size("-4K"), 0);
}

}  // namespace
