#include "parameter_layout.hpp"

#include <map>

#include "run_description.hpp"

namespace keel::probe {
namespace {

// "a", "a, b", "a, b, c and 4 more": a change to a few layers is named, a change to a whole
// model (a cast) is counted.
std::string names_phrase(const std::vector<std::string>& names) {
  constexpr size_t kNamed = 3;
  std::string out;
  for (size_t i = 0; i < names.size() && i < kNamed; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kNamed) out += " and " + std::to_string(names.size() - kNamed) + " more";
  return out;
}

// Changes of one kind, grouped by what they did ("cast from float32 to bfloat16").
class ChangeList {
 public:
  void add(const std::string& what, const std::string& name) {
    auto [it, fresh] = by_what_.try_emplace(what);
    if (fresh) order_.push_back(what);
    it->second.push_back(name);
  }
  bool empty() const { return order_.empty(); }
  std::string text() const {
    std::string out;
    for (const std::string& what : order_) out += (out.empty() ? "" : "; ") + names_phrase(by_what_.at(what)) + " " + what;
    return out;
  }

 private:
  std::vector<std::string> order_;
  std::map<std::string, std::vector<std::string>> by_what_;
};

std::string shape_text(c10::IntArrayRef sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

}  // namespace

ParameterLayout::ParameterLayout(const NamedParams& params, std::vector<const void*> sequence)
    : sequence_(std::move(sequence)) {
  entries_.reserve(params.size());
  for (const auto& [name, tensor] : params) entries_.push_back(entry_of(name, tensor));
}

bool ParameterLayout::unchanged(const std::vector<const void*>& sequence, const std::vector<torch::Tensor>& params,
                                LayoutChange& change, bool compare_values) const {
  if (!same_sequence(sequence, params.size())) return false;
  change = LayoutChange{};
  for (size_t k = 0; k < params.size(); ++k) {
    prefetch_ahead(params, k);
    if (!same_tensor(k, params[k], compare_values, change.weights)) return false;
  }
  return true;
}

bool ParameterLayout::same_tensor(size_t k, const torch::Tensor& t, bool compare_values, bool& weights_written) const {
  const Entry& was = entries_[k];
  if (was.tensor != t.unsafeGetTensorImpl() || was.device != t.device() || was.dtype != t.scalar_type() ||
      !t.sizes().equals(was.sizes)) {
    return false;
  }
  if (compare_values && values_of(t) != was.values) weights_written = true;
  return true;
}

ParameterLayout::Entry ParameterLayout::entry_of(const std::string& name, const torch::Tensor& t) {
  Entry e;
  e.name = name;
  e.tensor = t.unsafeGetTensorImpl();
  e.device = t.device();
  e.dtype = t.scalar_type();
  e.sizes.assign(t.sizes().begin(), t.sizes().end());
  e.values = values_of(t);
  return e;
}

ParameterLayout::Entry::Values ParameterLayout::values_of(const torch::Tensor& t) {
  // A sparse tensor has no storage of its own, an inference tensor no version counter.
  Entry::Values v;
  if (t.unsafeGetTensorImpl()->has_storage()) {
    v.storage = t.storage().unsafeGetStorageImpl();
    v.storage_offset = t.storage_offset();
  }
  v.version = t.is_inference() ? -1 : t._version();
  return v;
}

void ParameterLayout::remember_weights(const std::vector<torch::Tensor>& params) {
  for (size_t i = 0; i < params.size() && i < entries_.size(); ++i) {
    prefetch_ahead(params, i);
    entries_[i].values = values_of(params[i]);
  }
}

void ParameterLayout::prefetch_ahead(const std::vector<torch::Tensor>& params, size_t k) {
  // The forward and backward passes have left the tensors' bookkeeping out of cache, and a
  // model of 50,000 tensors holds more of it than the cache: ask for a later tensor's while
  // this one's is read, rather than miss on each in turn (asking for all of them first let
  // the first ones fall out again before they were read).
  constexpr size_t kAhead = 32;
  if (k + kAhead < params.size()) __builtin_prefetch(params[k + kAhead].unsafeGetTensorImpl());
}

LayoutChange ParameterLayout::compare(const NamedParams& now) const {
  LayoutChange change;
  ChangeList changes;
  std::vector<bool> matched(entries_.size(), false);
  bool reordered = now.size() != entries_.size();
  for (size_t i = 0; i < now.size(); ++i) {
    const auto& [name, t] = now[i];
    // The same order as planned, unless the set changed.
    size_t k = i;
    if (k >= entries_.size() || entries_[k].name != name) {
      reordered = true;
      for (k = 0; k < entries_.size() && entries_[k].name != name; ++k) {
      }
    }
    if (k == entries_.size()) {
      changes.add("added", name);
      continue;
    }
    matched[k] = true;
    const Entry& was = entries_[k];
    if (was.tensor != t.unsafeGetTensorImpl()) {
      changes.add("replaced", name);
      continue;
    }
    if (was.device != t.device()) changes.add("moved from " + was.device.str() + " to " + t.device().str(), name);
    if (was.dtype != t.scalar_type()) {
      changes.add("cast from " + dtype_name(was.dtype) + " to " + dtype_name(t.scalar_type()), name);
    }
    if (!t.sizes().equals(was.sizes)) changes.add("reshaped from " + shape_text(was.sizes) + " to " + shape_text(t.sizes()), name);
    if (values_of(t) != was.values) change.weights = true;
  }
  for (size_t k = 0; k < entries_.size(); ++k) {
    if (!matched[k]) changes.add("removed", entries_[k].name);
  }
  if (changes.empty() && reordered) changes.add("in a new order", std::to_string(now.size()) + " parameters");
  change.layout = !changes.empty();
  change.what = changes.text();
  if (change.layout) change.weights = true;
  return change;
}

}  // namespace keel::probe
