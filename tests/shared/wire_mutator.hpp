// WireMutator: deterministic hostile variants of real payloads, for the mutation tests.
//
// What it is for: codec_reject_test.cpp feeds the decoder every truncation and bit flip of
// each sample plus blind random bytes; that rarely gets past the first gates. This mutator
// knows where every msgpack value of a real payload starts and ends, so it can lie about one
// length, swap one value for another type, change the version or the message type, drop or
// repeat one map entry, or transplant a value from another message, and then reach the typed
// field readers behind the parser. Byte-level damage (bit flips, truncation, noise, splices)
// is mixed in, alone and on top of the structural mutations.
// Threads: one Mutator per thread (it owns its random generator).
// Never: depends on anything but the payload bytes of the seeds, so new wire fields become
// new mutation targets without a change here. Same seed, same cases, on every platform: only
// mt19937_64's raw output is used (std distributions differ between standard libraries).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <msgpack.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "keel/wire/codec.hpp"
#include "wire_samples.hpp"

namespace keel::wire::testing {

// Real messages of every type, with every optional part both present and absent, and a
// command of every kind a client may send.
inline std::vector<Message> seed_messages() {
  std::vector<Message> seeds = sample_messages();
  RunDescription bare_run;
  bare_run.run_id = "bare";
  seeds.push_back(bare_run);
  StepRecord empty_step;
  empty_step.metric_mask = 0;
  seeds.push_back(empty_step);
  for (const char* kind : {"skip", "dump", "describe", "history"}) {
    Command command = sample_command();
    command.kind = kind;
    command.count = 2;
    seeds.push_back(command);
  }
  Ack refusal = sample_ack();
  refusal.ok = false;
  refusal.path.clear();
  seeds.push_back(refusal);
  RunDescription sharded_run = sample_run();   // a sharded job's rank (FSDP): the key present
  sharded_run.sharded = true;
  seeds.push_back(sharded_run);
  return seeds;
}

// One msgpack value inside a payload.
struct ValueSpan {
  enum class Family { kScalar, kStr, kBin, kExt, kArray, kMap };
  size_t offset = 0;        // its first (type) byte
  size_t header_bytes = 0;  // type byte and length/count bytes (and ext's type byte)
  size_t total_bytes = 0;   // the whole value, nested values included
  Family family = Family::kScalar;
  uint32_t length = 0;      // str/bin/ext bytes, array items or map entries
  bool is_key = false;
  std::string key;          // for a map value: its key
};

// The values of a well-formed payload, in byte order. Throws std::runtime_error if the bytes
// are not one complete msgpack value: seeds come from encode(), so that is a test bug.
class SpanWalker {
 public:
  explicit SpanWalker(const std::vector<char>& bytes) : bytes_(bytes) {
    const size_t end = walk(0, false, "");
    if (end != bytes_.size()) throw std::runtime_error("seed has trailing bytes");
  }
  const std::vector<ValueSpan>& spans() const { return spans_; }

 private:
  uint64_t be(size_t at, size_t width) const {
    if (at + width > bytes_.size()) throw std::runtime_error("seed is truncated");
    uint64_t value = 0;
    for (size_t i = 0; i < width; ++i) value = value << 8 | static_cast<uint8_t>(bytes_[at + i]);
    return value;
  }

