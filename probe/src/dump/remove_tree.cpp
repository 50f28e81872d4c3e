#include "remove_tree.hpp"

#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

namespace keel::probe {
namespace {

// Children before their directory (FTW_DEPTH): remove() unlinks a file or link, rmdir()s an
// emptied directory.
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  return std::remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

}  // namespace

bool remove_tree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT;
  return ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

}  // namespace keel::probe
