// CRC-32 (IEEE 802.3, the polynomial of zlib and PNG), computed in pieces: the recording
// format's check on each chunk body (recording_format.hpp).
// Threads: a pure function over a table built at compile time; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace keel::wire {

// The CRC of `size` bytes following a CRC of the bytes before them (0 to start).
uint32_t crc32(uint32_t crc, const void* data, size_t size);

}  // namespace keel::wire
