#include "fault_table.hpp"

#include <cstdio>

namespace keel::fault {
namespace {

std::string format(const char* pattern, double a, double b = 0, double c = 0, double d = 0) {
  char text[160];
  std::snprintf(text, sizeof text, pattern, a, b, c, d);
  return text;
}

// "+3.1%" of the fault window against the undisturbed one; "n/a" without both.
std::string change(double baseline, double faulted) {
  if (baseline <= 0 || faulted <= 0) return "n/a";
  return format("%+.1f%%", 100.0 * (faulted - baseline) / baseline);
}

std::string ms(const Percentiles& p) {
  return p.count == 0 ? "n/a" : format("%.1f / %.1f", p.median / 1000.0, p.p99 / 1000.0);
}

}  // namespace

std::string table_header() {
  return "| fault injected | step time ms, median / p99: undisturbed -> fault (change) | probe us, median / p99: "
         "undisturbed -> fault | trainer RSS MiB start -> end (max) | steps lost (checked, dropped & counted) | "
         "commands sent / ok / refused / unanswered | client after |\n"
         "| --- | --- | --- | --- | --- | --- | --- |\n";
}

std::string table_row(const FaultOutcome& o) {
  const std::string step_time = ms(o.baseline_step_us) + " -> " + ms(o.fault_step_us) + " (" +
                                change(o.baseline_step_us.median, o.fault_step_us.median) + " / " +
                                change(o.baseline_step_us.p99, o.fault_step_us.p99) + ")";
  const auto us = [](const Percentiles& p) {
    return p.count == 0 ? std::string("n/a") : format("%.0f / %.0f", p.median, p.p99);
  };
  const std::string probe = us(o.baseline_probe_us) + " -> " + us(o.fault_probe_us);
  const std::string rss = format("%.1f -> %.1f (%.1f)", o.rss_start_kib / 1024.0, o.rss_end_kib / 1024.0,
                                 o.rss_max_kib / 1024.0);
  const std::string lost = std::to_string(o.steps_missing) + " (" + std::to_string(o.steps_checked) + ", " +
                           std::to_string(o.steps_dropped) + ")";
  const std::string commands = o.commands_sent == 0
                                   ? std::string("-")
                                   : std::to_string(o.commands_sent) + " / " + std::to_string(o.commands_ok) +
                                         " / " + std::to_string(o.commands_refused) + " / " +
                                         std::to_string(o.commands_unanswered);
  const std::string client = !o.failure.empty() ? "scenario failed: " + o.failure
                             : o.client_survived ? "running"
                                                 : "GONE";
  return "| " + o.fault + " | " + step_time + " | " + probe + " | " + rss + " | " + lost + " | " + commands +
         " | " + client + " |\n";
}

std::string outcome_text(const FaultOutcome& o) {
  std::string text = o.fault + ":\n";
  text += "  step time ms median/p99: " + ms(o.baseline_step_us) + " undisturbed (" +
          std::to_string(o.baseline_step_us.count) + " steps), " + ms(o.fault_step_us) + " under the fault (" +
          std::to_string(o.fault_step_us.count) + " steps)\n";
  text += format("  probe us median/p99: %.0f/%.0f undisturbed, %.0f/%.0f under the fault\n",
                 o.baseline_probe_us.median, o.baseline_probe_us.p99, o.fault_probe_us.median,
                 o.fault_probe_us.p99);
  text += format("  trainer RSS KiB: %.0f at start, %.0f at end, %.0f max; longest step gap %.3f s\n",
                 double(o.rss_start_kib), double(o.rss_end_kib), double(o.rss_max_kib), o.longest_gap_secs);
  text += "  steps checked " + std::to_string(o.steps_checked) + ", missing " + std::to_string(o.steps_missing) +
          ", dropped (counted by the probe) " + std::to_string(o.steps_dropped) + "\n";
  if (o.commands_sent > 0) {
    text += "  commands sent " + std::to_string(o.commands_sent) + ", ok " + std::to_string(o.commands_ok) +
            ", refused " + std::to_string(o.commands_refused) + ", unanswered " +
            std::to_string(o.commands_unanswered) + ", duplicate acks " + std::to_string(o.duplicate_acks) + "\n";
  }
  text += std::string("  trainer ") + (o.trainer_survived ? "running" : "GONE") + ", client " +
          (o.client_survived ? "running" : "GONE") + "\n";
  if (!o.detail.empty()) text += "  " + o.detail + "\n";
  if (!o.failure.empty()) text += "  scenario failed: " + o.failure + "\n";
  return text;
}

}  // namespace keel::fault
