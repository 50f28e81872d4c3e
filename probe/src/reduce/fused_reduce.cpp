// Fused CPU reductions: see fused_reduce.hpp for the contract.
//
// [SECTION] Kernels: one pass over a contiguous range, auto-vectorised lane loops
// [SECTION] Chunking: all buffers cut into similar-sized pieces, one OpenMP loop over them,
//           then the per-chunk partials folded into per-buffer results in order
// [SECTION] FusedReducer: the five public passes
//
// Why the kernels look the way they do:
// - No -ffast-math (it would also break NaN detection), so the compiler may not reorder a
//   float sum. Each kernel therefore keeps kLanes independent accumulators and walks the data
//   kLanes elements at a time: in arrays, whose fixed-size inner loop GCC vectorises, or, for
//   the sum-of-squares passes, where GCC vectorised that loop badly, as one vector type.
// - absmax, non-finite and zero tests work on the IEEE bit pattern with the sign cleared, as
//   int32: integer max and compares vectorise without any float-compare/NaN rules, and the
//   ordering NaN > Inf > finite of those patterns makes the max NaN whenever any element is.
// - Sums of squares run in fp32 lanes over blocks of at most kBlock elements (each lane sees
//   kBlock / kLanes terms), and each block's lanes are added into a double, which keeps the
//   relative error near 1e-7 whatever the tensor size.
// - fp32 squares overflow for |x| > 1.8e19 and underflow for |x| < 1e-19, both values a
//   poisoned batch or a dead layer really produces. A block whose fp32 lane sum left the range
//   where it is exact is summed again in fp64, in which every finite float squares to a finite
//   normal number: norms never overflow for finite input, and the extra pass (over 4 KB
//   already in L1) costs nothing in the common case, where no block needs it.
// - The kernels are built three times with target_clones (AVX-512 x86-64-v4, AVX2+FMA
//   haswell, baseline x86-64), so an ordinary build without -march=native still runs wide code.
//   Measured on the 2-core dev VM: the AVX-512 clone runs the probe's passes ~1.5x and the
//   logsumexp row pass ~4x faster than the AVX2 one.

#include "keel/probe/fused_reduce.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace keel::probe {
namespace {

// ---------------------------------------------------------------------------------------
// [SECTION] Kernels
// ---------------------------------------------------------------------------------------

constexpr int kLanes = 16;
constexpr int64_t kBlock = 1024;
constexpr int32_t kAbsMask = 0x7fffffff;
constexpr int32_t kInfBits = 0x7f800000;  // smallest non-finite |pattern|: +Inf

// KEEL_NO_TARGET_CLONES builds only the baseline code, which is how the baseline clone gets
// tested on a machine that would otherwise always pick AVX2 (and for toolchains without ifunc).
// ThreadSanitizer builds do too: the ifunc resolvers run while the dynamic loader relocates
// the program, before the TSan runtime exists, and their instrumentation crashes there
// (every test binary holding a kernel died with SIGSEGV before main).
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && \
    !defined(KEEL_NO_TARGET_CLONES) && !defined(__SANITIZE_THREAD__)
#define KEEL_KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=haswell", "default")))
#else
#define KEEL_KERNEL
#endif

inline int32_t abs_bits(float x) {
  int32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b & kAbsMask;
}

inline float float_from_bits(int32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// Below this a block's fp32 lane sum may have lost terms: the squares of its largest values
// were subnormal or flushed to 0 (|x| < 1e-19); 2^-60 leaves them under 1e-17 of the sum.
constexpr double kFp32TrustedMinSum = 0x1p-60;

// Whether a block's fp32 lane sum (added up in fp64) is the block's sum of squares to fp32
// lane accuracy. Inf means a lane overflowed; NaN came from a NaN input, which fp64 repeats.
inline bool fp32_block_sum_trusted(double s) {
  return s >= kFp32TrustedMinSum && s <= std::numeric_limits<double>::max();
}

// Adds term(i)^2 for i in [b0, b0 + bn) into kN independent lanes of type Acc, walking kN
// elements at a time: the fixed-size inner loop is what GCC vectorises.
template <typename Acc, int kN, typename Term>
inline __attribute__((always_inline)) void add_squares(Acc (&lanes)[kN], int64_t b0, int64_t bn, Term term) {
  int64_t i = b0;
  for (; i + kN <= b0 + bn; i += kN) {
    for (int l = 0; l < kN; ++l) {
      const Acc x = term(i + l);
      lanes[l] += x * x;
    }
  }
  for (int l = 0; i + l < b0 + bn; ++l) {
    const Acc x = term(i + l);
    lanes[l] += x * x;
  }
}

// Whether any lane saw a nonzero term: `bits` is kLanes int32 lanes, an array or a BitLanes.
template <typename Bits>
inline bool any_bits(const Bits& bits) {
  int32_t all = 0;
  for (int l = 0; l < kLanes; ++l) all |= bits[l];
  return all != 0;
}

template <typename Acc, int kN>
inline double lane_total(const Acc (&lanes)[kN]) {
  double s = 0;
  for (int l = 0; l < kN; ++l) s += lanes[l];
  return s;
}

// The fallback: a block's sum of squares in fp64, where no finite float overflows or
// underflows. Eight lanes keep the dependency chain short.
template <typename Term>
inline __attribute__((always_inline)) double sumsq_fp64(int64_t b0, int64_t bn, Term term) {
  double lanes[8] = {};
  add_squares(lanes, b0, bn, term);
  return lane_total(lanes);
}

// The lanes of the sum-of-squares passes as one vector (GCC's vector_size extension, which
// Clang takes too). Written as lane arrays, as the other kernels are, GCC 12 vectorised them
// across the outer loop instead, transposing every 16 elements with permutes: they ran at
// 0.2 ns an element, a third of the gradient pass's speed, and a 256-element weight's norm
// took 65-72 ns against 15 now. Each lane still adds the same terms in the same order.
typedef float FloatLanes __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t BitLanes __attribute__((vector_size(kLanes * sizeof(int32_t))));

// A block's fp32 lanes added up in fp64 pairwise: a chain of 16 dependent adds was most of a
// small tensor's time.
inline __attribute__((always_inline)) double block_total(const FloatLanes& lanes) {
  double d[kLanes];
  for (int l = 0; l < kLanes; ++l) d[l] = lanes[l];
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) d[l] += d[l + width];
  }
  return d[0];
}