  // Records the value at `at` and everything inside it; returns the offset just past it.
  size_t walk(size_t at, bool is_key, const std::string& key) {
    using F = ValueSpan::Family;
    const uint8_t b = static_cast<uint8_t>(be(at, 1));
    ValueSpan span;
    span.offset = at;
    span.is_key = is_key;
    span.key = key;
    size_t body = 0;  // bytes after the header that are not nested values
    auto sized = [&](F family, size_t width, size_t extra_header) {
      span.family = family;
      span.length = static_cast<uint32_t>(be(at + 1, width));
      span.header_bytes = 1 + width + extra_header;
    };
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
      span.header_bytes = 1;
    } else if (b <= 0x8f) {
      span.family = F::kMap, span.length = b & 0x0f, span.header_bytes = 1;
    } else if (b <= 0x9f) {
      span.family = F::kArray, span.length = b & 0x0f, span.header_bytes = 1;
    } else if (b <= 0xbf) {
      span.family = F::kStr, span.length = b & 0x1f, span.header_bytes = 1;
    } else if (b >= 0xc4 && b <= 0xc6) {
      sized(F::kBin, size_t{1} << (b - 0xc4), 0);
    } else if (b >= 0xc7 && b <= 0xc9) {
      sized(F::kExt, size_t{1} << (b - 0xc7), 1);
    } else if (b == 0xca || b == 0xcb) {
      span.header_bytes = b == 0xca ? 5 : 9;
    } else if ((b >= 0xcc && b <= 0xcf) || (b >= 0xd0 && b <= 0xd3)) {
      span.header_bytes = 1 + (size_t{1} << ((b - 0xcc) & 3));
    } else if (b >= 0xd4 && b <= 0xd8) {
      span.family = F::kExt, span.length = 1u << (b - 0xd4), span.header_bytes = 2;
    } else if (b >= 0xd9 && b <= 0xdb) {
      sized(F::kStr, size_t{1} << (b - 0xd9), 0);
    } else if (b == 0xdc || b == 0xdd) {
      sized(F::kArray, b == 0xdc ? 2 : 4, 0);
    } else if (b == 0xde || b == 0xdf) {
      sized(F::kMap, b == 0xde ? 2 : 4, 0);
    } else {
      throw std::runtime_error("seed holds the reserved msgpack byte 0xc1");
    }
    const size_t index = spans_.size();
    spans_.push_back(span);
    size_t next = at + span.header_bytes;
    if (span.family == F::kStr || span.family == F::kBin || span.family == F::kExt) {
      body = span.length;
    } else if (span.family == F::kArray) {
      for (uint32_t i = 0; i < span.length; ++i) next = walk(next, false, "");
    } else if (span.family == F::kMap) {
      for (uint32_t i = 0; i < span.length; ++i) {
        const size_t key_index = spans_.size();
        next = walk(next, true, "");
        const ValueSpan& k = spans_[key_index];
        std::string name;
        if (k.family == F::kStr) name.assign(&bytes_[k.offset + k.header_bytes], k.length);
        next = walk(next, false, name);
      }
    }
    next += body;
    if (next > bytes_.size()) throw std::runtime_error("seed is truncated");
    spans_[index].total_bytes = next - at;
    return next;
  }

  const std::vector<char>& bytes_;
  std::vector<ValueSpan> spans_;
};

struct Seed {
  std::string name;  // its topic, for failure messages
  std::vector<char> bytes;
  std::vector<ValueSpan> spans;
};

inline std::vector<Seed> make_seeds(const std::vector<Message>& messages) {
  std::vector<Seed> seeds;
  for (const Message& m : messages) {
    Seed seed{topic_of(m), encode(m), {}};
    seed.spans = SpanWalker(seed.bytes).spans();
    seeds.push_back(std::move(seed));
  }
  return seeds;
}

enum class Mutation {
  kTruncate,         // a prefix of the payload
  kBitFlips,         // 1 to 8 flipped bits
  kByteNoise,        // bytes overwritten, inserted or deleted at random
  kHugeLength,       // one str/bin/ext/array/map header re-written with a lying length
  kCountOffByOne,    // one array/map count one more or less than its items
  kOversize,         // one honest value past its limit: a long array, string or block, a big integer
  kWrongType,        // one value (or key) replaced by a value of another msgpack type
  kWrongVersion,     // "v" set to another number or type
  kWrongMessageType, // "type" set to another message's topic or to junk
  kEntrySurgery,     // one map entry dropped or repeated, count adjusted
  kTransplant,       // one value replaced by a value taken from another message
  kSplice,           // the head of one payload glued to the tail of another
  kRandomBytes,      // noise, sometimes behind a plausible first map entry
  kRandomMessage,    // a random map of the protocol's keys with random values
};
inline constexpr int kMutationCount = 14;

