// Fused CPU reductions: see fused_reduce.hpp for the contract.
//
// [SECTION] Kernels: one pass over a contiguous range, auto-vectorised lane loops
// [SECTION] Chunking: all buffers cut into similar-sized pieces, one OpenMP loop over them,
//           then the per-chunk partials folded into per-buffer results in order
// [SECTION] FusedReducer: the five public passes
//
// Why the kernels look the way they do:
// - No -ffast-math (it would also break NaN detection), so the compiler may not reorder a
//   float sum. Each kernel therefore keeps kLanes independent accumulators in arrays and walks
//   the data kLanes elements at a time; the fixed-size inner loop is what GCC vectorises.
// - absmax, non-finite and zero tests work on the IEEE bit pattern with the sign cleared, as
//   int32: integer max and compares vectorise without any float-compare/NaN rules, and the
//   ordering NaN > Inf > finite of those patterns makes the max NaN whenever any element is.
// - Sums of squares run in fp32 lanes over blocks of at most kBlock elements (each lane sees
//   kBlock / kLanes terms), and each block's lanes are added into a double, which keeps the
//   relative error near 1e-7 whatever the tensor size.
// - The kernels are built twice (AVX2 and baseline x86-64) with target_clones, so an ordinary
//   build without -march=native still runs 256-bit code where the CPU has it.

#include "keel/probe/fused_reduce.hpp"

#include <algorithm>
#include <cstring>

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
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && \
    !defined(KEEL_NO_TARGET_CLONES)
#define KEEL_KERNEL __attribute__((target_clones("avx2", "default")))
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

  void flush_into(GradAcc& acc) const {
    double s = 0;
    for (int l = 0; l < kLanes; ++l) {
      s += sq[l];
      acc.absmax_bits = std::max(acc.absmax_bits, mx[l]);
      acc.nonfinite += nf[l];
      acc.zeros += z[l];
    }
    acc.sumsq += s;
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
    lanes.flush_into(acc);
  }
  return acc;
}

KEEL_KERNEL GradAcc grad_kernel(const float* p, int64_t n) {
  return grad_range<false>(p, n, 1.0f);
}

KEEL_KERNEL GradAcc unscale_grad_kernel(float* p, int64_t n, float scale) {
  return grad_range<true>(p, n, scale);
}

// Shared shape of the three sum-of-squares passes: term(i) gives the value to square, and may
// have a side effect (the snapshot copy).
template <typename Term>
inline __attribute__((always_inline)) double sumsq_range(int64_t n, Term term) {
  double total = 0;
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t bn = std::min(kBlock, n - b0);
    float sq[kLanes] = {};
    int64_t i = b0;
    for (; i + kLanes <= b0 + bn; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const float x = term(i + l);
        sq[l] += x * x;
      }
    }
    for (int l = 0; i + l < b0 + bn; ++l) {
      const float x = term(i + l);
      sq[l] += x * x;
    }
    double s = 0;
    for (int l = 0; l < kLanes; ++l) s += sq[l];
    total += s;
  }
  return total;
}

KEEL_KERNEL double sumsq_kernel(const float* __restrict w, int64_t n) {
  return sumsq_range(n, [w](int64_t i) { return w[i]; });
}

KEEL_KERNEL double snapshot_kernel(const float* __restrict w, float* __restrict s, int64_t n) {
  return sumsq_range(n, [w, s](int64_t i) {
    s[i] = w[i];
    return w[i];
  });
}

KEEL_KERNEL double update_kernel(const float* __restrict w, const float* __restrict s,
                                 int64_t n) {
  return sumsq_range(n, [w, s](int64_t i) { return w[i] - s[i]; });
}

// ---------------------------------------------------------------------------------------
// [SECTION] Chunking
// ---------------------------------------------------------------------------------------

// 32K floats = 128 KB per chunk: large enough that scheduling one costs nothing next to the
// pass over it, small enough that a 1.4 MB model still yields a dozen pieces for two cores.
constexpr int64_t kChunkElems = int64_t{1} << 15;
// Below this total a parallel region (wake the pool, join) costs more than it saves.
constexpr int64_t kParallelMinElems = int64_t{1} << 18;

