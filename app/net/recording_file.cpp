#include "net/recording_file.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unordered_set>

#include "keel/wire/codec.hpp"
#include "keel/wire/recording_format.hpp"

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

// Payloads back to back, decoded into `out`; false when the first does not parse (not such a
// file at all).
bool read_payloads(const std::vector<char>& bytes, const std::string& name, std::vector<wire::Message>& out,
                   RecordingFileReport& report, std::string& error) {
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
      out.push_back(std::move(d.message));
    } else {
      ++report.undecodable;
      if (report.problems.size() < 20) report.problems.push_back(name + ": a message is skipped: " + d.error);
    }
    at += consumed;
  }
  return true;
}

}  // namespace

RecordingFile::~RecordingFile() = default;

std::unique_ptr<RecordingFile> RecordingFile::open(const std::string& path, std::string& error) {
  std::unique_ptr<RecordingFile> file(new RecordingFile());
  file->path_ = path;
  if (starts_like_a_recording(path)) {
    file->reader_ = wire::RecordingReader::open(path, error);
    if (!file->reader_) return nullptr;
    file->kind_ = "recording";
    file->file_bytes_ = file->reader_->file_bytes();
    file->warnings_ = file->reader_->warnings();
    return file;
  }
  std::vector<char> telemetry;
  if (!read_whole(path, telemetry, error)) return nullptr;
  file->kind_ = "dump telemetry";
  file->file_bytes_ = telemetry.size();
  // The dump's run description: the telemetry's own starts with one only where the layers
  // changed within it.
  const std::filesystem::path run = std::filesystem::path(path).parent_path() / "run.msgpack";
  std::vector<char> description;
  std::string ignored;
  std::error_code ec;
  if (std::filesystem::path(path).filename() != "run.msgpack" && std::filesystem::exists(run, ec) &&
      read_whole(run.string(), description, ignored)) {
    RecordingFileReport described;
    read_payloads(description, run.string(), file->telemetry_, described, ignored);
  }
  if (!read_payloads(telemetry, path, file->telemetry_, file->telemetry_report_, error)) return nullptr;
  file->warnings_ = file->telemetry_report_.problems;
  return file;
}

const std::vector<wire::RecordingChunk>& RecordingFile::chunks() const {
  static const std::vector<wire::RecordingChunk> none;
  return reader_ ? reader_->chunks() : none;
}

bool RecordingFile::hand_over(const wire::RecordingFrame& frame, const MessageFn& message,
                              RecordingFileReport& report) const {
  wire::DecodeResult d = wire::decode(frame.data, frame.size);
  if (!d.ok) {
    ++report.undecodable;
    if (report.problems.size() < 20) {
      report.problems.push_back("a message at step " + std::to_string(frame.step) + " is skipped: " + d.error);
    }
    return true;
  }
  ++report.messages;
  return message(d.message);
}

void RecordingFile::read_all(const MessageFn& message, RecordingFileReport& report,
                             const ProgressFn& progress) const {
  report.kind = kind_;
  report.file_bytes = file_bytes_;
  if (!reader_) {
    report.undecodable += telemetry_report_.undecodable;
    report.problems.insert(report.problems.end(), warnings_.begin(), warnings_.end());
    for (wire::Message m : telemetry_) {
      ++report.messages;
      if (!message(m)) return;
    }
    if (progress) progress(1, 1);
    return;
  }
  report.problems.insert(report.problems.end(), warnings_.begin(), warnings_.end());
  const size_t total = reader_->chunks().size();
  for (size_t i = 0; i < total; ++i) {
    bool go_on = true;
    std::string error;
    const bool whole = reader_->read_chunk(
        i,
        [&](const wire::RecordingFrame& frame) {
          if (go_on) go_on = hand_over(frame, message, report);
        },
        error);
    if (!whole) report.problems.push_back(error);
    if (!go_on) return;
    if (progress) progress(i + 1, total);
  }
}

void RecordingFile::read_first_picture(const FirstPicturePlan& plan, const MessageFn& message,
                                       RecordingFileReport& report, const ProgressFn& progress) const {
  if (!reader_ || plan.whole) {
    read_all(message, report, progress);
    return;
  }
  report.kind = kind_;
  report.file_bytes = file_bytes_;
  StepSampler sampler(plan);
  // A chunk with events is read once into `kept` (its frames, copied: a megabyte, a tenth of
  // the time decompressing it again would take), then handed over in order, with the step
  // records of the steps its events name whatever the sampling (the first non-finite's, a
  // skip's).
  struct Kept {
    wire::RecordingFrame frame;
    size_t offset;
  };
  std::vector<Kept> kept;
  std::vector<char> copies;
  std::unordered_set<int64_t> event_steps;
  for (size_t n = 0; n < plan.chunks.size(); ++n) {
    const size_t i = plan.chunks[n];
    if (i >= reader_->chunks().size()) break;
    std::string error;
    bool go_on = true;
    bool whole = true;
    if (reader_->chunks()[i].flags & wire::recording::kChunkHasDescriptionOrEvent) {
      kept.clear();
      copies.clear();
      event_steps.clear();
      whole = reader_->read_chunk(
          i,
          [&](const wire::RecordingFrame& frame) {
            if (frame.kind == wire::recording::FrameKind::event) event_steps.insert(frame.step);
            kept.push_back(Kept{frame, copies.size()});
            copies.insert(copies.end(), frame.data, frame.data + frame.size);
          },
          error);
      for (Kept& k : kept) {
        if (!go_on) break;
        k.frame.data = copies.data() + k.offset;
        if (k.frame.kind == wire::recording::FrameKind::step && !sampler.take(k.frame.step) &&
            event_steps.count(k.frame.step) == 0) {
          continue;
        }
        go_on = hand_over(k.frame, message, report);
      }
    } else {
      whole = reader_->read_chunk(
          i,
          [&](const wire::RecordingFrame& frame) {
            if (!go_on) return;
            if (frame.kind == wire::recording::FrameKind::step && !sampler.take(frame.step)) return;
            go_on = hand_over(frame, message, report);
          },
          error);
    }
    if (!whole) report.problems.push_back(error);
    if (!go_on) return;
    if (progress) progress(n + 1, plan.chunks.size());
  }
}

bool read_recording_file(const std::string& path, const std::function<void(wire::Message&)>& message,
                         RecordingFileReport& report, std::string& error) {
  report = RecordingFileReport{};
  std::unique_ptr<RecordingFile> file = RecordingFile::open(path, error);
  if (!file) return false;
  file->read_all(
      [&](wire::Message& m) {
        message(m);
        return true;
      },
      report);
  return true;
}

}  // namespace keel::app
