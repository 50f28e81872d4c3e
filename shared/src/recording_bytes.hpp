// The recording format's fixed-size headers to and from bytes (recording_format.hpp): private
// to keel_wire's writer and reader, so the layout is written down in one place.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "keel/wire/recording_format.hpp"

namespace keel::wire {

struct RecordingChunkHeader {
  recording::Codec codec = recording::Codec::none;
  uint8_t flags = 0;
  uint32_t stored_bytes = 0;
  uint32_t raw_bytes = 0;
  uint32_t messages = 0;
  uint32_t crc32 = 0;
  int64_t first_step = 0;
  int64_t last_step = 0;
};

namespace recording_bytes {

template <class T>
inline void put(char* at, T value) {
  // Little-endian on every machine keel builds for (x86-64, aarch64); checked at compile time.
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the recording format is little-endian");
  std::memcpy(at, &value, sizeof value);
}

template <class T>
inline T get(const char* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

}  // namespace recording_bytes

inline std::array<char, recording::kFileHeaderBytes> write_file_header(uint16_t major, uint16_t minor,
                                                                       int64_t created_unix_ms) {
  using namespace recording_bytes;
  std::array<char, recording::kFileHeaderBytes> b{};
  std::memcpy(b.data(), recording::kFileMagic, sizeof recording::kFileMagic);
  put<uint16_t>(b.data() + 8, major);
  put<uint16_t>(b.data() + 10, minor);
  put<uint32_t>(b.data() + 12, 0);
  put<int64_t>(b.data() + 16, created_unix_ms);
  return b;
}

inline std::array<char, recording::kChunkHeaderBytes> write_chunk_header(const RecordingChunkHeader& h) {
  using namespace recording_bytes;
  std::array<char, recording::kChunkHeaderBytes> b{};
  std::memcpy(b.data(), recording::kChunkMagic, sizeof recording::kChunkMagic);
  b[4] = static_cast<char>(h.codec);
  b[5] = static_cast<char>(h.flags);
  put<uint32_t>(b.data() + 8, h.stored_bytes);
  put<uint32_t>(b.data() + 12, h.raw_bytes);
  put<uint32_t>(b.data() + 16, h.messages);
  put<uint32_t>(b.data() + 20, h.crc32);
  put<int64_t>(b.data() + 24, h.first_step);
  put<int64_t>(b.data() + 32, h.last_step);
  return b;
}

inline RecordingChunkHeader read_chunk_header(const char* b) {
  using namespace recording_bytes;
  RecordingChunkHeader h;
  h.codec = static_cast<recording::Codec>(static_cast<uint8_t>(b[4]));
  h.flags = static_cast<uint8_t>(b[5]);
  h.stored_bytes = get<uint32_t>(b + 8);
  h.raw_bytes = get<uint32_t>(b + 12);
  h.messages = get<uint32_t>(b + 16);
  h.crc32 = get<uint32_t>(b + 20);
  h.first_step = get<int64_t>(b + 24);
  h.last_step = get<int64_t>(b + 32);
  return h;
}

inline std::array<char, recording::kFrameHeaderBytes> write_frame_header(recording::FrameKind kind, int64_t step,
                                                                         uint32_t length) {
  using namespace recording_bytes;
  std::array<char, recording::kFrameHeaderBytes> b{};
  b[0] = static_cast<char>(kind);
  put<int64_t>(b.data() + 1, step);
  put<uint32_t>(b.data() + 9, length);
  return b;
}

}  // namespace keel::wire
