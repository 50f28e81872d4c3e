// update_math: the update an optimizer just applied to a tensor, rebuilt per element from the
// optimizer's state after its step, so the probe needs no copy of the weights to measure it.
//
// What it is for: update_ratio = |W_new - W_old| / |W_old| per layer. Keeping W_old costs a
// full copy of the weights (652 MB for GPT-2-small). For the optimizers whose step is
// W_new = W_old * decay - u, with u computable from state that is still there after the step,
// W_old = (W_new + u) / decay, and one read of W_new and the state gives |dW|^2, |W_old|^2
// and |W_new|^2. The rules (each optimizer's step as libtorch's C++ API writes it):
//   AdamW   u = lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps), decay = 1 - lr*wd (decoupled decay);
//           v is max_exp_avg_sq with amsgrad
//   Adam    the same u, decay = 1 (its weight decay went into the gradient, hence into m, v)
//   SGD     u = lr * (g_coef * grad + buf_coef * momentum_buffer); decay = 1 - lr*wd where
//           the decay is not inside the buffer: plain SGD (g 1, buf 0) and Nesterov (g 1,
//           buf momentum) have it, heavy-ball momentum (g 0, buf 1, decay 1) has it in buf
// u is computed in fp32 as ATen computes it (bf16/fp16 state is widened first); W_old and the
// sums are taken in fp64. The rebuilt dW differs from the stored one by the rounding of W_new
// to its type (half an ulp of W per element): for fp32 weights, a relative error in |dW| of
// about 2^-24 * |W| / |dW| per element, far below what the dashboard shows. For bf16 weights
// the rounding is up to 2^-9 of each element: |W_old| is within 0.4%, and what is measured is
// the update the optimizer meant; where that is as small as bf16's resolution (an update of
// 0.3% of the weights) the update bf16 actually kept differs from it by several percent.
// Nothing here includes CUDA or torch headers; under nvcc every function is __host__ __device__.
#pragma once

#include <cmath>
#include <cstdint>

#include "stats_math.hpp"

namespace keel::probe::cuda {

enum class UpdateRule : int32_t { kAdam = 0, kLinear = 1 };

// One tensor's rule and its coefficients for this step (host values, in the table). The
// defaults are the zero update (u = 0, decay 1) of a tensor the optimizer did not step.
struct UpdateCoefficients {
  UpdateRule rule = UpdateRule::kLinear;
  float step_size = 0;     // Adam: lr / bc1
  float sqrt_bc2 = 1;      // Adam: sqrt(1 - beta2^step)
  float eps = 0;           // Adam
  float lr = 0;            // Linear
  float g_coef = 0;        // Linear: weight of the gradient
  float buf_coef = 0;      // Linear: weight of the momentum buffer
  int32_t unused = 0;      // named padding: tables of these are compared bytewise
  double decay = 1;        // W_new = W_old * decay - u
};
static_assert(sizeof(UpdateCoefficients) == 40, "no unnamed padding: rows are compared with memcmp");

// u for one element; `first`/`second` are m and v (Adam) or the gradient and the momentum
// buffer (Linear), widened to float.
KEEL_HD float update_term(const UpdateCoefficients& c, float first, float second) {
  if (c.rule == UpdateRule::kAdam) {
    const float denom = sqrtf(second) / c.sqrt_bc2 + c.eps;
    return c.step_size * (first / denom);
  }
  return c.lr * (c.g_coef * first + c.buf_coef * second);
}

struct UpdateAccumulator {
  double update_sumsq = 0;   // |W_new - W_old|^2
  double old_sumsq = 0;      // |W_old|^2
  double new_sumsq = 0;      // |W_new|^2

  KEEL_HD void add(double w_new, float u, double decay) {
    const double w_old = (w_new + static_cast<double>(u)) / decay;
    const double d = w_new - w_old;
    update_sumsq += d * d;
    old_sumsq += w_old * w_old;
    new_sumsq += w_new * w_new;
  }

  KEEL_HD void merge(const UpdateAccumulator& other) {
    update_sumsq += other.update_sumsq;
    old_sumsq += other.old_sumsq;
    new_sumsq += other.new_sumsq;
  }
};

// Elements [begin, end) of one tensor, one every `stride` from begin + offset (a GPU thread's
// share of a chunk, or the whole range on the host). weight, first and second share type T;
// `second` may be null (treated as 0) for rules that do not read it.
template <ElementType T>
KEEL_HD UpdateAccumulator update_range(const typename Element<T>::Storage* weight,
                                       const typename Element<T>::Storage* first,
                                       const typename Element<T>::Storage* second, const UpdateCoefficients& c,
                                       int64_t begin, int64_t end, int64_t offset, int64_t stride) {
  UpdateAccumulator acc;
  for (int64_t i = begin + offset; i < end; i += stride) {
    const float f = static_cast<float>(Element<T>::load(first, i));
    const float s = second ? static_cast<float>(Element<T>::load(second, i)) : 0.0f;
    acc.add(Element<T>::load(weight, i), update_term(c, f, s), c.decay);
  }
  return acc;
}

}  // namespace keel::probe::cuda
