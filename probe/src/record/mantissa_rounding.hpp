// mantissa_rounding: a step record's per-layer values rounded to fewer float32 mantissa bits,
// for a recording that trades precision it does not need for disk (ProbeOptions::
// record_mantissa_bits).
//
// What it is for: the low mantissa bits of a grad norm or an update ratio are noise, and noise
// does not compress: keel-demo's recording takes 18 bytes per layer-step exact, and about 8
// with 8 mantissa bits kept (relative error at most 2^-9, 0.2%: a chart or a heatmap cell
// shows no difference). Rounding is to nearest (half away from zero in magnitude), on the bit
// pattern, so a value never crosses into another binade's sign or becomes non-finite, except a
// value within the rounding of FLT_MAX, which becomes +-Inf as float32 arithmetic would round
// it. NaN and +-Inf stay exactly what they were, and the blocks of counts (wire::MetricValue::
// kCount: grad_nonfinite, which a reader compares exactly) are never rounded.
// Threads: pure functions. Never: allocates, throws, or touches anything but the record's
// layer_values.
#pragma once

#include "keel/wire/messages.hpp"

namespace keel::probe {

// The float32 mantissa bits a recording keeps when nothing is rounded.
inline constexpr int kExactMantissaBits = 23;

// `value` with only its top `bits` mantissa bits (1 to 23; 23 or more: unchanged).
float round_mantissa(float value, int bits);

// Rounds every layer and module value of `record` but their count blocks. False when `bits` keeps
// everything (nothing to do).
bool round_layer_values(wire::StepRecord& record, int bits);

}  // namespace keel::probe
