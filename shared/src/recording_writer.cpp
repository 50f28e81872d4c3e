#include "keel/wire/recording_writer.hpp"

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#if KEEL_RECORDING_ZSTD
#include <zstd.h>
#endif

#include "keel/wire/crc32.hpp"
#include "recording_bytes.hpp"

namespace keel::wire {

using recording::Codec;
using recording::FrameKind;

bool recording_codec_available(Codec codec) {
  if (codec == Codec::none) return true;
#if KEEL_RECORDING_ZSTD
  return codec == Codec::zstd;
#else
  return false;
#endif
}

namespace {

// A header the writer fills in once its chunk is closed (or cut short), at its file offset.
struct HeaderPatch {
  uint64_t offset = 0;
  std::array<char, recording::kChunkHeaderBytes> bytes{};
};

}  // namespace

struct RecordingWriter::State {
  std::string path;
  RecordingWriterOptions options;
  int fd = -1;
  std::string error;
  bool closed = false;

  uint64_t file_bytes = 0;          // written and kept
  std::vector<char> pending;        // bytes after file_bytes, not yet written
  std::vector<HeaderPatch> patches; // applied after `pending` is written
  uint64_t pending_messages = 0;
  uint64_t written_messages = 0;
  uint64_t lost_messages = 0;

  // The open chunk, if any.
  bool chunk_open = false;
  uint64_t chunk_offset = 0;         // of its header (logical: file_bytes + where it is in pending)
  RecordingChunkHeader chunk;        // its header as it will be written when it closes
  uint32_t chunk_crc = 0;
  // The chunk that was open at the last successful flush: a failed flush cuts it short there.
  bool flushed_chunk_open = false;
  uint64_t flushed_chunk_offset = 0;
#if KEEL_RECORDING_ZSTD
  ZSTD_CCtx* zstd = nullptr;
#endif

  ~State() {
#if KEEL_RECORDING_ZSTD
    ZSTD_freeCCtx(zstd);
#endif
    if (fd >= 0) ::close(fd);
  }

  void fail(const std::string& what) { error = what; }

