#include "keel/wire/recording_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#if KEEL_RECORDING_ZSTD
#include <zstd.h>
#endif

#include "keel/wire/crc32.hpp"
#include "keel/wire/recording_writer.hpp"
#include "recording_bytes.hpp"

namespace keel::wire {

using recording::Codec;
using recording::FrameKind;

const char* recording::topic_of(FrameKind kind) {
  switch (kind) {
    case FrameKind::run: return kTopicRun;
    case FrameKind::step: return kTopicStep;
    case FrameKind::event: return kTopicEvent;
  }
  return nullptr;
}

namespace {

bool known_kind(uint8_t kind) {
  return kind == static_cast<uint8_t>(FrameKind::run) || kind == static_cast<uint8_t>(FrameKind::step) ||
         kind == static_cast<uint8_t>(FrameKind::event);
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// The frames of a decoded body: calls `frame` for each whole one (unknown kinds, from a newer
// minor version, are skipped). Returns the bytes of whole frames; the rest is a frame cut off.
size_t walk_frames(const std::vector<char>& raw, const std::function<void(const RecordingFrame&)>& frame,
                   uint32_t* frames, int64_t* first_step, int64_t* last_step) {
  size_t at = 0;
  while (raw.size() - at >= recording::kFrameHeaderBytes) {
    const char* h = raw.data() + at;
    const uint8_t kind = static_cast<uint8_t>(h[0]);
    const int64_t step = recording_bytes::get<int64_t>(h + 1);
    const uint32_t length = recording_bytes::get<uint32_t>(h + 9);
    if (length > kMaxPayloadBytes || raw.size() - at - recording::kFrameHeaderBytes < length) break;
    if (known_kind(kind)) {
      if (frame) frame(RecordingFrame{static_cast<FrameKind>(kind), step, h + recording::kFrameHeaderBytes, length});
      if (frames) ++*frames;
      if (first_step) *first_step = std::min(*first_step, step);
      if (last_step) *last_step = std::max(*last_step, step);
    }
    at += recording::kFrameHeaderBytes + length;
  }
  return at;
}

}  // namespace

struct RecordingReader::State {
  std::string name;             // the path, or "the recording" for bytes in memory
  int fd = -1;
  std::vector<char> bytes;      // open_bytes()
  uint64_t size = 0;
  uint16_t major = 0;
  uint16_t minor = 0;
  int64_t created_unix_ms = 0;
  std::vector<RecordingChunk> chunks;
  std::vector<std::string> warnings;

  ~State() {
    if (fd >= 0) ::close(fd);
  }

