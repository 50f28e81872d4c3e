// Endpoint arithmetic: where the command socket lives relative to the PUB socket.
#include <string>

#include "keel/wire/codec.hpp"

namespace keel::wire {

std::string command_endpoint_for(const std::string& pub_endpoint) {
  const size_t colon = pub_endpoint.rfind(':');
  if (colon == std::string::npos) return "";
  const size_t first_digit = colon + 1;
  const size_t digits = pub_endpoint.size() - first_digit;
  // Five digits cover every TCP port; more (or none) is not a port we can step from.
  if (digits == 0 || digits > 5) return "";
  unsigned port = 0;
  for (size_t i = first_digit; i < pub_endpoint.size(); ++i) {
    const char c = pub_endpoint[i];
    if (c < '0' || c > '9') return "";
    port = port * 10 + static_cast<unsigned>(c - '0');
  }
  // Port 0 asks the OS for an ephemeral port, which has no "next" port; 65535 has no successor.
  if (port == 0 || port >= 65535) return "";
  return pub_endpoint.substr(0, first_digit) + std::to_string(port + 1);
}

}  // namespace keel::wire
