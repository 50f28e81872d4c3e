// CURVE keys for the command channel: generation, checking and key files.
//
// What it is for: command authentication (PROTOCOL §6, "Who may send commands"). The probe's
// command socket is a CURVE server with its own key pair and accepts only clients whose public
// key is listed; clients (keel-cli, the dashboard) know the server's public key and have a key
// pair of their own. Keys are the 40-character Z85 text ZeroMQ uses; a key file holds one key
// on its first line (`keel-cli keygen` writes NAME.key, the secret, mode 0600, and NAME.pub).
// Threads: free functions, any thread. Never: logs or prints a secret key.
#pragma once

#include <string>

namespace keel::wire {

struct CurveKeyPair {
  std::string public_key;   // Z85, 40 characters
  std::string secret_key;   // Z85, 40 characters
};

// True when ZeroMQ was built with CURVE (libsodium); Debian's libzmq is.
bool curve_available();
// A fresh key pair; throws std::runtime_error when CURVE is unavailable.
CurveKeyPair generate_curve_key_pair();
// The public key of a Z85 secret key; "" when `secret_key` is not a valid key.
std::string curve_public_key_of(const std::string& secret_key);
// 40 characters of the Z85 alphabet.
bool is_curve_key(const std::string& key);
// A key given on a command line: either the Z85 key itself or the path of a key file. Throws
// std::runtime_error with a sentence naming the file or the problem.
std::string read_curve_key(const std::string& key_or_path);

}  // namespace keel::wire
