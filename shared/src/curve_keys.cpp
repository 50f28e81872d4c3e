#include "keel/wire/curve_keys.hpp"

#include <zmq.h>

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace keel::wire {
namespace {
constexpr size_t kZ85KeyChars = 40;
constexpr const char* kZ85Alphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
}  // namespace

bool curve_available() { return zmq_has("curve") != 0; }

CurveKeyPair generate_curve_key_pair() {
  char public_key[kZ85KeyChars + 1] = {};
  char secret_key[kZ85KeyChars + 1] = {};
  if (zmq_curve_keypair(public_key, secret_key) != 0) {
    throw std::runtime_error(std::string("cannot generate a CURVE key pair: ") + zmq_strerror(zmq_errno()));
  }
  return CurveKeyPair{public_key, secret_key};
}

bool is_curve_key(const std::string& key) {
  return key.size() == kZ85KeyChars && key.find_first_not_of(kZ85Alphabet) == std::string::npos;
}

std::string curve_public_key_of(const std::string& secret_key) {
  if (!is_curve_key(secret_key)) return {};
  char public_key[kZ85KeyChars + 1] = {};
  if (zmq_curve_public(public_key, secret_key.c_str()) != 0) return {};
  return public_key;
}

std::string read_curve_key(const std::string& key_or_path) {
  if (is_curve_key(key_or_path)) return key_or_path;
  std::ifstream in(key_or_path);
  if (!in) {
    throw std::runtime_error("\"" + key_or_path.substr(0, 80) +
                             "\" is neither a 40-character Z85 key nor a readable key file");
  }
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  if (!is_curve_key(line)) {
    throw std::runtime_error("key file " + key_or_path + " does not start with a 40-character Z85 key");
  }
  return line;
}

}  // namespace keel::wire