template <typename Span, typename Chunk>
int64_t build_chunks(const std::vector<Span>& spans, std::vector<Chunk>& chunks) {
  chunks.clear();  // keeps capacity: steady-state calls do not allocate
  int64_t total = 0;
  for (size_t b = 0; b < spans.size(); ++b) {
    const int64_t n = spans[b].numel;
    for (int64_t begin = 0; begin < n; begin += kChunkElems) {
      chunks.push_back(Chunk{static_cast<int32_t>(b), begin, std::min(n, begin + kChunkElems)});
    }
    total += std::max<int64_t>(n, 0);
  }
  return total;
}

// Runs body(c) for every chunk index; in parallel only when the work pays for the region.
template <typename Body>
void for_each_chunk(int64_t num_chunks, int64_t total_elems, Body body) {
  if (total_elems >= kParallelMinElems && num_chunks > 1) {
#pragma omp parallel for schedule(dynamic)
    for (int64_t c = 0; c < num_chunks; ++c) body(c);
  } else {
    for (int64_t c = 0; c < num_chunks; ++c) body(c);
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

void FusedReducer::grad_stats(const std::vector<ConstSpan>& grads, std::vector<GradStats>& out) {
  const int64_t total = build_chunks(grads, chunks_);
  grow_to(partial_grad_, chunks_.size());
  for_each_chunk(static_cast<int64_t>(chunks_.size()), total, [&](int64_t c) {
    const Chunk& k = chunks_[c];
    partial_grad_[c] = to_partial(grad_kernel(grads[k.buffer].data + k.begin, k.end - k.begin));
  });
  combine_grad(chunks_, partial_grad_, grads.size(), out);
}

void FusedReducer::unscale_and_grad_stats(const std::vector<MutableSpan>& grads, float scale,
                                          std::vector<GradStats>& out) {
  const int64_t total = build_chunks(grads, chunks_);
  grow_to(partial_grad_, chunks_.size());
  for_each_chunk(static_cast<int64_t>(chunks_.size()), total, [&](int64_t c) {
    const Chunk& k = chunks_[c];
    partial_grad_[c] = to_partial(
        unscale_grad_kernel(grads[k.buffer].data + k.begin, k.end - k.begin, scale));
  });
  combine_grad(chunks_, partial_grad_, grads.size(), out);
}

void FusedReducer::snapshot_sumsq(const std::vector<SnapshotSpan>& spans,
                                  std::vector<double>& out) {
  const int64_t total = build_chunks(spans, chunks_);
  grow_to(partial_sum_, chunks_.size());
  for_each_chunk(static_cast<int64_t>(chunks_.size()), total, [&](int64_t c) {
    const Chunk& k = chunks_[c];
    const SnapshotSpan& s = spans[k.buffer];
    partial_sum_[c] =
        snapshot_kernel(s.weights + k.begin, s.snapshot + k.begin, k.end - k.begin);
  });
  combine_sum(chunks_, partial_sum_, spans.size(), out);
}

void FusedReducer::update_sumsq(const std::vector<UpdateSpan>& spans, std::vector<double>& out) {
  const int64_t total = build_chunks(spans, chunks_);
  grow_to(partial_sum_, chunks_.size());
  for_each_chunk(static_cast<int64_t>(chunks_.size()), total, [&](int64_t c) {
    const Chunk& k = chunks_[c];
    const UpdateSpan& s = spans[k.buffer];
    partial_sum_[c] = update_kernel(s.weights + k.begin, s.snapshot + k.begin, k.end - k.begin);
  });
  combine_sum(chunks_, partial_sum_, spans.size(), out);
}

void FusedReducer::sumsq(const std::vector<ConstSpan>& spans, std::vector<double>& out) {
  const int64_t total = build_chunks(spans, chunks_);
  grow_to(partial_sum_, chunks_.size());
  for_each_chunk(static_cast<int64_t>(chunks_.size()), total, [&](int64_t c) {
    const Chunk& k = chunks_[c];
    partial_sum_[c] = sumsq_kernel(spans[k.buffer].data + k.begin, k.end - k.begin);
  });
  combine_sum(chunks_, partial_sum_, spans.size(), out);
}

}  // namespace keel::probe
