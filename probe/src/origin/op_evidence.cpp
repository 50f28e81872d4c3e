#include "op_evidence.hpp"

#include <cmath>
#include <limits>

#include "short_number.hpp"

namespace keel::probe {
namespace {

// "aten::_softmax" -> "softmax", "aten::log_" -> "log": the math, whatever the variant.
std::string base_name(const std::string& op) {
  std::string name = op.rfind("aten::", 0) == 0 ? op.substr(6) : op;
  while (!name.empty() && name.front() == '_') name.erase(name.begin());
  while (!name.empty() && name.back() == '_') name.pop_back();
  return name;
}

bool is_one_of(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (name == n) return true;
  }
  return false;
}

double min_abs(const at::Tensor& t) { return t.detach().abs().min().item<double>(); }
double min_of(const at::Tensor& t) { return t.detach().min().item<double>(); }
double max_of(const at::Tensor& t) { return t.detach().max().item<double>(); }
double abs_max(const at::Tensor& t) { return t.detach().abs().max().item<double>(); }

const char* dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    default: return "its dtype";
  }
}

std::string log_evidence(const std::string& name, const at::Tensor& x) {
  const double lowest = min_of(x);
  const std::string what = name == "xlogy" ? "x * log(y)" : name;
  if (lowest < (name == "log1p" ? -1.0 : 0.0)) return what + " of a negative value (min " + short_number(lowest) + ")";
  const double smallest = min_abs(x);
  if (smallest == 0) return what + " of a value that underflowed to 0";
  return what + " of values down to " + short_number(smallest);
}

std::string division_evidence(const at::Tensor* numerator, const at::Tensor& divisor) {
  const double smallest = min_abs(divisor);
  std::string text = smallest == 0 ? "division by 0" : "division by |x| as small as " + short_number(smallest);
  if (numerator) text += " (numerator up to " + short_number(abs_max(*numerator)) + ")";
  return text;
}

std::string exp_evidence(const std::string& name, const at::Tensor& x) {
  const double largest = max_of(x);
  // exp(x) overflows above log(max): 88.7 in float32, 11.1 in float16.
  const double limit = std::log(dtype_max(x.scalar_type()));
  std::string text = (name.find("softmax") != std::string::npos ? "max logit " : "max input ") + short_number(largest);
  if (largest > limit) text += " (exp overflows " + std::string(dtype_name(x.scalar_type())) + " above " + short_number(limit) + ")";
  return text + ", min " + short_number(min_of(x));
}

// The smallest variance among the rows a norm divides by, and its eps.
std::string norm_evidence(const std::string& name, const at::Tensor& x, const std::vector<double>& scalars) {
  at::Tensor rows = x.detach().to(at::kFloat);
  if (name.find("batch_norm") != std::string::npos && rows.dim() >= 2) {
    rows = rows.transpose(0, 1).reshape({rows.size(1), -1});   // one row per channel
  } else if (rows.dim() >= 1) {
    rows = rows.reshape({-1, rows.size(-1)});
  }
  const double variance = rows.var(-1, /*unbiased=*/false).min().item<double>();
  const std::string eps = scalars.empty() ? std::string("?") : short_number(scalars.back());
  return "normalizes a row whose variance is " + short_number(variance) + " with eps " + eps;
}

std::string overflow_evidence(const std::vector<at::Tensor>& inputs, const at::Tensor& output) {
  std::string text = inputs.size() == 1 ? "input absmax " : "inputs' absmax ";
  for (size_t i = 0; i < inputs.size() && i < 4; ++i) text += (i ? ", " : "") + short_number(abs_max(inputs[i]));
  const bool has_nan = output.detach().isnan().any().item<bool>();
  if (has_nan) return text + "; NaN from finite values";
  return text + "; the output overflows " + dtype_name(output.scalar_type()) + " (max " +
         short_number(dtype_max(output.scalar_type())) + ")";
}

}  // namespace

double dtype_max(at::ScalarType type) {
  switch (type) {
    case at::kHalf: return 65504.0;
    case at::kBFloat16: return 3.3895313892515355e38;
    case at::kFloat: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

std::string op_evidence(const std::string& op, const std::vector<at::Tensor>& inputs,
                        const std::vector<double>& scalars, const at::Tensor& output) {
  try {
    const std::string name = base_name(op);
    if (inputs.empty()) return "";
    if (is_one_of(name, {"log", "log2", "log10", "log1p"})) return log_evidence(name, inputs[0]);
    if (name == "xlogy" && inputs.size() >= 2) return log_evidence(name, inputs[1]);
    if (is_one_of(name, {"div", "true_divide", "floor_divide"}) && inputs.size() >= 2) {
      return division_evidence(&inputs[0], inputs[1]);
    }
    if (is_one_of(name, {"reciprocal", "rsqrt"})) return division_evidence(nullptr, inputs[0]);
    if (name == "sqrt" && min_of(inputs[0]) < 0) return "sqrt of a negative value (min " + short_number(min_of(inputs[0])) + ")";
    if (name.find("softmax") != std::string::npos || is_one_of(name, {"exp", "exp2", "expm1", "logsumexp", "cosh", "sinh"})) {
      return exp_evidence(name, inputs[0]);
    }
    if (name.find("norm") != std::string::npos && name != "norm" && name != "linalg_vector_norm") {
      return norm_evidence(name, inputs[0], scalars);
    }
    return overflow_evidence(inputs, output);
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace keel::probe
