#include "step_ledger.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace keel::fault {

Percentiles percentiles(std::vector<double> values) {
  Percentiles out;
  out.count = values.size();
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  const auto at = [&](double q) {
    const size_t rank = static_cast<size_t>(std::ceil(q * double(values.size())));
    return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  out.median = at(0.5);
  out.p99 = at(0.99);
  return out;
}

size_t StepLedger::add_json_lines_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return add_json_lines(text.str());
}

size_t StepLedger::add_json_lines(const std::string& text) {
  size_t added = 0;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '{') continue;   // keel-cli's own notes, not messages
    const nlohmann::json message = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (message.is_discarded() || !message.is_object()) {
      ++skipped_lines_;
      continue;
    }
    if (message.value("type", "") != "step") continue;
    StepSeen step;
    step.step = message.value("step", int64_t{-1});
    step.seq = message.value("seq", uint64_t{0});
    // Non-finite numbers print as strings; a fault test's trainer never makes them here.
    if (message.contains("step_time_us") && message["step_time_us"].is_number()) {
      step.step_time_us = message["step_time_us"].get<double>();
    }
    if (message.contains("probe_us") && message["probe_us"].is_number()) {
      step.probe_us = message["probe_us"].get<double>();
    }
    step.dropped = message.value("dropped", uint64_t{0});
    step.stamp_unix_ns = message.value("stamp_unix_ns", int64_t{0});
    add(step);
    ++added;
  }
  return added;
}

void StepLedger::add(const StepSeen& step) { steps_[step.step] = step; }

int64_t StepLedger::first_step() const { return steps_.empty() ? -1 : steps_.begin()->first; }
int64_t StepLedger::last_step() const { return steps_.empty() ? -1 : steps_.rbegin()->first; }

uint64_t StepLedger::max_dropped() const {
  uint64_t most = 0;
  for (const auto& [step, seen] : steps_) most = std::max(most, seen.dropped);
  return most;
}

std::vector<int64_t> StepLedger::missing(int64_t first, int64_t last) const {
  std::vector<int64_t> out;
  for (int64_t step = first; step <= last; ++step) {
    if (!has(step)) out.push_back(step);
  }
  return out;
}

Percentiles StepLedger::step_time_us(int64_t begin_ns, int64_t end_ns) const {
  std::vector<double> values;
  for (const auto& [step, seen] : steps_) {
    if (seen.stamp_unix_ns >= begin_ns && seen.stamp_unix_ns < end_ns) values.push_back(seen.step_time_us);
  }
  return percentiles(std::move(values));
}

Percentiles StepLedger::probe_us(int64_t begin_ns, int64_t end_ns) const {
  std::vector<double> values;
  for (const auto& [step, seen] : steps_) {
    if (seen.stamp_unix_ns >= begin_ns && seen.stamp_unix_ns < end_ns) values.push_back(seen.probe_us);
  }
  return percentiles(std::move(values));
}

double StepLedger::longest_gap_secs(int64_t begin_ns) const {
  double longest = 0;
  const StepSeen* previous = nullptr;
  for (const auto& [step, seen] : steps_) {
    if (seen.stamp_unix_ns < begin_ns) continue;
    if (previous && step == previous->step + 1) {
      longest = std::max(longest, double(seen.stamp_unix_ns - previous->stamp_unix_ns) * 1e-9);
    }
    previous = &seen;
  }
  return longest;
}

int64_t StepLedger::step_before(int64_t unix_ns) const {
  int64_t newest = -1;
  for (const auto& [step, seen] : steps_) {
    if (seen.stamp_unix_ns < unix_ns) newest = step;
  }
  return newest;
}

StepLedger merged(const std::vector<const StepLedger*>& ledgers) {
  StepLedger out;
  for (const StepLedger* ledger : ledgers) {
    for (const auto& [step, seen] : ledger->steps()) out.add(seen);
  }
  return out;
}

}  // namespace keel::fault
