// libFuzzer target: the recording reader (keel --open, keel-cli summary|export): a file's
// bytes are indexed as RecordingReader::open does, every chunk is decoded, and every frame's
// payload is given to wire::decode. Beyond "no crash, no over-read" it checks that a refused
// file and a failed chunk come with an error sentence.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "keel/wire/codec.hpp"
#include "keel/wire/recording_reader.hpp"

namespace {

[[noreturn]] void broken(const char* promise) {
  std::fprintf(stderr, "fuzz_recording: %s\n", promise);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace keel;
  std::string error;
  auto reader = wire::RecordingReader::open_bytes(std::vector<char>(data, data + size), error);
  if (!reader) {
    if (error.empty()) broken("a file was refused without an error sentence");
    return 0;
  }
  for (size_t i = 0; i < reader->chunks().size(); ++i) {
    std::string chunk_error;
    const bool read = reader->read_chunk(
        i,
        [](const wire::RecordingFrame& frame) {
          const wire::DecodeResult d = wire::decode(frame.data, frame.size);
          if (!d.ok && d.error.empty()) broken("a frame's payload was rejected without an error sentence");
        },
        chunk_error);
    if (!read && chunk_error.empty()) broken("a chunk failed without an error sentence");
  }
  return 0;
}
