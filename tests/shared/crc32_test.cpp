// CRC-32: the standard check value, and slicing by 8 equal to the plain byte-at-a-time
// definition on every length and alignment, whole or in pieces.
#include "keel/wire/crc32.hpp"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace keel::wire {
namespace {

// The definition, one bit at a time.
uint32_t bitwise_crc32(const unsigned char* bytes, size_t size) {
  uint32_t crc = ~0u;
  for (size_t i = 0; i < size; ++i) {
    crc ^= bytes[i];
    for (int k = 0; k < 8; ++k) crc = (crc & 1) ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
  }
  return ~crc;
}

TEST(Crc32, TheCheckValueOf123456789) { EXPECT_EQ(crc32(0, "123456789", 9), 0xCBF43926u); }

TEST(Crc32, EveryLengthAndAlignmentWholeOrInPiecesIsTheDefinitions) {
  std::vector<unsigned char> bytes(300);
  uint32_t x = 12345;
  for (unsigned char& b : bytes) b = static_cast<unsigned char>((x = x * 1103515245u + 12345u) >> 24);
  for (size_t start = 0; start < 9; ++start) {
    for (size_t size = 0; start + size <= bytes.size(); size += 7) {
      const uint32_t expected = bitwise_crc32(bytes.data() + start, size);
      ASSERT_EQ(crc32(0, bytes.data() + start, size), expected) << start << "+" << size;
      const size_t half = size / 3;
      ASSERT_EQ(crc32(crc32(0, bytes.data() + start, half), bytes.data() + start + half, size - half), expected);
    }
  }
}

}  // namespace
}  // namespace keel::wire