inline const char* mutation_name(Mutation m) {
  static constexpr std::array<const char*, kMutationCount> kNames = {
      "truncate",     "bit_flips",     "byte_noise",    "huge_length",    "count_off_by_one",
      "oversize",     "wrong_type",   "wrong_version", "wrong_message_type", "entry_surgery", "transplant",
      "splice",       "random_bytes",  "random_message"};
  return kNames[static_cast<size_t>(m)];
}

class Mutator {
 public:
  Mutator(std::vector<Seed> seeds, uint64_t rng_seed) : seeds_(std::move(seeds)), rng_(rng_seed) {
    for (const Seed& seed : seeds_) {
      for (const ValueSpan& span : seed.spans) {
        if (span.is_key || span.key.empty()) continue;
        const auto known = std::find(keys_.begin(), keys_.end(), span.key);
        const size_t k = static_cast<size_t>(known - keys_.begin());
        if (known == keys_.end()) {
          keys_.push_back(span.key);
          key_values_.emplace_back();
        }
        key_values_[k].emplace_back(seed.bytes.begin() + span.offset,
                                    seed.bytes.begin() + span.offset + span.total_bytes);
      }
    }
    aliens_ = alien_values();
  }

  const std::vector<Seed>& seeds() const { return seeds_; }

  // A mutant of `seed` (an index into seeds()). Structural mutations are followed, one time
  // in four, by a truncation or bit flips, so damage also lands inside damaged structure.
  std::vector<char> mutate(Mutation m, size_t seed) {
    const Seed& s = seeds_[seed];
    std::vector<char> out = apply(m, s);
    if (m != Mutation::kTruncate && m != Mutation::kBitFlips && !out.empty() && below(4) == 0) {
      if (below(2) == 0) {
        out.resize(below(out.size()));
      } else {
        flip_bits(out);
      }
    }
    return out;
  }

 private:
  using Bytes = std::vector<char>;
  using F = ValueSpan::Family;

  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  template <typename T>
  const T& pick(const std::vector<T>& items) { return items[below(items.size())]; }

  static Bytes packed(const std::function<void(Packer&)>& write) {
    msgpack::sbuffer buffer;
    Packer packer(buffer);
    write(packer);
    return Bytes(buffer.data(), buffer.data() + buffer.size());
  }

  static Bytes replaced(const Bytes& in, size_t offset, size_t count, const Bytes& with) {
    Bytes out(in.begin(), in.begin() + offset);
    out.insert(out.end(), with.begin(), with.end());
    out.insert(out.end(), in.begin() + offset + count, in.end());
    return out;
  }

  static void put_be(Bytes& out, uint64_t value, size_t width) {
    for (size_t i = width; i-- > 0;) out.push_back(static_cast<char>(value >> (8 * i)));
  }

  // A header of `family` declaring `length`, in the 16- or 32-bit form (8-bit for str/bin/ext
  // when it fits and `narrow`), keeping ext's type byte when `ext_type` is given.
  static Bytes header(F family, uint64_t length, bool narrow, char ext_type) {
    Bytes h;
    const bool fits8 = narrow && length <= 0xff;
    const bool fits16 = length <= 0xffff;
    const size_t width = fits8 ? 1 : fits16 ? 2 : 4;
    const size_t step = fits8 ? 0 : fits16 ? 1 : 2;
    switch (family) {
      case F::kStr: h.push_back(static_cast<char>(0xd9 + step)); break;
      case F::kBin: h.push_back(static_cast<char>(0xc4 + step)); break;
      case F::kExt: h.push_back(static_cast<char>(0xc7 + step)); break;
      case F::kArray: h.push_back(static_cast<char>(fits16 ? 0xdc : 0xdd)); break;
      case F::kMap: h.push_back(static_cast<char>(fits16 ? 0xde : 0xdf)); break;
      case F::kScalar: return h;
    }
    const bool container = family == F::kArray || family == F::kMap;
    put_be(h, length, container ? (fits16 ? 2 : 4) : width);
    if (family == F::kExt) h.push_back(ext_type);
    return h;
  }

