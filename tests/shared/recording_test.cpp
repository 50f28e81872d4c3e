// The recording format: what is written reads back, frame for frame; the index finds steps;
// a file cut anywhere opens up to its last flushed record; a failed write loses only what it
// was writing; other versions and other files are refused in words.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "keel/wire/recording_reader.hpp"
#include "keel/wire/recording_writer.hpp"
#include "recording_samples.hpp"

namespace keel::wire {
namespace {

using recording::Codec;
using testing::WrittenFrame;

std::string temp_path(const std::string& name) {
  std::string path = ::testing::TempDir() + "keel-recording-" + std::to_string(::getpid()) + "-" + name;
  std::remove(path.c_str());
  return path;
}

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<WrittenFrame> read_frames(const RecordingReader& reader, std::vector<std::string>* errors = nullptr) {
  std::vector<WrittenFrame> out;
  reader.read_all(
      [&](const RecordingFrame& f) { out.push_back({f.kind, f.step, std::vector<char>(f.data, f.data + f.size)}); },
      errors);
  return out;
}

void expect_prefix(const std::vector<WrittenFrame>& read, const std::vector<WrittenFrame>& written) {
  ASSERT_LE(read.size(), written.size());
  for (size_t i = 0; i < read.size(); ++i) {
    ASSERT_EQ(read[i].kind, written[i].kind) << "frame " << i;
    ASSERT_EQ(read[i].step, written[i].step) << "frame " << i;
    ASSERT_EQ(read[i].payload, written[i].payload) << "frame " << i;
  }
}

// Writes `frames`, flushing after each; returns the file size after each flush.
std::vector<uint64_t> write_flushing_each(RecordingWriter& writer, const std::vector<WrittenFrame>& frames) {
  std::vector<uint64_t> sizes;
  for (const WrittenFrame& f : frames) {
    EXPECT_TRUE(writer.append(f.kind, f.step, f.payload.data(), f.payload.size())) << writer.error();
    EXPECT_TRUE(writer.flush()) << writer.error();
    sizes.push_back(writer.file_bytes());
  }
  return sizes;
}

class RecordingRoundTrip : public ::testing::TestWithParam<Codec> {};

TEST_P(RecordingRoundTrip, EveryFrameReadsBackInOrderAcrossChunks) {
  const std::vector<WrittenFrame> frames = testing::sample_run_frames(400);
  const std::string path = temp_path("round-trip");
  std::string error;
  RecordingWriterOptions options;
  options.codec = GetParam();
  options.chunk_target_bytes = 8 << 10;   // several chunks
  auto writer = RecordingWriter::create(path, options, error);
  ASSERT_TRUE(writer) << error;
  for (size_t i = 0; i < frames.size(); ++i) {
    ASSERT_TRUE(writer->append(frames[i].kind, frames[i].step, frames[i].payload.data(), frames[i].payload.size()));
    if (i % 7 == 0) {
      ASSERT_TRUE(writer->flush());
    }
  }
  ASSERT_TRUE(writer->close()) << writer->error();
  EXPECT_EQ(writer->written_messages(), frames.size());
  EXPECT_EQ(writer->lost_messages(), 0u);

  auto reader = RecordingReader::open(path, error);
  ASSERT_TRUE(reader) << error;
  EXPECT_EQ(reader->major_version(), recording::kMajorVersion);
  EXPECT_TRUE(reader->warnings().empty());
  EXPECT_EQ(reader->file_bytes(), writer->file_bytes());
  ASSERT_GT(reader->chunks().size(), 3u);
  std::vector<std::string> errors;
  const std::vector<WrittenFrame> read = read_frames(*reader, &errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(read.size(), frames.size());
  expect_prefix(read, frames);

  uint32_t messages = 0;
  for (size_t i = 0; i < reader->chunks().size(); ++i) {
    const RecordingChunk& c = reader->chunks()[i];
    EXPECT_FALSE(c.open);
    messages += c.messages;
    if (i > 0) {
      EXPECT_LE(reader->chunks()[i - 1].last_step, c.first_step);
    }
  }
  EXPECT_EQ(messages, frames.size());
  // The index finds the chunk of a step without reading the bodies.
  const size_t at = reader->chunk_at_step(250);
  ASSERT_LT(at, reader->chunks().size());
  EXPECT_LE(reader->chunks()[at].first_step, 250);
  EXPECT_GE(reader->chunks()[at].last_step, 250);
  bool found = false;
  ASSERT_TRUE(reader->read_chunk(at, [&](const RecordingFrame& f) { found |= f.step == 250; }, error)) << error;
  EXPECT_TRUE(found);
  EXPECT_EQ(reader->chunk_at_step(400), reader->chunks().size());
}

INSTANTIATE_TEST_SUITE_P(Codecs, RecordingRoundTrip, ::testing::Values(Codec::none, Codec::zstd),
                         [](const auto& info) { return info.param == Codec::none ? "none" : "zstd"; });

TEST(Recording, ZstdPaysOnStepRecords) {
  const std::vector<WrittenFrame> frames = testing::sample_run_frames(2000);
  std::string error;
  uint64_t sizes[2] = {};
  for (Codec codec : {Codec::none, Codec::zstd}) {
    const std::string path = temp_path(codec == Codec::none ? "size-none" : "size-zstd");
    RecordingWriterOptions options;
    options.codec = codec;
    auto writer = RecordingWriter::create(path, options, error);
    ASSERT_TRUE(writer) << error;
    write_flushing_each(*writer, frames);
    ASSERT_TRUE(writer->close());
    sizes[codec == Codec::zstd] = writer->file_bytes();
  }
  EXPECT_LT(sizes[1] * 2, sizes[0]) << "zstd " << sizes[1] << " bytes, none " << sizes[0];
}

class RecordingCut : public ::testing::TestWithParam<Codec> {};

// A trainer killed at any moment: every prefix of the file opens, and holds every record
// flushed before the cut, in order, and nothing else.
TEST_P(RecordingCut, EveryPrefixOpensWithEveryRecordFlushedBeforeTheCut) {
  const std::vector<WrittenFrame> frames = testing::sample_run_frames(60);
  const std::string path = temp_path("cut");
  std::string error;
  RecordingWriterOptions options;
  options.codec = GetParam();
  options.chunk_target_bytes = 4 << 10;
  std::vector<uint64_t> flushed;
  {
    auto writer = RecordingWriter::create(path, options, error);
    ASSERT_TRUE(writer) << error;
    flushed = write_flushing_each(*writer, frames);
    // Not closed: the last chunk stays open, as a killed trainer leaves it. (The destructor
    // would close it, so the bytes are read before.)
    const std::vector<char> bytes = file_bytes(path);
    ASSERT_EQ(bytes.size(), flushed.back());
    for (size_t cut = 0; cut <= bytes.size(); ++cut) {
      auto reader = RecordingReader::open_bytes(std::vector<char>(bytes.begin(), bytes.begin() + cut), error);
      if (cut < recording::kFileHeaderBytes) {
        EXPECT_FALSE(reader) << cut;
        EXPECT_NE(error.find("not a keel recording"), std::string::npos) << error;
        continue;
      }
      ASSERT_TRUE(reader) << "cut at " << cut << ": " << error;
      std::vector<std::string> errors;
      const std::vector<WrittenFrame> read = read_frames(*reader, &errors);
      EXPECT_TRUE(errors.empty()) << "cut at " << cut << ": " << errors.front();
      size_t complete = 0;
      while (complete < flushed.size() && flushed[complete] <= cut) ++complete;
      EXPECT_EQ(read.size(), complete) << "cut at " << cut;
      expect_prefix(read, frames);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, RecordingCut, ::testing::Values(Codec::none, Codec::zstd),
                         [](const auto& info) { return info.param == Codec::none ? "none" : "zstd"; });

// A full disk, made with the file-size limit: the flush that fails loses what it was writing
// and nothing before; once there is room again, recording goes on in the same file.
TEST(Recording, AFailedWriteLosesOnlyWhatItWasWritingAndTheFileReadsOn) {
  const std::vector<WrittenFrame> frames = testing::sample_run_frames(300);
  const std::string path = temp_path("full");
  std::string error;
  RecordingWriterOptions options;
  options.chunk_target_bytes = 16 << 10;
  auto writer = RecordingWriter::create(path, options, error);
  ASSERT_TRUE(writer) << error;

  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  std::vector<bool> kept(frames.size(), true);
  size_t failed = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (i == 150) {
      rlimit small = old;
      small.rlim_cur = writer->file_bytes() + 10;   // room for a few bytes only
      ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
    }
    if (i == 170) {
      ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
    }
    ASSERT_TRUE(writer->append(frames[i].kind, frames[i].step, frames[i].payload.data(), frames[i].payload.size()));
    if (!writer->flush()) {
      ++failed;
      kept[i] = false;
      EXPECT_NE(writer->error().find("cannot write"), std::string::npos) << writer->error();
    }
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  ASSERT_TRUE(writer->close()) << writer->error();
  EXPECT_GT(failed, 0u);
  EXPECT_EQ(writer->lost_messages(), failed);

  auto reader = RecordingReader::open(path, error);
  ASSERT_TRUE(reader) << error;
  std::vector<std::string> errors;
  const std::vector<WrittenFrame> read = read_frames(*reader, &errors);
  EXPECT_TRUE(errors.empty()) << errors.front();
  std::vector<WrittenFrame> expected;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (kept[i]) {
      expected.push_back(frames[i]);
    }
  }
  ASSERT_EQ(read.size(), expected.size());
  expect_prefix(read, expected);
}

TEST(Recording, ANewerMajorVersionIsRefusedInWords) {
  const std::string path = temp_path("newer");
  std::string error;
  {
    auto writer = RecordingWriter::create(path, {}, error);
    ASSERT_TRUE(writer) << error;
  }
  std::vector<char> bytes = file_bytes(path);
  ASSERT_GE(bytes.size(), recording::kFileHeaderBytes);
  bytes[8] = 2;   // major version 2
  EXPECT_FALSE(RecordingReader::open_bytes(bytes, error));
  EXPECT_NE(error.find("format 2.0"), std::string::npos) << error;
  EXPECT_NE(error.find("newer keel"), std::string::npos) << error;
}

TEST(Recording, OtherFilesAreRefusedInWords) {
  std::string error;
  EXPECT_FALSE(RecordingReader::open("/nonexistent/keel.rec", error));
  EXPECT_NE(error.find("cannot open /nonexistent/keel.rec"), std::string::npos) << error;
  const std::vector<char> msgpack = encode(testing::sample_step());
  EXPECT_FALSE(RecordingReader::open_bytes(msgpack, error));
  EXPECT_NE(error.find("not a keel recording"), std::string::npos) << error;
}

TEST(Recording, AnExistingFileIsNeverReplaced) {
  const std::string path = temp_path("exists");
  { std::ofstream(path) << "the user's own file"; }
  std::string error;
  EXPECT_FALSE(RecordingWriter::create(path, {}, error));
  EXPECT_NE(error.find("cannot create"), std::string::npos) << error;
  EXPECT_EQ(file_bytes(path).size(), 19u);
}

TEST(Recording, ADamagedChunkIsReportedAndTheOthersStillRead) {
  const std::vector<WrittenFrame> frames = testing::sample_run_frames(200);
  const std::string path = temp_path("damaged");
  std::string error;
  RecordingWriterOptions options;
  options.chunk_target_bytes = 8 << 10;
  {
    auto writer = RecordingWriter::create(path, options, error);
    ASSERT_TRUE(writer) << error;
    write_flushing_each(*writer, frames);
  }
  std::vector<char> bytes = file_bytes(path);
  auto intact = RecordingReader::open_bytes(bytes, error);
  ASSERT_TRUE(intact) << error;
  ASSERT_GE(intact->chunks().size(), 3u);
  const RecordingChunk second = intact->chunks()[1];
  bytes[second.offset + recording::kChunkHeaderBytes + second.stored_bytes / 2] ^= 0x55;
  auto reader = RecordingReader::open_bytes(bytes, error);
  ASSERT_TRUE(reader) << error;
  std::vector<std::string> errors;
  const std::vector<WrittenFrame> read = read_frames(*reader, &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("checksum"), std::string::npos) << errors[0];
  EXPECT_EQ(read.size(), frames.size() - second.messages);
}

}  // namespace
}  // namespace keel::wire

namespace keel::wire {
namespace {

// Hostile files: thousands of damaged variants of a real recording (bytes flipped, runs
// overwritten, headers' fields set to extremes, cuts and splices). Each opens or is refused
// with an error sentence, never crashes or reads out of bounds (the ASan build runs this
// too), and whatever opens reads without a crash, every failed chunk with a sentence.
TEST(RecordingMutation, DamagedFilesOpenOrAreRefusedInWordsAndNeverCrash) {
  const std::vector<WrittenFrame> frames = testing::sample_run_frames(120);
  const std::string path = temp_path("mutation");
  std::string error;
  RecordingWriterOptions options;
  options.chunk_target_bytes = 4 << 10;
  {
    auto writer = RecordingWriter::create(path, options, error);
    ASSERT_TRUE(writer) << error;
    write_flushing_each(*writer, frames);
  }
  const std::vector<char> seed = file_bytes(path);
  auto intact = RecordingReader::open_bytes(seed, error);
  ASSERT_TRUE(intact) << error;
  std::vector<uint64_t> header_offsets = {0};
  for (const RecordingChunk& c : intact->chunks()) header_offsets.push_back(c.offset);

  std::mt19937_64 random(29);
  const auto below = [&](uint64_t n) { return n == 0 ? 0 : random() % n; };
  size_t opened = 0;
  for (int round = 0; round < 4000; ++round) {
    std::vector<char> bytes = seed;
    const int damages = 1 + static_cast<int>(below(3));
    for (int d = 0; d < damages; ++d) {
      switch (below(5)) {
        case 0:   // flip a bit anywhere
          bytes[below(bytes.size())] ^= static_cast<char>(1u << below(8));
          break;
        case 1: {   // a header field set to an extreme
          const uint64_t at = header_offsets[below(header_offsets.size())] + below(40);
          const char extremes[] = {0, -1, 0x7f, static_cast<char>(0x80)};
          for (int k = 0; k < 4 && at + k < bytes.size(); ++k) bytes[at + k] = extremes[below(4)];
          break;
        }
        case 2:   // cut
          bytes.resize(below(bytes.size() + 1));
          break;
        case 3: {   // a run of noise
          const uint64_t at = below(bytes.size());
          for (uint64_t k = at; k < std::min<uint64_t>(bytes.size(), at + 1 + below(64)); ++k) {
            bytes[k] = static_cast<char>(random());
          }
          break;
        }
        default: {   // splice: a piece of the file repeated elsewhere
          if (bytes.empty()) break;
          const uint64_t from = below(bytes.size());
          const uint64_t length = below(std::min<uint64_t>(256, bytes.size() - from));
          const std::vector<char> piece(bytes.begin() + from, bytes.begin() + from + length);
          bytes.insert(bytes.begin() + below(bytes.size()), piece.begin(), piece.end());
          break;
        }
      }
    }
    auto reader = RecordingReader::open_bytes(bytes, error);
    if (!reader) {
      ASSERT_FALSE(error.empty()) << "round " << round;
      continue;
    }
    ++opened;
    for (size_t i = 0; i < reader->chunks().size(); ++i) {
      std::string chunk_error;
      size_t frames_read = 0;
      if (!reader->read_chunk(i, [&](const RecordingFrame& f) { frames_read += f.size > 0; }, chunk_error)) {
        ASSERT_FALSE(chunk_error.empty()) << "round " << round;
      }
    }
  }
  EXPECT_GT(opened, 2000u);   // the mutants reach the chunk reader, not only the header check
}

}  // namespace
}  // namespace keel::wire
