#include "keel/wire/user_keys.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace keel::wire {
namespace {

constexpr const char* kKeyFile = "user.key";

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%03o", static_cast<unsigned>(mode & 0777));
  return text;
}

// The directory exists (created 0700 when missing), is a directory owned by this user and
// open to no one else.
void check_directory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw std::runtime_error("cannot create the key directory " + dir + ": " + std::strerror(errno) +
                             " (set KEEL_KEY_DIR to a directory you own)");
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    throw std::runtime_error("cannot read the key directory " + dir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) throw std::runtime_error("the key directory " + dir + " is not a directory");
  if (st.st_uid != ::geteuid()) {
    throw std::runtime_error("the key directory " + dir + " belongs to another user (uid " + std::to_string(st.st_uid) +
                             "): keel keeps your key only where no one else can reach it");
  }
  if ((st.st_mode & 077) != 0) {
    throw std::runtime_error("the key directory " + dir + " is open to other users (mode " + octal(st.st_mode) +
                             "): run chmod 700 " + dir);
  }
}

// The secret key in `path`: a regular file of this user's, mode 0600 or stricter.
std::string read_secret(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot read the key file " + path + ": " + std::strerror(errno));
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0) {
    why = std::string("cannot read the key file ") + path + ": " + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    why = "the key file " + path + " is not a regular file";
  } else if (st.st_uid != ::geteuid()) {
    why = "the key file " + path + " belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  } else if ((st.st_mode & 077) != 0) {
    why = "the key file " + path + " is readable by other users (mode " + octal(st.st_mode) +
          "): anyone who read it can steer your runs; delete it (a new key is made) or chmod 600 it";
  }
  char text[64] = {};
  const ssize_t got = why.empty() ? ::read(fd, text, sizeof text - 1) : 0;
  ::close(fd);
  if (!why.empty()) throw std::runtime_error(why);
  std::string key(text, got > 0 ? static_cast<size_t>(got) : 0);
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (!is_curve_key(key)) throw std::runtime_error("the key file " + path + " does not hold a 40-character Z85 key");
  return key;
}

// Writes a fresh secret key as `path`, unless another process got there first (then its key
// stands): written to a private temporary file, then linked into place, which fails if
// `path` exists.
void create_secret(const std::string& dir, const std::string& path) {
  const CurveKeyPair fresh = generate_curve_key_pair();
  std::string temp = dir + "/.user.key.XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) throw std::runtime_error("cannot create a key file in " + dir + ": " + std::strerror(errno));
  const std::string line = fresh.secret_key + "\n";
  const bool written = ::fchmod(fd, 0600) == 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                       ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!written) {
    ::unlink(temp.c_str());
    throw std::runtime_error("cannot write a key file in " + dir + ": " + std::strerror(saved));
  }
  const bool linked = ::link(temp.c_str(), path.c_str()) == 0;
  const int link_errno = errno;
  ::unlink(temp.c_str());
  if (!linked && link_errno != EEXIST) {
    throw std::runtime_error("cannot create the key file " + path + ": " + std::strerror(link_errno));
  }
}

}  // namespace

std::string user_key_dir() {
  if (const char* dir = std::getenv("KEEL_KEY_DIR"); dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  std::string base = home != nullptr ? home : "";
  if (base.empty()) {
    if (const passwd* entry = ::getpwuid(::geteuid()); entry != nullptr && entry->pw_dir != nullptr) base = entry->pw_dir;
  }
  if (base.empty()) throw std::runtime_error("no home directory to keep your keel key in: set KEEL_KEY_DIR");
  return base + "/.keel";
}

CurveKeyPair user_key_pair() {
  if (!curve_available()) {
    throw std::runtime_error("this libzmq has no CURVE support (libsodium), so keel cannot authenticate commands");
  }
  const std::string dir = user_key_dir();
  check_directory(dir);
  const std::string path = dir + "/" + kKeyFile;
  if (::access(path.c_str(), F_OK) != 0) create_secret(dir, path);
  CurveKeyPair pair;
  pair.secret_key = read_secret(path);
  pair.public_key = curve_public_key_of(pair.secret_key);
  if (pair.public_key.empty()) throw std::runtime_error("the key file " + path + " does not hold a valid CURVE secret key");
  return pair;
}

}  // namespace keel::wire