// Running totals of one kernel call; absmax is kept as its bit pattern until the end.
struct GradAcc {
  double sumsq = 0;
  int32_t absmax_bits = 0;
  int64_t nonfinite = 0;
  int64_t zeros = 0;
};

struct GradLanes {
  float sq[kLanes] = {};
  int32_t mx[kLanes] = {};
  int32_t nf[kLanes] = {};
  int32_t z[kLanes] = {};

  void add(int l, float x) {
    const int32_t a = abs_bits(x);
    sq[l] += x * x;
    mx[l] = a > mx[l] ? a : mx[l];
    nf[l] += a >= kInfBits;
    z[l] += a == 0;
  }

  // Adds the block's lanes into acc; the block's sum of squares is returned, not added, so the
  // caller can replace it with the fp64 one.
  double flush_into(GradAcc& acc, int64_t& block_nonfinite, int64_t& block_zeros) const {
    double s = 0;
    block_nonfinite = 0;
    block_zeros = 0;
    for (int l = 0; l < kLanes; ++l) {
      s += sq[l];
      acc.absmax_bits = std::max(acc.absmax_bits, mx[l]);
      block_nonfinite += nf[l];
      block_zeros += z[l];
    }
    acc.nonfinite += block_nonfinite;
    acc.zeros += block_zeros;
    return s;
  }
};

// kScale: multiply in place first (loss-scale unscale), then take statistics of the result.
// T is float (unscale in place) or const float (read only).
template <bool kScale, typename T>
inline __attribute__((always_inline)) GradAcc grad_range(T* __restrict p, int64_t n,
                                                         float scale) {
  GradAcc acc;
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t bn = std::min(kBlock, n - b0);
    GradLanes lanes;
    int64_t i = b0;
    for (; i + kLanes <= b0 + bn; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        float x = p[i + l];
        if constexpr (kScale) {
          x *= scale;
          p[i + l] = x;
        }
        lanes.add(l, x);
      }
    }
    for (int l = 0; i + l < b0 + bn; ++l) {
      float x = p[i + l];
      if constexpr (kScale) {
        x *= scale;
        p[i + l] = x;
      }
      lanes.add(l, x);
    }
    int64_t nonfinite = 0, zeros = 0;
    double s = lanes.flush_into(acc, nonfinite, zeros);
    // A non-finite input makes the sum non-finite in any precision; an all-zero block is 0.
    if (!fp32_block_sum_trusted(s) && nonfinite == 0 && zeros < bn) {
      // p already holds the unscaled values.
      s = sumsq_fp64(b0, bn, [p](int64_t k) { return p[k]; });
    }
    acc.sumsq += s;
  }
  return acc;
}

