// gradient_slot reads a parameter's gradient and requires_grad from its autograd metadata:
// it must say what Tensor::grad() and requires_grad() say, in every state a parameter has.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "reduce/gradient_slot.hpp"

namespace {

using keel::probe::gradient_slot;
using keel::probe::GradientSlot;

void expect_as_torch_says(const torch::Tensor& p) {
  const GradientSlot slot = gradient_slot(p);
  EXPECT_EQ(slot.requires_grad, p.requires_grad());
  EXPECT_EQ(slot.has_grad(), p.grad().defined());
  if (slot.has_grad()) {
    EXPECT_EQ(slot.grad->unsafeGetTensorImpl(), p.grad().unsafeGetTensorImpl());
  }
}

TEST(GradientSlot, SaysWhatTensorGradAndRequiresGradSay) {
  torch::Tensor plain = torch::ones({3});
  expect_as_torch_says(plain);
  EXPECT_EQ(gradient_slot(plain).grad, nullptr) << "no autograd metadata";

  torch::Tensor p = torch::ones({3}, torch::requires_grad());
  expect_as_torch_says(p);
  EXPECT_FALSE(gradient_slot(p).has_grad()) << "before any backward";

  (p * 2).sum().backward();
  expect_as_torch_says(p);
  EXPECT_TRUE(gradient_slot(p).has_grad());

  p.set_requires_grad(false);   // frozen, its last gradient still there
  expect_as_torch_says(p);
  EXPECT_FALSE(gradient_slot(p).requires_grad);
  EXPECT_TRUE(gradient_slot(p).has_grad());

  p.mutable_grad() = torch::Tensor();   // set to none
  expect_as_torch_says(p);
}

}  // namespace
