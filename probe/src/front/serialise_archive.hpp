// serialise_archive: what torch::save writes for a libtorch module or optimizer, into memory.
// Threads: the caller's. Never: touches the disk.
#pragma once

#include <string>

#include <torch/torch.h>

namespace keel::probe {

template <class Saveable>
std::string serialise_archive(Saveable& saveable) {
  torch::serialize::OutputArchive archive;
  saveable.save(archive);
  // Appending to one string skips std::ostringstream's per-write overhead and re-copies.
  std::string out;
  archive.save_to([&out](const void* data, size_t size) {
    out.append(static_cast<const char*>(data), size);
    return size;
  });
  return out;
}

}  // namespace keel::probe