KEEL_KERNEL GradAcc grad_kernel(const float* p, int64_t n) {
  return grad_range<false>(p, n, 1.0f);
}

KEEL_KERNEL GradAcc unscale_grad_kernel(float* p, int64_t n, float scale) {
  return grad_range<true>(p, n, scale);
}

// sum w^2 over [0, n) in blocks, as grad_range does; with kCopy also s = w. Each block's lanes
// also OR every term's |bit pattern|: a block whose bits stay 0 held only zeros, so its sum is
// exactly 0 and needs no fp64 pass (without this a block of zeros, an update that did not
// move a layer or a dead layer's weights, read as an underflow and was summed twice).
template <bool kCopy>
inline __attribute__((always_inline)) double sumsq_range(const float* __restrict w, float* __restrict s, int64_t n) {
  double total = 0;
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t bn = std::min(kBlock, n - b0);
    FloatLanes sq = {};
    BitLanes seen = {};
    const auto add = [&](const FloatLanes& x) {
      BitLanes bits;
      std::memcpy(&bits, &x, sizeof bits);
      sq += x * x;
      seen |= bits & kAbsMask;
    };
    int64_t i = b0;
    for (; i + kLanes <= b0 + bn; i += kLanes) {
      FloatLanes x;
      std::memcpy(&x, w + i, sizeof x);
      if constexpr (kCopy) std::memcpy(s + i, &x, sizeof x);
      add(x);
    }
    if (i < b0 + bn) {
      // The last few, in the first lanes as before; the rest read as zeros, which add nothing.
      const size_t bytes = static_cast<size_t>(b0 + bn - i) * sizeof(float);
      FloatLanes x = {};
      std::memcpy(&x, w + i, bytes);
      if constexpr (kCopy) std::memcpy(s + i, &x, bytes);
      add(x);
    }
    double block = block_total(sq);
    if (!fp32_block_sum_trusted(block) && any_bits(seen)) block = sumsq_fp64(b0, bn, [w](int64_t k) { return w[k]; });
    total += block;
  }
  return total;
}

KEEL_KERNEL double sumsq_kernel(const float* __restrict w, int64_t n) {
  return sumsq_range</*kCopy=*/false>(w, nullptr, n);
}

KEEL_KERNEL double snapshot_kernel(const float* __restrict w, float* __restrict s, int64_t n) {
  return sumsq_range</*kCopy=*/true>(w, s, n);
}

// One pass that both measures this step's update and refreshes the snapshot for the next:
// sum (w - s)^2 and sum w^2 together, then s = w. The snapshot of a block is refreshed only
// after its sums are final, since the fp64 fallback needs the old values; the copy reads the
// block back from L1.
KEEL_KERNEL void update_roll_kernel(const float* __restrict w, float* __restrict s, int64_t n,
                                    double* update_sumsq, double* weight_sumsq) {
  double total_update = 0, total_weight = 0;
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t bn = std::min(kBlock, n - b0);
    float du[kLanes] = {};
    float ww[kLanes] = {};
    // Whether any update and any weight of the block is nonzero (as sumsq_range's `seen`).
    int32_t moved[kLanes] = {};
    int32_t held[kLanes] = {};
    int64_t i = b0;
    for (; i + kLanes <= b0 + bn; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const float x = w[i + l];
        const float d = x - s[i + l];
        du[l] += d * d;
        ww[l] += x * x;
        moved[l] |= abs_bits(d);
        held[l] |= abs_bits(x);
      }
    }
    for (int l = 0; i + l < b0 + bn; ++l) {
      const float x = w[i + l];
      const float d = x - s[i + l];
      du[l] += d * d;
      ww[l] += x * x;
      moved[l] |= abs_bits(d);
      held[l] |= abs_bits(x);
    }
    double su = 0, sw = 0;
    for (int l = 0; l < kLanes; ++l) {
      su += du[l];
      sw += ww[l];
    }
    // w - s itself can overflow fp32 (two finite weights of opposite sign near FLT_MAX): the
    // fallback subtracts in fp64 too.
    // fp32 x - s is exactly 0 only where x == s, so an unmoved block's update is exactly 0.
    if (!fp32_block_sum_trusted(su) && any_bits(moved)) {
      su = sumsq_fp64(b0, bn, [w, s](int64_t k) { return static_cast<double>(w[k]) - s[k]; });
    }
    if (!fp32_block_sum_trusted(sw) && any_bits(held)) sw = sumsq_fp64(b0, bn, [w](int64_t k) { return w[k]; });
    std::memcpy(s + b0, w + b0, static_cast<size_t>(bn) * sizeof(float));
    total_update += su;
    total_weight += sw;
  }
  *update_sumsq = total_update;
  *weight_sumsq = total_weight;
}

