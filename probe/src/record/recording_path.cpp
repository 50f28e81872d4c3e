#include "recording_path.hpp"

namespace keel::probe {

namespace {

std::string safe(const std::string& text) {
  std::string out = text.empty() ? "run" : text;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (out[0] == '.') out[0] = '_';
  // File names stop at 255 bytes; the run id is the part that can be long.
  constexpr size_t kMaxStem = 160;
  if (out.size() > kMaxStem) out.resize(kMaxStem);
  return out;
}

}  // namespace

std::string recording_file_name(const std::string& run_id, const std::string& model, int32_t rank, int attempt) {
  std::string name = safe(run_id);
  if (!model.empty()) name += "-" + safe(model);
  name += "-rank" + std::to_string(rank);
  if (attempt > 1) name += "-" + std::to_string(attempt);
  return name + kRecordingExtension;
}

}  // namespace keel::probe