  bool read_at(uint64_t offset, void* out, size_t n) const {
    if (offset > size || size - offset < n) return false;
    if (n == 0) return true;   // an empty body: no bytes, and maybe no buffer to put them in
    if (fd < 0) {
      std::memcpy(out, bytes.data() + offset, n);
      return true;
    }
    char* to = static_cast<char*>(out);
    while (n > 0) {
      const ssize_t got = ::pread(fd, to, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      to += got;
      n -= static_cast<size_t>(got);
      offset += static_cast<uint64_t>(got);
    }
    return true;
  }

  std::string where(const RecordingChunk& c) const { return "the chunk at byte " + std::to_string(c.offset); }

  // The chunk's body, decoded. An open chunk gives what decodes (`raw` may end mid-frame);
  // false with `error` for a closed chunk that is damaged.
  bool decode_body(const RecordingChunk& c, std::vector<char>& raw, std::string& error) const;
  bool index(std::string& error);
  // Learns an open or cut-short chunk's frames and steps by decoding it. False when no whole
  // frame decodes (the chunk is then left out).
  bool learn_open_chunk(RecordingChunk& c);
};

bool RecordingReader::State::decode_body(const RecordingChunk& c, std::vector<char>& raw, std::string& error) const {
  std::vector<char> stored(c.stored_bytes);
  if (!read_at(c.offset + recording::kChunkHeaderBytes, stored.data(), stored.size())) {
    error = where(c) + " cannot be read: " + (fd >= 0 ? std::strerror(errno) : "past the end");
    return false;
  }
  if (!c.open && crc32(0, stored.data(), stored.size()) != c.crc32) {
    error = where(c) + " is damaged: its checksum does not match";
    return false;
  }
  raw.clear();
  if (c.codec == Codec::none) {
    raw = std::move(stored);
  } else {
#if KEEL_RECORDING_ZSTD
    const size_t cap = c.open ? recording::kMaxChunkRawBytes : c.raw_bytes;
    ZSTD_DCtx* dctx = ZSTD_createDCtx();
    if (dctx == nullptr) {
      error = "zstd: cannot create a decompression context";
      return false;
    }
    ZSTD_inBuffer in{stored.data(), stored.size(), 0};
    bool ended = false;
    std::string failure;
    // One byte past the cap is room enough to see that a body decodes to too much.
    for (;;) {
      const size_t used = raw.size();
      if (used > cap) {
        failure = "decodes to more than the " + std::to_string(cap) + " bytes its header allows";
        raw.resize(cap);
        break;
      }
      const size_t room = std::min(ZSTD_DStreamOutSize(), cap + 1 - used);
      raw.resize(used + room);
      ZSTD_outBuffer out{raw.data() + used, room, 0};
      const size_t left = ZSTD_decompressStream(dctx, &out, &in);
      raw.resize(used + out.pos);
      if (ZSTD_isError(left)) {
        failure = std::string("does not decode (zstd: ") + ZSTD_getErrorName(left) + ")";
        break;
      }
      if (left == 0) {
        ended = true;
        break;
      }
      // zstd wants more input and has no more output to give.
      if (in.pos == in.size && out.pos < room) break;
    }
    ZSTD_freeDCtx(dctx);
    if (!c.open) {
      if (failure.empty() && !ended) failure = "ends before its zstd frame does";
      if (failure.empty() && (in.pos != in.size || raw.size() != c.raw_bytes)) {
        failure = "decodes to " + std::to_string(raw.size()) + " bytes where its header says " +
                  std::to_string(c.raw_bytes);
      }
      if (!failure.empty()) {
        error = where(c) + " is damaged: it " + failure;
        return false;
      }
    }
#else
    error = where(c) + " is compressed with zstd, which this keel was built without";
    return false;
#endif
  }
  return true;
}

bool RecordingReader::State::learn_open_chunk(RecordingChunk& c) {
  std::vector<char> raw;
  std::string error;
  if (!decode_body(c, raw, error)) {
    warnings.push_back(error + "; it is skipped");
    return false;
  }
  c.messages = 0;
  c.first_step = std::numeric_limits<int64_t>::max();
  c.last_step = std::numeric_limits<int64_t>::min();
  const size_t whole = walk_frames(raw, nullptr, &c.messages, &c.first_step, &c.last_step);
  c.raw_bytes = static_cast<uint32_t>(whole);
  if (whole < raw.size()) {
    warnings.push_back("the file ends inside a record (the writer was killed mid-write, or is still writing): " +
                       plural(raw.size() - whole, "byte", "bytes") + " of a partial record skipped");
  }
  if (c.messages == 0) return false;
  return true;
}

bool RecordingReader::State::index(std::string& error) {
  char header[recording::kFileHeaderBytes];
  if (size < sizeof header || !read_at(0, header, sizeof header) ||
      std::memcmp(header, recording::kFileMagic, sizeof recording::kFileMagic) != 0) {
    error = name + " is not a keel recording" +
            (size < sizeof header ? " (" + plural(size, "byte", "bytes") + ", shorter than its header)"
                                  : " (it does not start with KEELREC)");
    return false;
  }
  major = recording_bytes::get<uint16_t>(header + 8);
  minor = recording_bytes::get<uint16_t>(header + 10);
  created_unix_ms = recording_bytes::get<int64_t>(header + 16);
  if (major != recording::kMajorVersion) {
    error = name + " is a keel recording of format " + std::to_string(major) + "." + std::to_string(minor) +
            "; this keel reads format " + std::to_string(recording::kMajorVersion) + ".x" +
            (major > recording::kMajorVersion ? ": open it with a newer keel" : "");
    return false;
  }
  uint64_t offset = sizeof header;
  while (offset < size) {
    const uint64_t left = size - offset;
    char h[recording::kChunkHeaderBytes];
    if (left < sizeof h) {
      warnings.push_back("the file ends inside a chunk header (the writer was killed mid-write): the last " +
                         plural(left, "byte is", "bytes are") + " skipped");
      break;
    }
    if (!read_at(offset, h, sizeof h)) {
      warnings.push_back("bytes from " + std::to_string(offset) + " cannot be read: the rest is skipped");
      break;
    }
    const auto skip_rest = [&](const std::string& why) {
      warnings.push_back("the chunk at byte " + std::to_string(offset) + " " + why + ": the last " +
                         plural(left, "byte", "bytes") + " of the file are skipped");
    };
    if (std::memcmp(h, recording::kChunkMagic, sizeof recording::kChunkMagic) != 0) {
      skip_rest("does not start with KCHK");
      break;
    }
    const RecordingChunkHeader parsed = read_chunk_header(h);
    RecordingChunk c;
    c.offset = offset;
    c.codec = parsed.codec;
    c.flags = parsed.flags;
    c.stored_bytes = parsed.stored_bytes;
    c.raw_bytes = parsed.raw_bytes;
    c.messages = parsed.messages;
    c.crc32 = parsed.crc32;
    c.first_step = parsed.first_step;
    c.last_step = parsed.last_step;
    if (c.codec != Codec::none && c.codec != Codec::zstd) {
      skip_rest("is compressed with codec " + std::to_string(static_cast<int>(c.codec)) +
                ", which this keel does not know");
      break;
    }
    if (!recording_codec_available(c.codec)) {
      skip_rest("is compressed with zstd, which this keel was built without");
      break;
    }
    const uint64_t body_left = left - sizeof h;
    const bool open = c.stored_bytes == 0;
    const bool cut = (c.flags & recording::kChunkCutShort) != 0;
    const bool truncated = !open && c.stored_bytes > body_left;
    if (open || cut || truncated) {
      // Decoded as far as it goes; an open or truncated chunk is the file's last.
      c.open = true;
      if (open || truncated) c.stored_bytes = static_cast<uint32_t>(std::min<uint64_t>(body_left, UINT32_MAX));
      if (truncated) {
        warnings.push_back("the file ends inside the chunk at byte " + std::to_string(offset) +
                           " (it was copied or cut while being written): it is read as far as it goes");
      }
      if (learn_open_chunk(c)) chunks.push_back(c);
      if (open || truncated) {
        if (sizeof h + c.stored_bytes < left) skip_rest("is too long to decode");
        break;
      }
      offset += sizeof h + c.stored_bytes;
      continue;
    }
    if (c.raw_bytes > recording::kMaxChunkRawBytes || c.messages == 0 || c.first_step > c.last_step) {
      skip_rest("has a header that no keel writes");
      break;
    }
    chunks.push_back(c);
    offset += sizeof h + c.stored_bytes;
  }
  return true;
}

RecordingReader::RecordingReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
RecordingReader::~RecordingReader() = default;

std::unique_ptr<RecordingReader> RecordingReader::open(const std::string& path, std::string& error) {
  auto state = std::make_unique<State>();
  state->name = path;
  state->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (state->fd < 0) {
    error = "cannot open " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  struct stat st {};
  if (::fstat(state->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = path + " is not a file";
    return nullptr;
  }
  state->size = static_cast<uint64_t>(st.st_size);
  if (!state->index(error)) return nullptr;
  return std::unique_ptr<RecordingReader>(new RecordingReader(std::move(state)));
}

std::unique_ptr<RecordingReader> RecordingReader::open_bytes(std::vector<char> bytes, std::string& error) {
  auto state = std::make_unique<State>();
  state->name = "the recording";
  state->bytes = std::move(bytes);
  state->size = state->bytes.size();
  if (!state->index(error)) return nullptr;
  return std::unique_ptr<RecordingReader>(new RecordingReader(std::move(state)));
}

uint16_t RecordingReader::major_version() const { return state_->major; }
uint16_t RecordingReader::minor_version() const { return state_->minor; }
int64_t RecordingReader::created_unix_ms() const { return state_->created_unix_ms; }
uint64_t RecordingReader::file_bytes() const { return state_->size; }
const std::vector<RecordingChunk>& RecordingReader::chunks() const { return state_->chunks; }
const std::vector<std::string>& RecordingReader::warnings() const { return state_->warnings; }

bool RecordingReader::read_chunk(size_t index, const std::function<void(const RecordingFrame&)>& frame,
                                 std::string& error) const {
  if (index >= state_->chunks.size()) {
    error = "no chunk " + std::to_string(index);
    return false;
  }
  const RecordingChunk& c = state_->chunks[index];
  std::vector<char> raw;
  if (!state_->decode_body(c, raw, error)) return false;
  const size_t whole = walk_frames(raw, frame, nullptr, nullptr, nullptr);
  if (whole < raw.size() && !c.open) {
    error = state_->where(c) + " is damaged: a record runs past its end";
    return false;
  }
  return true;
}

void RecordingReader::read_all(const std::function<void(const RecordingFrame&)>& frame,
                               std::vector<std::string>* errors) const {
  for (size_t i = 0; i < state_->chunks.size(); ++i) {
    std::string error;
    if (!read_chunk(i, frame, error) && errors) errors->push_back(error);
  }
}

size_t RecordingReader::chunk_at_step(int64_t step) const {
  const auto& chunks = state_->chunks;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].last_step >= step) return i;
  }
  return chunks.size();
}

}  // namespace keel::wire