// exp(x) for x <= 0, built from arithmetic only so the row loop vectorises (libm's expf does
// not without -ffast-math): 2^n * p(r) with r = x - n ln2 in [-ln2/2, ln2/2] and a degree-6
// polynomial (Cephes expf coefficients, ~1 ulp). Below -87 the result underflows to 0.
inline __attribute__((always_inline)) float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  // Round-to-nearest by the 1.5 * 2^23 trick: t's low mantissa bits hold n, and no floor()
  // call is needed, which is what keeps the loop vectorisable on the baseline target too.
  constexpr float kRound = 12582912.0f;
  const float t = x * 1.44269504088896341f + kRound;
  const float n = t - kRound;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t t_bits;
  std::memcpy(&t_bits, &t, sizeof t_bits);
  const int32_t n_int = t_bits - 0x4B400000;   // n, from t's mantissa
  return p * float_from_bits((n_int + 127) << 23);
}

// Sum over rows of log(sum(exp(row))): each row's max first, so every exp argument is <= 0.
// Finite input only (the caller handles non-finite tensors). `omp simd` allows the float
// reductions to be reordered, which is what lets them vectorise without -ffast-math; a row's
// sum then has fp32 lane error over at most a vocabulary's worth of terms in (0, 1].
KEEL_KERNEL double logsumexp_rows_kernel(const float* __restrict p, int64_t rows, int64_t cols) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = p + r * cols;
    float m = row[0];
#pragma omp simd reduction(max : m)
    for (int64_t i = 0; i < cols; ++i) m = row[i] > m ? row[i] : m;
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < cols; ++i) s += exp_nonpositive(row[i] - m);
    total += static_cast<double>(m) + std::log(static_cast<double>(s));
  }
  return total;
}

// ---------------------------------------------------------------------------------------
// [SECTION] Chunking
// ---------------------------------------------------------------------------------------

// 32K floats = 128 KB per chunk: large enough that scheduling one costs nothing next to the
// pass over it, small enough that a 1.4 MB model still yields a dozen pieces for two cores.
constexpr int64_t kChunkElems = kFusedChunkElems;
// Below this total (4 MB) a parallel region costs more than it saves. Waking the pool and
// joining it is a few microseconds, but libgomp also allocates each region's team, and in a
// trainer's heap, fragmented by autograd's many small tensors freed every step, that
// allocation consolidates the heap first: at 1 MB (2,000 small tensors) the regions were a
// tenth of the probe's time on the training thread.
constexpr int64_t kParallelMinElems = int64_t{1} << 20;

// Cuts every buffer into chunks of at most kChunkElems, and groups consecutive chunks into
// tasks of about kChunkElems each (`tasks` holds each task's first chunk, then the chunk
// count): a model of 50,000 small tensors is a few hundred tasks for the pool, not 50,000,
// and each task writes its chunks' partials side by side.
template <typename Span, typename Chunk>
int64_t build_chunks(const std::vector<Span>& spans, std::vector<Chunk>& chunks, std::vector<int64_t>& tasks) {
  chunks.clear();  // keeps capacity: steady-state calls do not allocate
  tasks.clear();
  int64_t total = 0;
  int64_t task_elems = kChunkElems;   // the first chunk opens a task
  for (size_t b = 0; b < spans.size(); ++b) {
    const int64_t n = spans[b].numel;
    for (int64_t begin = 0; begin < n; begin += kChunkElems) {
      const int64_t end = std::min(n, begin + kChunkElems);
      if (task_elems + (end - begin) > kChunkElems) {
        tasks.push_back(static_cast<int64_t>(chunks.size()));
        task_elems = 0;
      }
      task_elems += end - begin;
      chunks.push_back(Chunk{static_cast<int32_t>(b), begin, end});
    }
    total += std::max<int64_t>(n, 0);
  }
  tasks.push_back(static_cast<int64_t>(chunks.size()));
  return total;
}