  // Appends bytes of the open chunk's body to `pending`, compressed by its codec.
  bool body(const void* data, size_t size, bool end);
  void open_chunk(int64_t step);
  bool close_chunk();
  bool write_all(uint64_t offset, const char* data, size_t size);
  void recover_from_failed_flush();
};

bool RecordingWriter::State::body(const void* data, size_t size, bool end) {
  const size_t before = pending.size();
  if (chunk.codec == Codec::none) {
    const char* bytes = static_cast<const char*>(data);
    pending.insert(pending.end(), bytes, bytes + size);
  } else {
#if KEEL_RECORDING_ZSTD
    ZSTD_inBuffer in{data, size, 0};
    const ZSTD_EndDirective mode = end ? ZSTD_e_end : (size == 0 ? ZSTD_e_flush : ZSTD_e_continue);
    for (;;) {
      const size_t used = pending.size();
      pending.resize(used + ZSTD_CStreamOutSize());
      ZSTD_outBuffer out{pending.data() + used, ZSTD_CStreamOutSize(), 0};
      const size_t left = ZSTD_compressStream2(zstd, &out, &in, mode);
      pending.resize(used + out.pos);
      if (ZSTD_isError(left)) {
        fail(std::string("zstd: ") + ZSTD_getErrorName(left));
        return false;
      }
      if (mode == ZSTD_e_continue ? in.pos == in.size : left == 0) break;
    }
#else
    (void)end;
    fail("this keel was built without zstd");
    return false;
#endif
  }
  const size_t produced = pending.size() - before;
  chunk_crc = crc32(chunk_crc, pending.data() + before, produced);
  chunk.stored_bytes += static_cast<uint32_t>(produced);
  return true;
}

void RecordingWriter::State::open_chunk(int64_t step) {
  chunk = RecordingChunkHeader{};
  chunk.codec = options.codec;
  chunk.first_step = step;
  chunk.last_step = step;
  chunk_crc = 0;
  chunk_offset = file_bytes + pending.size();
  // Written open (zeros after codec and flags); close_chunk() fills it in.
  RecordingChunkHeader open_header;
  open_header.codec = chunk.codec;
  const auto bytes = write_chunk_header(open_header);
  pending.insert(pending.end(), bytes.begin(), bytes.end());
#if KEEL_RECORDING_ZSTD
  if (chunk.codec == Codec::zstd) ZSTD_CCtx_reset(zstd, ZSTD_reset_session_only);
#endif
  chunk_open = true;
}

bool RecordingWriter::State::close_chunk() {
  if (!chunk_open) return true;
  if (chunk.codec != Codec::none && !body(nullptr, 0, true)) return false;
  chunk.crc32 = chunk_crc;
  patches.push_back({chunk_offset, write_chunk_header(chunk)});
  chunk_open = false;
  return true;
}

bool RecordingWriter::State::write_all(uint64_t offset, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, data, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write " + path + ": " + std::strerror(errno));
      return false;
    }
    if (n == 0) {
      fail("cannot write " + path + ": no progress");
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

void RecordingWriter::State::recover_from_failed_flush() {
  // Whatever this flush wrote past the last good byte goes; the file ends where the last
  // successful flush left it. The chunk open then keeps what was written of it, cut short; one
  // with nothing written of it goes whole (a header with no body would read as open).
  if (flushed_chunk_open && file_bytes == flushed_chunk_offset + recording::kChunkHeaderBytes) {
    file_bytes = flushed_chunk_offset;
    flushed_chunk_open = false;
  }
  // Should the cut fail, the bytes stay, and the next flush writes over them from file_bytes.
  (void)::ftruncate(fd, static_cast<off_t>(file_bytes));
  if (flushed_chunk_open) {
    RecordingChunkHeader cut;
    cut.codec = options.codec;
    cut.flags = recording::kChunkCutShort;
    cut.stored_bytes = static_cast<uint32_t>(file_bytes - flushed_chunk_offset - recording::kChunkHeaderBytes);
    const auto bytes = write_chunk_header(cut);
    write_all(flushed_chunk_offset, bytes.data(), bytes.size());
  }
  lost_messages += pending_messages;
  pending_messages = 0;
  pending.clear();
  patches.clear();
  chunk_open = false;
  flushed_chunk_open = false;
}

RecordingWriter::RecordingWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}

RecordingWriter::~RecordingWriter() { close(); }

std::unique_ptr<RecordingWriter> RecordingWriter::create(const std::string& path, const RecordingWriterOptions& options,
                                                         std::string& error) {
  if (!recording_codec_available(options.codec)) {
    error = "this keel was built without zstd: record with codec none";
    return nullptr;
  }
  auto state = std::make_unique<State>();
  state->path = path;
  state->options = options;
  if (state->options.chunk_target_bytes == 0 || state->options.chunk_target_bytes > recording::kMaxChunkTarget) {
    state->options.chunk_target_bytes = recording::kMaxChunkTarget;
  }
#if KEEL_RECORDING_ZSTD
  if (options.codec == Codec::zstd) {
    state->zstd = ZSTD_createCCtx();
    if (state->zstd == nullptr) {
      error = "zstd: cannot create a compression context";
      return nullptr;
    }
    ZSTD_CCtx_setParameter(state->zstd, ZSTD_c_compressionLevel, options.zstd_level);
  }
#endif
  state->fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (state->fd < 0) {
    error = "cannot create " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const auto header = write_file_header(recording::kMajorVersion, recording::kMinorVersion, now_ms);
  if (!state->write_all(0, header.data(), header.size())) {
    error = state->error;
    ::unlink(path.c_str());
    return nullptr;
  }
  state->file_bytes = header.size();
  return std::unique_ptr<RecordingWriter>(new RecordingWriter(std::move(state)));
}

bool RecordingWriter::append(FrameKind kind, int64_t step, const void* payload, size_t size) {
  State& s = *state_;
  if (s.closed) {
    s.fail("the recording is closed");
    return false;
  }
  if (size > kMaxPayloadBytes) {
    s.fail("a message of " + std::to_string(size) + " bytes is over the limit of " +
           std::to_string(kMaxPayloadBytes));
    return false;
  }
  if (!s.chunk_open) s.open_chunk(step);
  const auto frame = write_frame_header(kind, step, static_cast<uint32_t>(size));
  if (!s.body(frame.data(), frame.size(), false) || !s.body(payload, size, false)) {
    // The compressor failed: that chunk cannot go on, and nothing of it after the last flush
    // is trusted. Counted as lost at the next flush.
    ++s.pending_messages;
    s.recover_from_failed_flush();
    return false;
  }
  ++s.pending_messages;
  RecordingChunkHeader& c = s.chunk;
  c.raw_bytes += static_cast<uint32_t>(frame.size() + size);
  ++c.messages;
  if (step < c.first_step) c.first_step = step;
  if (step > c.last_step) c.last_step = step;
  if (kind != FrameKind::step) c.flags |= recording::kChunkHasDescriptionOrEvent;
  if (c.raw_bytes >= s.options.chunk_target_bytes) return s.close_chunk();
  return true;
}

bool RecordingWriter::flush() {
  State& s = *state_;
  if (s.fd < 0) return s.pending_messages == 0;
  if (s.chunk_open && s.chunk.codec != Codec::none && !s.body(nullptr, 0, false)) {
    s.recover_from_failed_flush();
    return false;
  }
  if (!s.write_all(s.file_bytes, s.pending.data(), s.pending.size())) {
    s.recover_from_failed_flush();
    return false;
  }
  s.file_bytes += s.pending.size();
  s.pending.clear();
  for (const HeaderPatch& patch : s.patches) {
    // A closed chunk whose header cannot be filled in still reads, as an open one would,
    // only if it is the last: later chunks would then be lost. Report it.
    if (!s.write_all(patch.offset, patch.bytes.data(), patch.bytes.size())) {
      s.patches.clear();
      return false;
    }
  }
  s.patches.clear();
  s.written_messages += s.pending_messages;
  s.pending_messages = 0;
  s.flushed_chunk_open = s.chunk_open;
  s.flushed_chunk_offset = s.chunk_offset;
  return true;
}

bool RecordingWriter::rename(const std::string& to) {
  State& s = *state_;
  if (::rename(s.path.c_str(), to.c_str()) != 0) {
    s.fail("cannot rename " + s.path + " to " + to + ": " + std::strerror(errno));
    return false;
  }
  s.path = to;
  return true;
}

bool RecordingWriter::close() {
  State& s = *state_;
  if (s.closed) return s.error.empty();
  bool ok = s.close_chunk();
  ok = flush() && ok;
  s.closed = true;
  if (s.fd >= 0 && ::close(s.fd) != 0 && ok) {
    s.fail("cannot close " + s.path + ": " + std::strerror(errno));
    ok = false;
  }
  s.fd = -1;
  return ok;
}

uint64_t RecordingWriter::file_bytes() const { return state_->file_bytes; }
uint64_t RecordingWriter::lost_messages() const { return state_->lost_messages; }
uint64_t RecordingWriter::written_messages() const { return state_->written_messages; }
const std::string& RecordingWriter::error() const { return state_->error; }
const std::string& RecordingWriter::path() const { return state_->path; }

}  // namespace keel::wire
