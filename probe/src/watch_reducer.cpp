#include "watch_reducer.hpp"

#include <algorithm>
#include <cmath>

namespace keel::probe {

void WatchReducer::watch(const std::string& name, const torch::Tensor& tensor) {
  torch::NoGradGuard no_grad;
  auto t = tensor.detach();
  const double numel = static_cast<double>(t.numel());
  const double rows = t.dim() > 0 && t.size(-1) > 0 ? numel / static_cast<double>(t.size(-1)) : 0.0;
  const auto lse_sum_aten = [&] {
    return rows > 0 ? t.to(torch::kFloat).logsumexp(-1).sum(torch::kDouble)
                    : torch::zeros({}, t.options().dtype(torch::kDouble));
  };
  torch::Tensor row;
  if (t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous()) {
    span_.assign(1, ConstSpan{t.data_ptr<float>(), t.numel()});
    fused_.grad_stats(span_, stats_);
    const GradStats& s = stats_[0];
    // The fused row kernel assumes finite input; a non-finite tensor takes ATen's exact path.
    const double lse_sum =
        s.nonfinite == 0 ? fused_.logsumexp_rows_sum(t.data_ptr<float>(), static_cast<int64_t>(rows), t.size(-1))
                         : lse_sum_aten().item<double>();
    row = torch::tensor({static_cast<double>(s.absmax), s.sumsq, static_cast<double>(s.nonfinite), lse_sum,
                         numel, rows},
                        torch::kDouble);
  } else {
    auto f = t.to(torch::kFloat);
    auto absmax = t.numel() > 0 ? f.abs().max().to(torch::kDouble)
                                : torch::zeros({}, f.options().dtype(torch::kDouble));
    auto meta = torch::tensor({numel, rows}, torch::kDouble).to(t.device());
    // Squared in fp64, as the layer norms: logits above 1.8e19 are finite and so is their rms.
    row = torch::cat({torch::stack({absmax, f.to(torch::kDouble).square().sum(),
                                    torch::isfinite(f).logical_not().sum().to(torch::kDouble), lse_sum_aten()}),
                      meta});
  }
  auto same = std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) { return p.name == name; });
  if (same != pending_.end()) {
    same->row = row;
  } else {
    pending_.push_back({name, row});
  }
  if (std::find(names_.begin(), names_.end(), name) == names_.end()) names_.push_back(name);
}

void WatchReducer::collect(std::vector<wire::WatchStats>& out) {
  out.resize(pending_.size());
  for (size_t i = 0; i < pending_.size(); ++i) {
    auto host = pending_[i].row.to(torch::kCPU);
    const double* r = host.data_ptr<double>();
    wire::WatchStats& w = out[i];
    w.name = pending_[i].name;
    w.absmax = static_cast<float>(r[0]);
    w.rms = r[4] > 0 ? static_cast<float>(std::sqrt(r[1] / r[4])) : 0.0f;
    w.nonfinite = static_cast<int64_t>(r[2]);
    w.z = r[5] > 0 ? static_cast<float>(r[3] / r[5]) : 0.0f;
  }
  pending_.clear();
}

}  // namespace keel::probe
