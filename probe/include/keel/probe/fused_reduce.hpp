// Fused CPU reductions over float32 buffers: the probe's per-step arithmetic.
//
// What it is for: one memory pass per question, however many metrics it answers. The gradient
// pass yields sum of squares, absmax, non-finite count and zero count together; the snapshot
// pass copies W and yields sum w^2; the update pass yields sum (W - snapshot)^2 and sum W^2
// and refreshes the snapshot for the next step; a row pass gives logsumexp for watched logits.
// Many small tensors are batched into one parallel region (OpenMP) by splitting all buffers
// into chunks of similar size.
// Threads: call from one thread at a time (the training thread); uses the OpenMP pool inside.
// Never: throws, allocates per element, or synchronises with anything but its own workers.
// Includes no torch header, so it compiles fast and is tested on raw arrays.
#pragma once

#include <cstdint>
#include <vector>

namespace keel::probe {

struct GradStats {
  // sum of g^2: fp32 lanes per block, summed in fp64; a block whose fp32 sum overflowed or
  // underflowed is summed again in fp64, so it is finite for every finite input (up to
  // FLT_MAX) and keeps tiny layers. NaN/Inf inputs propagate.
  double sumsq = 0;
  float absmax = 0;       // max |g|; NaN when any element is NaN, Inf when any is Inf (and none NaN)
  int64_t nonfinite = 0;  // elements that are NaN or +-Inf
  int64_t zeros = 0;      // elements exactly 0 (+0 or -0)
};

struct ConstSpan {
  const float* data = nullptr;
  int64_t numel = 0;
};

struct MutableSpan {
  float* data = nullptr;
  int64_t numel = 0;
};

struct SnapshotSpan {
  const float* weights = nullptr;
  float* snapshot = nullptr;   // receives a copy of weights
  int64_t numel = 0;
};

// The passes below cut every buffer into chunks of this many elements.
constexpr int64_t kFusedChunkElems = int64_t{1} << 15;

// One buffer of at most kFusedChunkElems elements, which the passes below take as one chunk:
// what FusedReducer::grad_stats and sumsq give for it, bit for bit, with no scratch and no
// chunking (a gradient measured as autograd accumulates it, one at a time).
GradStats grad_stats_of_chunk(const float* data, int64_t n);
double sumsq_of_chunk(const float* data, int64_t n);

// Reusable scratch for the chunked passes, so steady-state calls never allocate.
class FusedReducer {
 public:
  // Gradient statistics of every buffer; out.size() becomes grads.size().
  void grad_stats(const std::vector<ConstSpan>& grads, std::vector<GradStats>& out);
  // As grad_stats, but first multiplies every element by `scale` in place (loss-scaler
  // unscale fused with the statistics of the unscaled gradient).
  void unscale_and_grad_stats(const std::vector<MutableSpan>& grads, float scale,
                              std::vector<GradStats>& out);
  // unscale_and_grad_stats (grad_stats when `scale` is 1: nothing is written), and sum w^2 of
  // each weights buffer (weights[b] as long as grads[b]) into weight_out, in the same pass
  // over the buffers: a model whose norms are read before every update walks its layers once.
  void grad_and_weight_stats(const std::vector<MutableSpan>& grads, float scale, const std::vector<ConstSpan>& weights,
                             std::vector<GradStats>& out, std::vector<double>& weight_out);
  // Copies each weights buffer into its snapshot and returns sum w^2 per buffer.
  void snapshot_sumsq(const std::vector<SnapshotSpan>& spans, std::vector<double>& out);
  // sum (w - snapshot)^2 and sum w^2 per buffer, then snapshot = w: measures this step's
  // update and prepares the next step's snapshot and weight norm in one pass.
  void update_and_snapshot(const std::vector<SnapshotSpan>& spans, std::vector<double>& update_out,
                           std::vector<double>& weight_out);
  // Sum over `rows` rows of `cols` contiguous values of log(sum(exp(row))), for the mean
  // logsumexp (z) of watched logits. Finite input only: callers route tensors with NaN/Inf
  // elsewhere. Accurate to ~1e-6 relative per row.
  double logsumexp_rows_sum(const float* data, int64_t rows, int64_t cols);
  // sum w^2 per buffer (param_norm when no snapshot is due).
  void sumsq(const std::vector<ConstSpan>& spans, std::vector<double>& out);

 private:
  struct Chunk {
    int32_t buffer;
    int64_t begin;
    int64_t end;
  };
  std::vector<Chunk> chunks_;
  std::vector<int64_t> tasks_;   // each task's first chunk, then the chunk count
  std::vector<GradStats> partial_grad_;
  std::vector<double> partial_sum_;
  std::vector<double> partial_sum2_;
};

}  // namespace keel::probe
