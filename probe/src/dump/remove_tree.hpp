// remove_tree: deletes a file or a directory with everything in it, with POSIX calls.
//
// Why not std::filesystem::remove_all: the official libtorch 2.x (pip's torch, the zip) is
// built by GCC 13 and exports the copy of libstdc++'s std::filesystem it carries, from
// libtorch.so and libtorch_cpu.so. A program linked to it resolves std::filesystem::remove_all
// to libtorch.so's copy, which calls recursive_directory_iterator::__erase through a *weak*
// undefined reference: a libstdc++-internal function that no shared libstdc++ exports. It
// binds to address 0, so remove_all on any directory that exists jumps to 0 (SIGSEGV; seen
// with 2.11.0, `nm -D libtorch.so | grep __erase`). The other std::filesystem functions keel
// calls were each run linked to 2.11 and work. The CTest NoRemoveAllBesideLibtorch fails the
// build's tests if a libtorch-linked keel binary refers to remove_all again.
// Threads: any. Never: follows a symbolic link (it removes the link), throws.
#pragma once

#include <string>

namespace keel::probe {

// True when nothing is left at `path` (also when nothing was there).
bool remove_tree(const std::string& path);

}  // namespace keel::probe
