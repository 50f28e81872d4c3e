#include "checkpoint_capture.hpp"

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <string_view>

#include "keel/wire/codec.hpp"

namespace keel::probe {
namespace {

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
          out += escaped;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string manifest(const DumpReason& why, const wire::RunDescription& description,
                     const std::vector<CheckpointFile>& files, size_t telemetry_steps) {
  const int64_t unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  std::ostringstream out;
  out << "{\n  \"format\": \"keel-dump-1\",\n"
      << "  \"step\": " << why.step << ",\n"
      << "  \"reason\": " << json_string(why.reason) << ",\n"
      << "  \"label\": " << json_string(why.label) << ",\n"
      << "  \"command_id\": " << why.command_id << ",\n"
      << "  \"run_id\": " << json_string(description.run_id) << ",\n"
      << "  \"model\": " << json_string(description.model) << ",\n"
      << "  \"rank\": " << description.rank << ",\n"
      << "  \"unix_ms\": " << unix_ms << ",\n"
      << "  \"state\": \"parameters and optimizer state before the update of this step\",\n"
      << "  \"telemetry_steps\": " << telemetry_steps << ",\n"
      << "  \"files\": {";
  for (size_t i = 0; i < files.size(); ++i) {
    out << (i ? ", " : "") << json_string(files[i].name) << ": " << files[i].bytes.size();
  }
  out << "}\n}\n";
  return out.str();
}

}  // namespace

std::string checkpoint_name(const DumpReason& why) {
  std::string name = "step-" + std::to_string(why.step) + "-" + why.reason;
  if (!why.model.empty()) name += "-" + why.model;
  if (!why.label.empty()) name += "-" + why.label;
  if (why.rank >= 0) name += "-rank" + std::to_string(why.rank);
  return name;
}

std::vector<CheckpointFile> capture_checkpoint(TrainedModel& model, OptimizerAdapter& optimizer,
                                               const wire::RunDescription& description,
                                               const std::vector<KeptMessage>& telemetry,
                                               const DumpReason& why) {
  std::vector<CheckpointFile> files;
  files.push_back({"model.pt", model.serialise()});
  files.push_back({"optimizer.pt", optimizer.serialise()});
  std::string stream;
  size_t steps = 0;
  for (const auto& [topic, payload] : telemetry) {
    stream.append(payload->data(), payload->size());
    if (topic == std::string_view(wire::kTopicStep)) ++steps;
  }
  files.push_back({"telemetry.msgpack", std::move(stream)});
  const std::vector<char> run = wire::encode(description);
  files.push_back({"run.msgpack", std::string(run.begin(), run.end())});
  // Written last so it can list the others' sizes.
  files.push_back({"manifest.json", manifest(why, description, files, steps)});
  return files;
}

}  // namespace keel::probe
