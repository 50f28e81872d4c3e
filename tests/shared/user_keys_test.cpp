// The user's key pair (user_keys.hpp): made once, kept, found again; refused, with a message
// saying how to fix it, where another user could read it.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "keel/wire/user_keys.hpp"

namespace {

namespace fs = std::filesystem;
using keel::wire::CurveKeyPair;
using keel::wire::user_key_pair;

// A fresh KEEL_KEY_DIR (not created yet) for one test, restored after it.
class UserKeys : public testing::Test {
 protected:
  void SetUp() override {
    if (!keel::wire::curve_available()) GTEST_SKIP() << "this libzmq has no CURVE";
    if (const char* old = std::getenv("KEEL_KEY_DIR")) saved_ = old;
    base_ = fs::temp_directory_path() / ("keel-user-keys-" + std::to_string(::getpid()) + "-" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_);
    dir_ = base_ / "keys";
    ::setenv("KEEL_KEY_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (saved_.empty()) {
      ::unsetenv("KEEL_KEY_DIR");
    } else {
      ::setenv("KEEL_KEY_DIR", saved_.c_str(), 1);
    }
    fs::remove_all(base_);
  }
  static mode_t mode_of(const fs::path& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 0777;
  }
  std::string error_of_user_key_pair() {
    try {
      user_key_pair();
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }
  fs::path base_, dir_;
  std::string saved_;
};

TEST_F(UserKeys, MadeOnFirstUsePrivateAndTheSameEverAfter) {
  EXPECT_EQ(keel::wire::user_key_dir(), dir_.string());
  const CurveKeyPair first = user_key_pair();
  EXPECT_TRUE(keel::wire::is_curve_key(first.public_key));
  EXPECT_EQ(keel::wire::curve_public_key_of(first.secret_key), first.public_key);
  EXPECT_EQ(mode_of(dir_), 0700u);
  EXPECT_EQ(mode_of(dir_ / "user.key"), 0600u);
  const CurveKeyPair again = user_key_pair();
  EXPECT_EQ(again.public_key, first.public_key);
  EXPECT_EQ(again.secret_key, first.secret_key);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir_)) left.push_back(entry.path().filename());
  EXPECT_EQ(left, std::vector<std::string>{"user.key"}) << "no temporary file left behind";
}

// A trainer with two probes, and a dashboard started beside it: all agree on one pair.
TEST_F(UserKeys, CallersStartingAtOnceAgreeOnOnePair) {
  std::vector<std::future<std::string>> made;
  for (int i = 0; i < 8; ++i) made.push_back(std::async(std::launch::async, [] { return user_key_pair().public_key; }));
  const std::string first = made[0].get();
  for (size_t i = 1; i < made.size(); ++i) EXPECT_EQ(made[i].get(), first);
}

TEST_F(UserKeys, ADirectoryOpenToOthersIsRefused) {
  fs::create_directories(dir_);
  ::chmod(dir_.c_str(), 0755);
  const std::string error = error_of_user_key_pair();
  EXPECT_NE(error.find("is open to other users (mode 755): run chmod 700 " + dir_.string()), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(dir_ / "user.key")) << "no key made where others can read it";
}

TEST_F(UserKeys, AKeyFileReadableByOthersIsRefused) {
  user_key_pair();
  ::chmod((dir_ / "user.key").c_str(), 0644);
  const std::string error = error_of_user_key_pair();
  EXPECT_NE(error.find("is readable by other users (mode 644)"), std::string::npos) << error;
}

TEST_F(UserKeys, AKeyFileThatHoldsNoKeyIsRefused) {
  fs::create_directories(dir_);
  ::chmod(dir_.c_str(), 0700);
  {
    std::ofstream out(dir_ / "user.key");
    out << "not a key\n";
  }
  ::chmod((dir_ / "user.key").c_str(), 0600);
  const std::string error = error_of_user_key_pair();
  EXPECT_NE(error.find("does not hold a 40-character Z85 key"), std::string::npos) << error;
}

TEST_F(UserKeys, ASymlinkedKeyFileIsRefused) {
  user_key_pair();
  fs::rename(dir_ / "user.key", base_ / "elsewhere.key");
  fs::create_symlink(base_ / "elsewhere.key", dir_ / "user.key");
  const std::string error = error_of_user_key_pair();
  EXPECT_NE(error.find("cannot read the key file"), std::string::npos) << error;
}

}  // namespace
