// keel recording format: the flight recorder's file, byte for byte (shared/PROTOCOL.md §10).
//
// What it is for: one definition of the file that the probe's recorder and `keel-cli record`
// write and that the dashboard and `keel-cli export|summary` read. A recording is the wire,
// framed: each frame holds one message's payload exactly as it was published (codec.hpp), so a
// reader decodes it with wire::decode and feeds the same model code as a live stream.
//
// Layout (all integers little-endian):
//   file header, kFileHeaderBytes:
//     0  magic "KEELREC\n" (8)   8  major u16   10 minor u16   12 flags u32 (0)
//     16 created_unix_ms i64     24 reserved (8 zero bytes)
//   then chunks, back to back to the end of the file. A chunk:
//     header, kChunkHeaderBytes:
//       0  magic "KCHK" (4)       4  codec u8 (Codec)         5  flags u8 (kChunk*)
//       6  reserved u16           8  stored_bytes u32          12 raw_bytes u32
//       16 messages u32           20 crc32 u32 (of the stored body, IEEE)
//       24 first_step i64         32 last_step i64
//     body: stored_bytes bytes; once decompressed (raw_bytes), frames back to back:
//       0 kind u8 (FrameKind)   1 step i64   9 length u32   13 payload (length bytes)
//   A chunk is written open: its header holds zeros after the codec and flags until the chunk
//   closes, when the writer fills them in. Only the last chunk of a file can be open (the
//   writer was killed, or is still writing): a reader decodes its body as far as it goes and
//   keeps the whole frames. The body of a zstd chunk is one zstd frame, flushed after every
//   batch of messages, so a reader can decode everything written before the kill.
// The index: each chunk header says where the next chunk starts and which steps it holds, so
// a reader hops from header to header (one small read per chunk) to find a step's chunk
// without reading the bodies.
// Versions: a reader accepts any minor version of its major version (newer minors only add
// frame kinds it skips, or header flags it ignores) and refuses another major version.
#pragma once

#include <cstddef>
#include <cstdint>

#include "keel/wire/codec.hpp"

namespace keel::wire::recording {

inline constexpr char kFileMagic[8] = {'K', 'E', 'E', 'L', 'R', 'E', 'C', '\n'};
inline constexpr uint16_t kMajorVersion = 1;
inline constexpr uint16_t kMinorVersion = 0;
inline constexpr size_t kFileHeaderBytes = 32;

inline constexpr char kChunkMagic[4] = {'K', 'C', 'H', 'K'};
inline constexpr size_t kChunkHeaderBytes = 40;

enum class Codec : uint8_t { none = 0, zstd = 1 };

// Chunk flags.
// The chunk holds a run description or an event (thinning and summaries look only at these).
inline constexpr uint8_t kChunkHasDescriptionOrEvent = 1u << 0;
// A write failed (a full disk) partway through the chunk: its body is what was written before,
// a zstd frame that does not end. A reader decodes it as far as it goes, as for an open chunk.
inline constexpr uint8_t kChunkCutShort = 1u << 1;

// What a frame holds: the wire topic of its payload.
enum class FrameKind : uint8_t { run = 1, step = 2, event = 3 };
inline constexpr size_t kFrameHeaderBytes = 13;
// A frame's step: a step record's or an event's step; a run description's is the step of the
// record before it (or the run's first step - 1 before any), so frames are in step order.

// A chunk closes once its raw frames reach this many bytes (RecordingWriterOptions), at most
// kMaxChunkTarget; one frame is at most kMaxPayloadBytes, so no chunk's raw body exceeds
// kMaxChunkRawBytes and a reader refuses a header that says otherwise.
inline constexpr size_t kMaxChunkTarget = 16u << 20;
inline constexpr size_t kMaxChunkRawBytes = kMaxChunkTarget + kMaxPayloadBytes + kFrameHeaderBytes;

// The topic a frame kind travels under on the wire (kTopicRun, ...); nullptr for an unknown kind.
const char* topic_of(FrameKind kind);

}  // namespace keel::wire::recording
