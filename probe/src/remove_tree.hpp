// remove_tree: deletes a file or a directory with everything in it, with POSIX calls.
//
// Why not std::filesystem::remove_all: the official libtorch 2.x (pip's torch, the zip)
// exports its own copy of libstdc++'s std::filesystem from libtorch.so and libtorch_cpu.so.
// A program linked to it resolves std::filesystem::remove_all to that copy, which does not
// match the libstdc++ headers it was compiled with: keel's tests died in it with a jump to
// address 0. The checkpoint writer and the tests remove directories through this instead.
// Threads: any. Never: follows a symbolic link (it removes the link), throws.
#pragma once

#include <string>

namespace keel::probe {

// True when nothing is left at `path` (also when nothing was there).
bool remove_tree(const std::string& path);

}  // namespace keel::probe
