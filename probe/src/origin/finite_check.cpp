#include "finite_check.hpp"

#include <cstdint>
#include <exception>

namespace keel::probe {
namespace {

// Whether none of `n` values has every exponent bit set, in blocks so that a bad one ends the
// read early and the loop over a block vectorises.
template <class Bits>
bool exponents_finite(const void* data, int64_t n, Bits exponent) {
  const Bits* bits = static_cast<const Bits*>(data);
  constexpr int64_t kBlock = 4096;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = start + kBlock < n ? start + kBlock : n;
    Bits bad = 0;
    for (int64_t i = start; i < end; ++i) bad |= static_cast<Bits>((bits[i] & exponent) == exponent);
    if (bad) return false;
  }
  return true;
}

}  // namespace

bool all_finite(const at::Tensor& t) {
  try {
    if (t.numel() == 0) return true;
    if (t.device().is_cpu()) {
      const at::Tensor c = t.is_contiguous() ? t : t.contiguous();
      switch (c.scalar_type()) {
        case at::kFloat: return exponents_finite<uint32_t>(c.data_ptr(), c.numel(), 0x7f800000u);
        case at::kDouble: return exponents_finite<uint64_t>(c.data_ptr(), c.numel(), 0x7ff0000000000000ull);
        case at::kHalf: return exponents_finite<uint16_t>(c.data_ptr(), c.numel(), 0x7c00u);
        case at::kBFloat16: return exponents_finite<uint16_t>(c.data_ptr(), c.numel(), 0x7f80u);
        default: break;
      }
    }
    return at::isfinite(t.detach()).all().item<bool>();
  } catch (const std::exception&) {
    return true;
  }
}

}  // namespace keel::probe
