// Counting operator new, for tests that check that a steady-state path allocates nothing (or
// no more at one size than at another). It replaces the global operator new and delete for
// the whole binary: include it in exactly one source file of a test binary of its own.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace keel::test {

// Every thread's allocations while `count_all` is set (a pass that OpenMP may hand to its
// pool), and this thread's own while `count_mine` is set (the training thread, apart from the
// threads a probe starts).
inline std::atomic<bool> count_all{false};
inline std::atomic<int64_t> all_allocations{0};
inline thread_local bool count_mine = false;
inline thread_local int64_t my_allocations = 0;

}  // namespace keel::test

// Out of line, so that GCC does not pair an inlined free() with the opaque operator new and
// warn about a mismatch.
__attribute__((noinline)) void* operator new(std::size_t size) {
  if (keel::test::count_all.load(std::memory_order_relaxed)) keel::test::all_allocations.fetch_add(1);
  if (keel::test::count_mine) ++keel::test::my_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void* operator new[](std::size_t size) { return operator new(size); }
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
