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
  Pending entry;
  entry.name = name;
  entry.numel = numel;
  entry.rows = rows;
  if (t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous()) {
    span_.assign(1, ConstSpan{t.data_ptr<float>(), t.numel()});
    fused_.grad_stats(span_, stats_);
    const GradStats& s = stats_[0];
    // The fused row kernel assumes finite input; a non-finite tensor takes ATen's exact path.
    const double lse_sum =
        s.nonfinite == 0 ? fused_.logsumexp_rows_sum(t.data_ptr<float>(), static_cast<int64_t>(rows), t.size(-1))
                         : lse_sum_aten().item<double>();
    entry.row = torch::tensor({static_cast<double>(s.absmax), s.sumsq, static_cast<double>(s.nonfinite), lse_sum},
                              torch::kDouble);
  } else if (device_watch_accepts(t)) {
    entry.device_index = t.device().index();
    auto& idle = idle_[entry.device_index];
    if (!idle.empty()) {
      entry.device = std::move(idle.back());
      idle.pop_back();
    } else {
      entry.device = make_device_watch(entry.device_index);
    }
    entry.device->enqueue(t);
  } else {
    auto f = t.to(torch::kFloat);
    auto absmax = t.numel() > 0 ? f.abs().max().to(torch::kDouble)
                                : torch::zeros({}, f.options().dtype(torch::kDouble));
    // Squared in fp64, as the layer norms: logits above 1.8e19 are finite and so is their rms.
    // Only what the device computes goes in the row: a host value copied there would wait.
    entry.row = torch::stack({absmax, f.to(torch::kDouble).square().sum(),
                              torch::isfinite(f).logical_not().sum().to(torch::kDouble), lse_sum_aten()});
  }
  auto same = std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) { return p.name == name; });
  if (same != pending_.end()) {
    // The earlier one's kernel may still run: its pass goes back for reuse on the same stream,
    // which orders a later enqueue after it.
    if (same->device) idle_[same->device_index].push_back(std::move(same->device));
    *same = std::move(entry);
  } else {
    pending_.push_back(std::move(entry));
  }
  if (std::find(names_.begin(), names_.end(), name) == names_.end()) names_.push_back(name);
}

WatchReducer::Batch WatchReducer::take() {
  Batch batch = std::move(pending_);
  pending_.clear();
  return batch;
}

void WatchReducer::collect(Batch& batch, std::vector<wire::WatchStats>& out) {
  out.resize(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    Pending& p = batch[i];
    const double numel = p.numel, rows = p.rows;
    double absmax = 0, sumsq = 0, nonfinite = 0, lse_sum = 0;
    if (p.device) {
      const WatchResult r = p.device->collect();
      absmax = r.absmax;
      sumsq = r.sumsq;
      nonfinite = static_cast<double>(r.nonfinite);
      lse_sum = r.lse_sum;
      idle_[p.device_index].push_back(std::move(p.device));
    } else {
      auto host = p.row.to(torch::kCPU);
      const double* r = host.data_ptr<double>();
      absmax = r[0];
      sumsq = r[1];
      nonfinite = r[2];
      lse_sum = r[3];
    }
    wire::WatchStats& w = out[i];
    w.name = p.name;
    w.absmax = static_cast<float>(absmax);
    w.rms = numel > 0 ? static_cast<float>(std::sqrt(sumsq / numel)) : 0.0f;
    w.nonfinite = static_cast<int64_t>(nonfinite);
    w.z = rows > 0 ? static_cast<float>(lse_sum / rows) : 0.0f;
  }
  batch.clear();
}

}  // namespace keel::probe