// Whether a parallel region would have more than one thread: a trainer that limits itself to
// one (torch::set_num_threads(1) sets OpenMP's count) would pay for the region's team, which
// libgomp allocates and frees for every region of one thread, for no parallelism at all.
inline bool pool_has_threads() {
#ifdef _OPENMP
  return omp_get_max_threads() > 1;
#else
  return false;
#endif
}

// Runs body(c) for every chunk index, task by task; the tasks in parallel only when the work
// pays for the region.
template <typename Body>
void for_each_chunk(const std::vector<int64_t>& tasks, int64_t total_elems, Body body) {
  const int64_t num_tasks = static_cast<int64_t>(tasks.size()) - 1;
  const int64_t num_chunks = tasks[num_tasks];
  if (total_elems >= kParallelMinElems && num_tasks > 1 && pool_has_threads()) {
#pragma omp parallel for schedule(dynamic)
    for (int64_t t = 0; t < num_tasks; ++t) {
      for (int64_t c = tasks[t]; c < tasks[t + 1]; ++c) body(c);
    }
  } else {
    for (int64_t c = 0; c < num_chunks; ++c) body(c);
  }
}

// Runs body(c) for c in [0, count): pieces already large (row blocks of logits).
template <typename Body>
void for_each_piece(int64_t count, int64_t total_elems, Body body) {
  if (total_elems >= kParallelMinElems && count > 1 && pool_has_threads()) {
#pragma omp parallel for schedule(dynamic)
    for (int64_t c = 0; c < count; ++c) body(c);
  } else {
    for (int64_t c = 0; c < count; ++c) body(c);
  }
}

template <typename T>
void grow_to(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// partial[c].absmax carries the chunk's |max| bit pattern reinterpreted as float, so chunks
// combine with an integer max that keeps NaN > Inf > finite.
GradStats to_partial(const GradAcc& a) {
  GradStats s;
  s.sumsq = a.sumsq;
  s.absmax = float_from_bits(a.absmax_bits);
  s.nonfinite = a.nonfinite;
  s.zeros = a.zeros;
  return s;
}

template <typename Chunk>
void combine_grad(const std::vector<Chunk>& chunks, const std::vector<GradStats>& partial,
                  size_t num_buffers, std::vector<GradStats>& out) {
  out.assign(num_buffers, GradStats{});
  for (size_t c = 0; c < chunks.size(); ++c) {
    GradStats& o = out[chunks[c].buffer];
    const GradStats& p = partial[c];
    o.sumsq += p.sumsq;
    o.absmax = float_from_bits(std::max(abs_bits(o.absmax), abs_bits(p.absmax)));
    o.nonfinite += p.nonfinite;
    o.zeros += p.zeros;
  }
}

template <typename Chunk>
void combine_sum(const std::vector<Chunk>& chunks, const std::vector<double>& partial,
                 size_t num_buffers, std::vector<double>& out) {
  out.assign(num_buffers, 0.0);
  for (size_t c = 0; c < chunks.size(); ++c) out[chunks[c].buffer] += partial[c];
}

}  // namespace

// ---------------------------------------------------------------------------------------
// [SECTION] FusedReducer
// ---------------------------------------------------------------------------------------

// As the passes combine a buffer's one chunk: its partial added to zeros (combine_grad,
// combine_sum), which changes nothing.
GradStats grad_stats_of_chunk(const float* data, int64_t n) { return to_partial(grad_kernel(data, n)); }

double sumsq_of_chunk(const float* data, int64_t n) { return sumsq_kernel(data, n); }

void FusedReducer::grad_stats(const std::vector<ConstSpan>& grads, std::vector<GradStats>& out) {
  const int64_t total = build_chunks(grads, chunks_, tasks_);
  grow_to(partial_grad_, chunks_.size());
  for_each_chunk(tasks_, total, [&](int64_t c) {
    const Chunk& k = chunks_[c];
    partial_grad_[c] = to_partial(grad_kernel(grads[k.buffer].data + k.begin, k.end - k.begin));
  });
  combine_grad(chunks_, partial_grad_, grads.size(), out);
}

