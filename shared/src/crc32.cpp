#include "keel/wire/crc32.hpp"

#include <array>
#include <cstring>

namespace keel::wire {
namespace {

// Slicing by 8 (Intel's method, as zlib's and many others): table k gives the CRC of a byte
// followed by k zero bytes, so eight bytes are folded per step with eight independent lookups
// instead of one dependent lookup per byte: about 4x the byte-wise speed, which matters to a
// reader checking every chunk of a gigabyte recording.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (size_t k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFFu];
  }
  return t;
}
constexpr Tables kTables = make_tables();

uint32_t load_le32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

uint32_t crc32(uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  crc = ~crc;
  while (size >= 8) {
    const uint32_t lo = load_le32(bytes) ^ crc;
    const uint32_t hi = load_le32(bytes + 4);
    crc = kTables[7][lo & 0xFFu] ^ kTables[6][(lo >> 8) & 0xFFu] ^ kTables[5][(lo >> 16) & 0xFFu] ^
          kTables[4][lo >> 24] ^ kTables[3][hi & 0xFFu] ^ kTables[2][(hi >> 8) & 0xFFu] ^
          kTables[1][(hi >> 16) & 0xFFu] ^ kTables[0][hi >> 24];
    bytes += 8;
    size -= 8;
  }
  for (; size > 0; --size) crc = kTables[0][(crc ^ *bytes++) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

}  // namespace keel::wire
