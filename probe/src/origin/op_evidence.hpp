// What an op's inputs show about the non-finite value it produced, in a few words.
//
// What it is for: "aten::log produced a NaN" is where; "log of a value that underflowed to 0"
// is why, and it is what a user fixes (an eps, a clamp, a lower learning rate). The evidence
// is read from the op's inputs as the op saw them: the smallest |x| of a log or a divisor, the
// largest logit of an exp or a softmax, the smallest row variance and the eps of a norm, and
// otherwise the inputs' absmax against the largest value of the output's dtype.
// Threads: the thread that ran the op, inside the tracer's callback (which has turned its own
// recording off). Never: throws (a failure reads as "" evidence).
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace keel::probe {

// `op` as ATen names it ("aten::log"); `inputs` the op's floating tensor inputs in order;
// `scalars` its floating scalar arguments in order (a norm's eps is its last); `output` the
// first output that holds a NaN or Inf.
std::string op_evidence(const std::string& op, const std::vector<at::Tensor>& inputs,
                        const std::vector<double>& scalars, const at::Tensor& output);

// The largest finite value of a floating dtype (65504 for float16).
double dtype_max(at::ScalarType type);

}  // namespace keel::probe