void FusedReducer::unscale_and_grad_stats(const std::vector<MutableSpan>& grads, float scale,
                                          std::vector<GradStats>& out) {
  const int64_t total = build_chunks(grads, chunks_, tasks_);
  grow_to(partial_grad_, chunks_.size());
  for_each_chunk(tasks_, total, [&](int64_t c) {
    const Chunk& k = chunks_[c];
    partial_grad_[c] = to_partial(
        unscale_grad_kernel(grads[k.buffer].data + k.begin, k.end - k.begin, scale));
  });
  combine_grad(chunks_, partial_grad_, grads.size(), out);
}

void FusedReducer::grad_and_weight_stats(const std::vector<MutableSpan>& grads, float scale,
                                         const std::vector<ConstSpan>& weights, std::vector<GradStats>& out,
                                         std::vector<double>& weight_out) {
  const int64_t total = build_chunks(grads, chunks_, tasks_);
  grow_to(partial_grad_, chunks_.size());
  grow_to(partial_sum_, chunks_.size());
  const bool unscale = scale != 1.0f;
  for_each_chunk(tasks_, total, [&](int64_t c) {
    const Chunk& k = chunks_[c];
    float* g = grads[k.buffer].data + k.begin;
    const int64_t n = k.end - k.begin;
    partial_grad_[c] = to_partial(unscale ? unscale_grad_kernel(g, n, scale) : grad_kernel(g, n));
    partial_sum_[c] = sumsq_kernel(weights[k.buffer].data + k.begin, n);
  });
  combine_grad(chunks_, partial_grad_, grads.size(), out);
  combine_sum(chunks_, partial_sum_, grads.size(), weight_out);
}

void FusedReducer::snapshot_sumsq(const std::vector<SnapshotSpan>& spans,
                                  std::vector<double>& out) {
  const int64_t total = build_chunks(spans, chunks_, tasks_);
  grow_to(partial_sum_, chunks_.size());
  for_each_chunk(tasks_, total, [&](int64_t c) {
    const Chunk& k = chunks_[c];
    const SnapshotSpan& s = spans[k.buffer];
    partial_sum_[c] =
        snapshot_kernel(s.weights + k.begin, s.snapshot + k.begin, k.end - k.begin);
  });
  combine_sum(chunks_, partial_sum_, spans.size(), out);
}

void FusedReducer::update_and_snapshot(const std::vector<SnapshotSpan>& spans,
                                       std::vector<double>& update_out, std::vector<double>& weight_out) {
  const int64_t total = build_chunks(spans, chunks_, tasks_);
  grow_to(partial_sum_, chunks_.size());
  grow_to(partial_sum2_, chunks_.size());
  for_each_chunk(tasks_, total, [&](int64_t c) {
    const Chunk& k = chunks_[c];
    const SnapshotSpan& s = spans[k.buffer];
    update_roll_kernel(s.weights + k.begin, s.snapshot + k.begin, k.end - k.begin, &partial_sum_[c],
                       &partial_sum2_[c]);
  });
  combine_sum(chunks_, partial_sum_, spans.size(), update_out);
  combine_sum(chunks_, partial_sum2_, spans.size(), weight_out);
}

double FusedReducer::logsumexp_rows_sum(const float* data, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return 0.0;
  // Rows are independent: large logits (long sequences x big vocabularies) split across the
  // pool by row blocks, each block writing its own partial.
  const int64_t rows_per_chunk = std::max<int64_t>(1, kChunkElems / cols);
  const int64_t num_chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  grow_to(partial_sum_, static_cast<size_t>(num_chunks));
  for_each_piece(num_chunks, rows * cols, [&](int64_t c) {
    const int64_t begin = c * rows_per_chunk;
    const int64_t count = std::min(rows_per_chunk, rows - begin);
    partial_sum_[c] = logsumexp_rows_kernel(data + begin * cols, count, cols);
  });
  double total = 0;
  for (int64_t c = 0; c < num_chunks; ++c) total += partial_sum_[c];
  return total;
}

void FusedReducer::sumsq(const std::vector<ConstSpan>& spans, std::vector<double>& out) {
  const int64_t total = build_chunks(spans, chunks_, tasks_);
  grow_to(partial_sum_, chunks_.size());
  for_each_chunk(tasks_, total, [&](int64_t c) {
    const Chunk& k = chunks_[c];
    partial_sum_[c] = sumsq_kernel(spans[k.buffer].data + k.begin, k.end - k.begin);
  });
  combine_sum(chunks_, partial_sum_, spans.size(), out);
}

}  // namespace keel::probe
