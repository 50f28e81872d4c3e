// remove_tree: what the checkpoint writer and the tests delete directories with, instead of
// std::filesystem::remove_all (which resolves to libtorch 2.x's incompatible copy and crashed).
#include "dump/remove_tree.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace {

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

std::string fresh_dir(const std::string& tag) {
  const std::string dir = "/tmp/keel-remove-tree-" + tag + "-" + std::to_string(::getpid());
  keel::probe::remove_tree(dir);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

TEST(RemoveTree, RemovesNestedDirectoriesAndFiles) {
  const std::string root = fresh_dir("nested");
  ::mkdir((root + "/a").c_str(), 0755);
  ::mkdir((root + "/a/b").c_str(), 0755);
  std::ofstream(root + "/a/b/model.pt") << "weights";
  std::ofstream(root + "/top.json") << "{}";
  EXPECT_TRUE(keel::probe::remove_tree(root));
  EXPECT_FALSE(exists(root));
}

TEST(RemoveTree, RemovesALinkButNotWhatItPointsTo) {
  const std::string outside = fresh_dir("outside");
  std::ofstream(outside + "/keep") << "keep";
  const std::string root = fresh_dir("link");
  ASSERT_EQ(::symlink(outside.c_str(), (root + "/to-outside").c_str()), 0);
  EXPECT_TRUE(keel::probe::remove_tree(root));
  EXPECT_FALSE(exists(root));
  EXPECT_TRUE(exists(outside + "/keep"));
  keel::probe::remove_tree(outside);
}

TEST(RemoveTree, NothingThereIsSuccessAndAFileIsRemovedToo) {
  EXPECT_TRUE(keel::probe::remove_tree("/tmp/keel-remove-tree-never-created-" + std::to_string(::getpid())));
  const std::string file = "/tmp/keel-remove-tree-file-" + std::to_string(::getpid());
  std::ofstream(file) << "x";
  EXPECT_TRUE(keel::probe::remove_tree(file));
  EXPECT_FALSE(exists(file));
}

}  // namespace