  Bytes rewrite_header(const Bytes& in, const ValueSpan& span, uint64_t length) {
    const char ext_type = span.family == F::kExt ? in[span.offset + span.header_bytes - 1] : 0;
    return replaced(in, span.offset, span.header_bytes,
                    header(span.family, length, below(2) == 0, ext_type));
  }

  const ValueSpan* pick_span(const Seed& s, bool (*want)(const ValueSpan&)) {
    std::vector<const ValueSpan*> candidates;
    for (const ValueSpan& span : s.spans) {
      if (want(span)) candidates.push_back(&span);
    }
    return candidates.empty() ? nullptr : pick(candidates);
  }

  const ValueSpan* value_of_key(const Seed& s, const char* key) {
    for (const ValueSpan& span : s.spans) {
      if (!span.is_key && span.key == key) return &span;
    }
    return nullptr;
  }

  void flip_bits(Bytes& b) {
    if (b.empty()) return;
    const uint64_t flips = 1 + below(8);
    for (uint64_t i = 0; i < flips; ++i) b[below(b.size())] ^= static_cast<char>(1u << below(8));
  }

  // Lengths that a liar would choose: the largest of each width, just past every limit, just
  // past the bytes that are there, and off by one from the truth.
  uint64_t lying_length(const Bytes& in, const ValueSpan& span) {
    const uint64_t rest = in.size() - span.offset - span.header_bytes;
    const std::array<uint64_t, 12> choices = {
        0xffffffffu, 0x7fffffffu, 0x80000000u, 0xffffu,
        kMaxStringBytes + 1ull, kMaxLayers + 1ull, kMaxPayloadBytes + 1ull, rest + 1,
        in.size(), span.length + 1ull, span.length == 0 ? 1ull : span.length - 1ull, 0};
    return choices[below(choices.size())];
  }

