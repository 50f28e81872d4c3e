// prefetch_version: asks the cache for a tensor's version counter ahead of reading it.
//
// What it is for: a tensor's version lives in a small object of its own (VariableVersion's
// VersionCounter), one more pointer away than the TensorImpl. The gradient pass compares the
// versions of every gradient and weight the accumulators' hooks measured; at 50,000 tensors
// those objects are far out of cache, and each comparison waited on memory in turn.
// libtorch hands out the version but not the counter's address. VariableVersion holds nothing
// but its intrusive_ptr to the counter, so its one word is that address: read as a plain word
// and only ever prefetched, never dereferenced here, so a layout that ever differed would cost
// a useless prefetch, not a wrong read (the static_assert makes that a compile error first).
// Threads: any thread that may read the TensorImpl. Never: writes, faults, or changes a count.
#pragma once

#include <cstring>

#include <c10/core/TensorImpl.h>
#include <c10/util/intrusive_ptr.h>

namespace keel::probe {

inline void prefetch_version(const c10::TensorImpl& impl) {
  static_assert(sizeof(c10::VariableVersion) == sizeof(void*),
                "VariableVersion is no longer one pointer to its counter: see version_counter_prefetch.hpp");
  const char* counter = nullptr;
  std::memcpy(&counter, static_cast<const void*>(&impl.version_counter()), sizeof counter);
  // The count sits after the intrusive_ptr_target header, maybe on the next cache line.
  if (counter != nullptr) __builtin_prefetch(counter + sizeof(c10::intrusive_ptr_target));
}

}  // namespace keel::probe
