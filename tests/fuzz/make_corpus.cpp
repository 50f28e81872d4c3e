// Writes the fuzzers' seed corpus from real messages: every message type with its optional
// parts present and absent, and a command of every kind (the seeds of the mutation tests,
// tests/shared/wire_mutator.hpp), encoded by the real encoder.
// Usage: keel_fuzz_corpus tests/fuzz/corpus
//   -> corpus/fuzz_decode/NN-<topic>.msgpack (every seed), corpus/fuzz_command/NN-cmd.msgpack,
//      corpus/fuzz_recording/NN-<what>.keelrec (recordings of the seeds: each codec, several
//      chunks, a last chunk left open as a killed writer leaves it)
// Old seeds (*.msgpack) in those folders are removed first, so a changed wire format leaves
// no stale ones; inputs the fuzzers saved under other names are kept.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "keel/wire/codec.hpp"
#include "keel/wire/recording_writer.hpp"
#include "wire_mutator.hpp"

namespace fs = std::filesystem;

namespace {

bool write_seeds(const fs::path& dir, const std::vector<keel::wire::Message>& messages) {
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".msgpack") fs::remove(entry.path());
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "%02zu-%s.msgpack", i, keel::wire::topic_of(messages[i]));
    const std::vector<char> bytes = keel::wire::encode(messages[i]);
    std::ofstream out(dir / name, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", (dir / name).c_str());
      return false;
    }
  }
  std::printf("%zu seeds in %s\n", messages.size(), dir.c_str());
  return true;
}

// A recording of the seed messages, as the writer leaves it: closed, or (a writer killed
// after its last flush) with its last chunk open.
bool write_recording(const fs::path& path, const std::vector<keel::wire::Message>& messages,
                     keel::wire::recording::Codec codec, size_t chunk_bytes, bool close) {
  using keel::wire::recording::FrameKind;
  fs::remove(path);
  keel::wire::RecordingWriterOptions options;
  options.codec = codec;
  options.chunk_target_bytes = chunk_bytes;
  std::string error;
  auto writer = keel::wire::RecordingWriter::create(path.string(), options, error);
  if (!writer) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return false;
  }
  int64_t step = 0;
  for (const keel::wire::Message& m : messages) {
    FrameKind kind = FrameKind::run;
    if (const auto* r = std::get_if<keel::wire::StepRecord>(&m)) {
      kind = FrameKind::step;
      step = r->step;
    } else if (std::holds_alternative<keel::wire::Event>(m)) {
      kind = FrameKind::event;
    } else if (!std::holds_alternative<keel::wire::RunDescription>(m)) {
      continue;
    }
    const std::vector<char> payload = keel::wire::encode(m);
    writer->append(kind, step, payload.data(), payload.size());
    writer->flush();
  }
  if (close) return writer->close();
  // Left open: the bytes as they are now are copied before the destructor closes the file.
  const fs::path open_copy = path.string() + ".open";
  fs::copy_file(path, open_copy, fs::copy_options::overwrite_existing);
  writer.reset();
  fs::rename(open_copy, path);
  return true;
}

bool write_recordings(const fs::path& dir, const std::vector<keel::wire::Message>& messages) {
  using keel::wire::recording::Codec;
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".keelrec") fs::remove(entry.path());
  }
  const bool ok = write_recording(dir / "00-zstd.keelrec", messages, Codec::zstd, 1 << 20, true) &&
                  write_recording(dir / "01-none.keelrec", messages, Codec::none, 1 << 20, true) &&
                  write_recording(dir / "02-zstd-chunks.keelrec", messages, Codec::zstd, 512, true) &&
                  write_recording(dir / "03-zstd-open.keelrec", messages, Codec::zstd, 2048, false);
  if (ok) std::printf("4 recordings in %s\n", dir.c_str());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  const fs::path root(argv[1]);
  const std::vector<keel::wire::Message> all = keel::wire::testing::seed_messages();
  std::vector<keel::wire::Message> commands;
  for (const keel::wire::Message& m : all) {
    if (std::holds_alternative<keel::wire::Command>(m)) commands.push_back(m);
  }
  const bool ok = write_seeds(root / "fuzz_decode", all) && write_seeds(root / "fuzz_command", commands) &&
                  write_recordings(root / "fuzz_recording", all);
  return ok ? 0 : 1;
}