  Bytes apply(Mutation m, const Seed& s) {
    const Bytes& in = s.bytes;
    switch (m) {
      case Mutation::kTruncate:
        return Bytes(in.begin(), in.begin() + below(in.size()));
      case Mutation::kBitFlips: {
        Bytes out = in;
        flip_bits(out);
        return out;
      }
      case Mutation::kByteNoise: {
        Bytes out = in;
        const uint64_t edits = 1 + below(6);
        for (uint64_t i = 0; i < edits && !out.empty(); ++i) {
          const size_t at = below(out.size());
          switch (below(3)) {
            case 0: out[at] = static_cast<char>(rng_()); break;
            case 1: out.insert(out.begin() + at, static_cast<char>(rng_())); break;
            default: out.erase(out.begin() + at); break;
          }
        }
        return out;
      }
      case Mutation::kHugeLength: {
        const ValueSpan* span = pick_span(s, [](const ValueSpan& v) { return v.family != F::kScalar; });
        return span ? rewrite_header(in, *span, lying_length(in, *span)) : in;
      }
      case Mutation::kCountOffByOne: {
        const ValueSpan* span = pick_span(
            s, [](const ValueSpan& v) { return v.family == F::kArray || v.family == F::kMap; });
        if (!span) return in;
        const uint64_t length = below(2) == 0 || span->length == 0 ? span->length + 1ull : span->length - 1ull;
        return rewrite_header(in, *span, length);
      }
      case Mutation::kOversize:
        return oversized(in, pick(s.spans));
      case Mutation::kWrongType: {
        const ValueSpan& span = pick(s.spans);
        return replaced(in, span.offset, span.total_bytes, pick(aliens_));
      }
      case Mutation::kWrongVersion: {
        const ValueSpan* span = value_of_key(s, "v");
        if (!span) return in;
        static const std::vector<int64_t> kVersions = {0, 2, 3, 7, 255, 65536, -1, -128};
        Bytes version;
        switch (below(4)) {
          case 0: version = packed([&](Packer& p) { p.pack(pick(kVersions)); }); break;
          case 1: version = packed([&](Packer& p) { p.pack(std::numeric_limits<uint64_t>::max() - below(3)); }); break;
          case 2: version = packed([&](Packer& p) { p.pack(uint64_t{kProtocolVersion} + (uint64_t{1} << (32 + below(31)))); }); break;
          default: version = pick(aliens_); break;
        }
        return replaced(in, span->offset, span->total_bytes, version);
      }
      case Mutation::kWrongMessageType: {
        const ValueSpan* span = value_of_key(s, "type");
        if (!span) return in;
        static const std::vector<std::string> kTypes = {
            "run", "step", "event", "cmd", "ack", "", "STEP", "steps", "st", std::string("cmd\0", 4),
            std::string(70, 'x'), std::string(kMaxStringBytes + 1, 'r')};
        return replaced(in, span->offset, span->total_bytes,
                        packed([&](Packer& p) { p.pack(pick(kTypes)); }));
      }
      case Mutation::kEntrySurgery: {
        const ValueSpan* map = pick_span(s, [](const ValueSpan& v) { return v.family == F::kMap && v.length > 0; });
        if (!map) return in;
        // Entries of this map: each key span directly inside it, with its value right after.
        std::vector<std::pair<size_t, size_t>> entries;  // offset, bytes
        size_t at = map->offset + map->header_bytes;
        for (uint32_t i = 0; i < map->length; ++i) {
          const ValueSpan* key = find_at(s, at);
          const ValueSpan* value = find_at(s, at + key->total_bytes);
          entries.emplace_back(at, key->total_bytes + value->total_bytes);
          at += key->total_bytes + value->total_bytes;
        }
        const auto [offset, bytes] = pick(entries);
        const bool drop = below(2) == 0;
        const Bytes entry(in.begin() + offset, in.begin() + offset + bytes);
        Bytes out = drop ? replaced(in, offset, bytes, {}) : replaced(in, offset, 0, entry);
        const uint64_t count = drop ? map->length - 1ull : map->length + 1ull;
        return replaced(out, map->offset, map->header_bytes, header(F::kMap, count, false, 0));
      }
      case Mutation::kTransplant: {
        const ValueSpan& target = pick(s.spans);
        const Seed& donor = pick(seeds_);
        const ValueSpan& part = pick(donor.spans);
        return replaced(in, target.offset, target.total_bytes,
                        Bytes(donor.bytes.begin() + part.offset,
                              donor.bytes.begin() + part.offset + part.total_bytes));
      }
      case Mutation::kSplice: {
        const Seed& other = pick(seeds_);
        // Half the cuts fall on value boundaries, where the glued halves still parse.
        const size_t head = below(2) == 0 ? pick(s.spans).offset : below(in.size() + 1);
        const size_t tail = below(2) == 0 ? pick(other.spans).offset : below(other.bytes.size() + 1);
        Bytes out(in.begin(), in.begin() + head);
        out.insert(out.end(), other.bytes.begin() + tail, other.bytes.end());
        return out;
      }
      case Mutation::kRandomBytes: {
        Bytes out;
        if (below(3) == 0) {
          // {"v": 1, ... so the noise meets the field readers, not only the parser.
          const Bytes prefix = packed([&](Packer& p) {
            p.pack_map(static_cast<uint32_t>(2 + below(14)));
            p.pack(std::string("v"));
            p.pack(kProtocolVersion);
          });
          out = prefix;
        }
        const uint64_t size = below(2) == 0 ? below(16) : below(600);
        for (uint64_t i = 0; i < size; ++i) out.push_back(static_cast<char>(rng_()));
        return out;
      }
      case Mutation::kRandomMessage:
        return random_message();
    }
    return in;
  }

