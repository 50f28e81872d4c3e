#include "net/recording_file.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "keel/wire/codec.hpp"
#include "keel/wire/recording_format.hpp"
#include "keel/wire/recording_reader.hpp"

namespace keel::app {

namespace {

// A dump's telemetry is at most its ring: a few thousand records of one model.
constexpr uintmax_t kMaxTelemetryBytes = uintmax_t{2} << 30;

bool starts_like_a_recording(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof wire::recording::kFileMagic] = {};
  in.read(magic, sizeof magic);
  return in.gcount() == sizeof magic && std::memcmp(magic, wire::recording::kFileMagic, sizeof magic) == 0;
}

bool read_whole(const std::string& path, std::vector<char>& bytes, std::string& error) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) {
    error = "cannot open " + path + ": " + ec.message();
    return false;
  }
  if (size > kMaxTelemetryBytes) {
    error = path + " is " + std::to_string(size) + " bytes: no dump's telemetry is that large";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    error = "cannot read " + path;
    return false;
  }
  return true;
}

// Payloads back to back; false when the first does not parse (not such a file at all).
bool read_payloads(const std::vector<char>& bytes, const std::string& name,
                   const std::function<void(wire::Message&)>& message, RecordingFileReport& report,
                   std::string& error) {
  size_t at = 0;
  while (at < bytes.size()) {
    size_t consumed = 0;
    wire::DecodeResult d = wire::decode_first(bytes.data() + at, bytes.size() - at, consumed);
    if (consumed == 0 || (at == 0 && !d.ok)) {
      if (at == 0) {
        error = name + " is neither a keel recording nor a dump's telemetry: " + d.error;
        return false;
      }
      report.problems.push_back(name + ": the bytes from " + std::to_string(at) + " do not parse (" + d.error +
                                "): the last " + std::to_string(bytes.size() - at) + " bytes are skipped");
      break;
    }
    if (d.ok) {
      ++report.messages;
      message(d.message);
    } else {
      ++report.undecodable;
      if (report.problems.size() < 20) report.problems.push_back(name + ": a message is skipped: " + d.error);
    }
    at += consumed;
  }
  return true;
}

}  // namespace

bool read_recording_file(const std::string& path, const std::function<void(wire::Message&)>& message,
                         RecordingFileReport& report, std::string& error) {
  report = RecordingFileReport{};
  if (starts_like_a_recording(path)) {
    auto reader = wire::RecordingReader::open(path, error);
    if (!reader) return false;
    report.kind = "recording";
    report.file_bytes = reader->file_bytes();
    report.problems = reader->warnings();
    reader->read_all(
        [&](const wire::RecordingFrame& frame) {
          wire::DecodeResult d = wire::decode(frame.data, frame.size);
          if (!d.ok) {
            ++report.undecodable;
            if (report.problems.size() < 20) {
              report.problems.push_back("a message at step " + std::to_string(frame.step) + " is skipped: " + d.error);
            }
            return;
          }
          ++report.messages;
          message(d.message);
        },
        &report.problems);
    return true;
  }
  std::vector<char> telemetry;
  if (!read_whole(path, telemetry, error)) return false;
  report.kind = "dump telemetry";
  report.file_bytes = telemetry.size();
  // The dump's run description: the telemetry's own starts with one only where the layers
  // changed within it.
  const std::filesystem::path run = std::filesystem::path(path).parent_path() / "run.msgpack";
  std::vector<char> description;
  std::string ignored;
  std::error_code ec;
  if (std::filesystem::path(path).filename() != "run.msgpack" && std::filesystem::exists(run, ec) &&
      read_whole(run.string(), description, ignored)) {
    RecordingFileReport described;
    if (read_payloads(description, run.string(), message, described, ignored)) report.messages += described.messages;
  }
  return read_payloads(telemetry, path, message, report, error);
}

}  // namespace keel::app