  // `span` grown past the decoder's limits while staying well-formed: an array of more items
  // than kMaxShapeDims or kMaxWatches allows (copies of its first item, or nils), a string
  // over kMaxStringBytes, a float block 4 bytes too long, an integer beyond 32 bits or
  // beyond kMaxLayers.
  Bytes oversized(const Bytes& in, const ValueSpan& span) {
    static const std::vector<uint64_t> kItems = {65, 257, kMaxWatches + 1};
    static const std::vector<uint64_t> kIntegers = {
        kMaxLayers + 1ull, 1ull << 31, 1ull << 32, 1ull << 63, std::numeric_limits<uint64_t>::max()};
    switch (span.family) {
      case F::kArray: {
        const uint64_t items = pick(kItems);
        Bytes item(1, static_cast<char>(0xc0));
        if (span.length > 0) {
          const size_t first = span.offset + span.header_bytes;
          item.assign(in.begin() + first, in.begin() + first + find_in(in, first).total_bytes);
        }
        Bytes array = header(F::kArray, items, false, 0);
        for (uint64_t i = 0; i < items; ++i) array.insert(array.end(), item.begin(), item.end());
        return replaced(in, span.offset, span.total_bytes, array);
      }
      case F::kStr:
        return replaced(in, span.offset, span.total_bytes,
                        packed([](Packer& p) { p.pack(std::string(kMaxStringBytes + 1, 'o')); }));
      case F::kBin: {
        Bytes block = header(F::kBin, span.length + 4ull, false, 0);
        block.insert(block.end(), in.begin() + span.offset + span.header_bytes,
                     in.begin() + span.offset + span.total_bytes);
        block.insert(block.end(), {'\0', '\0', '\xc0', '\x7f'});
        return replaced(in, span.offset, span.total_bytes, block);
      }
      default:
        return replaced(in, span.offset, span.total_bytes,
                        packed([&](Packer& p) { p.pack(pick(kIntegers)); }));
    }
  }

  // The span of the value at `offset` of a seed's bytes `in` (a seed walked again: cheap,
  // seeds are a few hundred bytes).
  static ValueSpan find_in(const Bytes& in, size_t offset) {
    const SpanWalker walker(in);
    for (const ValueSpan& span : walker.spans()) {
      if (span.offset == offset) return span;
    }
    throw std::runtime_error("no value starts at that offset");
  }

  const ValueSpan* find_at(const Seed& s, size_t offset) const {
    for (const ValueSpan& span : s.spans) {
      if (span.offset == offset) return &span;
    }
    throw std::runtime_error("no value starts at that offset");
  }

  // {"v": 1, "type": <a topic>, then about half the protocol's keys, each with a value some
  // seed gave that key (two times in three) or a random one}.
  Bytes random_message() {
    static const std::vector<std::string> kTopics = {"run", "step", "event", "cmd", "ack"};
    std::vector<size_t> keys;
    for (size_t k = 0; k < keys_.size(); ++k) {
      if (keys_[k] != "v" && keys_[k] != "type" && below(2) == 0) keys.push_back(k);
    }
    Bytes out = packed([&](Packer& p) {
      p.pack_map(static_cast<uint32_t>(2 + keys.size()));
      p.pack(std::string("v"));
      p.pack(kProtocolVersion);
      p.pack(std::string("type"));
      p.pack(pick(kTopics));
    });
    for (size_t k : keys) {
      const Bytes key = packed([&](Packer& p) { p.pack(keys_[k]); });
      const Bytes value = below(3) != 0 ? pick(key_values_[k])
                                        : packed([&](Packer& p) { random_value(p, 0); });
      out.insert(out.end(), key.begin(), key.end());
      out.insert(out.end(), value.begin(), value.end());
    }
    return out;
  }

  void random_value(Packer& p, int depth) {
    switch (below(depth < 3 ? 12 : 9)) {
      case 0: p.pack_nil(); break;
      case 1: p.pack(below(2) == 0); break;
      case 2: p.pack(below(2) == 0 ? below(8) : rng_()); break;
      case 3: p.pack(-static_cast<int64_t>(below(1ull << 40))); break;
      case 4: p.pack(static_cast<double>(static_cast<int64_t>(rng_())) / 1e6); break;
      case 5: p.pack(static_cast<float>(below(1000)) / 8.0f); break;
      case 6: p.pack(pick(keys_)); break;
      case 7: {
        // A float block: sometimes exactly the size some mask/count pair expects.
        const uint32_t bytes = static_cast<uint32_t>(4 * below(40) + (below(4) == 0 ? below(4) : 0));
        Bytes block(bytes);
        for (char& c : block) c = static_cast<char>(rng_());
        p.pack_bin(bytes);
        p.pack_bin_body(block.data(), bytes);
        break;
      }
      case 8: p.pack(std::string(below(40), static_cast<char>('a' + below(26)))); break;
      case 9:
      case 10: {
        const uint32_t items = static_cast<uint32_t>(below(6));
        p.pack_array(items);
        for (uint32_t i = 0; i < items; ++i) random_value(p, depth + 1);
        break;
      }
      default: {
        const uint32_t entries = static_cast<uint32_t>(below(6));
        p.pack_map(entries);
        for (uint32_t i = 0; i < entries; ++i) {
          p.pack(pick(keys_));
          random_value(p, depth + 1);
        }
        break;
      }
    }
  }

  // One encoded value of each msgpack type and of each awkward size or depth.
  static std::vector<Bytes> alien_values() {
    std::vector<Bytes> out;
    auto add = [&](const std::function<void(Packer&)>& write) { out.push_back(packed(write)); };
    add([](Packer& p) { p.pack_nil(); });
    add([](Packer& p) { p.pack(true); });
    add([](Packer& p) { p.pack(false); });
    add([](Packer& p) { p.pack(0); });
    add([](Packer& p) { p.pack(1); });
    add([](Packer& p) { p.pack(-1); });
    add([](Packer& p) { p.pack(std::numeric_limits<int64_t>::min()); });
    add([](Packer& p) { p.pack(std::numeric_limits<uint64_t>::max()); });
    add([](Packer& p) { p.pack(uint64_t{1} << 32); });
    add([](Packer& p) { p.pack(uint64_t{kMaxLayers} + 1); });
    add([](Packer& p) { p.pack(std::numeric_limits<int32_t>::min()); });
    add([](Packer& p) { p.pack(1.5); });
    add([](Packer& p) { p.pack(std::numeric_limits<double>::quiet_NaN()); });
    add([](Packer& p) { p.pack(-std::numeric_limits<float>::infinity()); });
    add([](Packer& p) { p.pack(1e300); });
    add([](Packer& p) { p.pack(std::string()); });
    add([](Packer& p) { p.pack(std::string("1")); });
    add([](Packer& p) { p.pack(std::string(300, 'k')); });
    add([](Packer& p) { p.pack(std::string(kMaxStringBytes, 's')); });
    add([](Packer& p) { p.pack_bin(0); });
    add([](Packer& p) { p.pack_bin(7); p.pack_bin_body("\1\2\3\4\5\6\7", 7); });
    add([](Packer& p) { p.pack_bin(8); p.pack_bin_body("\0\0\x80\x7f\0\0\xc0\x7f", 8); });
    add([](Packer& p) { p.pack_array(0); });
    add([](Packer& p) { p.pack_array(3); p.pack(1); p.pack(2); p.pack(3); });
    add([](Packer& p) {
      p.pack_array(100);
      for (int i = 0; i < 100; ++i) p.pack_nil();
    });
    add([](Packer& p) { p.pack_map(0); });
    add([](Packer& p) { p.pack_map(1); p.pack(std::string("name")); p.pack(std::string("w")); });
    add([](Packer& p) { p.pack_map(1); p.pack(7); p.pack(7); });
    add([](Packer& p) { p.pack_ext(4, 5); p.pack_ext_body("abcd", 4); });
    add([](Packer& p) { p.pack_ext(1, -1); p.pack_ext_body("\x01", 1); });
    add([](Packer& p) {
      for (int i = 0; i < 12; ++i) p.pack_array(1);
      p.pack(1);
    });
    add([](Packer& p) {
      for (int i = 0; i < 12; ++i) {
        p.pack_map(1);
        p.pack(std::string("m"));
      }
      p.pack_nil();
    });
    return out;
  }

  std::vector<Seed> seeds_;
  std::mt19937_64 rng_;
  std::vector<std::string> keys_;        // every map key the seeds use, once each
  std::vector<std::vector<Bytes>> key_values_;  // per key: every value the seeds give it
  std::vector<Bytes> aliens_;
};

}  // namespace keel::wire::testing
