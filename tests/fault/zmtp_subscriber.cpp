#include "zmtp_subscriber.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>

namespace keel::fault {
namespace {

// ZMTP 3.0 (rfc.zeromq.org/spec/23) greeting: signature, version 3.0, NULL mechanism, client.
std::string greeting() {
  std::string g(64, '\0');
  g[0] = '\xff';
  g[9] = '\x7f';
  g[10] = 3;
  g[11] = 0;
  g.replace(12, 4, "NULL");
  return g;
}

// A frame: flags (0x04 command, 0x02 long size), then its size and body.
std::string frame(const std::string& body, bool command) {
  std::string out;
  const uint64_t n = body.size();
  if (n <= 255) {
    out += static_cast<char>(command ? 0x04 : 0x00);
    out += static_cast<char>(n);
  } else {
    out += static_cast<char>(command ? 0x06 : 0x02);
    for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
  }
  return out + body;
}

std::string ready_as_sub() {
  std::string body = "\x05READY";
  body += static_cast<char>(11);
  body += "Socket-Type";
  body += std::string("\0\0\0\x03", 4);
  body += "SUB";
  return frame(body, true);
}

}  // namespace

ZmtpSubscriber::~ZmtpSubscriber() { close(); }

bool ZmtpSubscriber::connect(const std::string& endpoint) {
  close();
  const std::string address = endpoint.substr(endpoint.find("://") + 3);
  const size_t colon = address.rfind(':');
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.substr(0, colon).c_str(), address.substr(colon + 1).c_str(), &hints, &found) != 0) {
    return false;
  }
  fd_ = ::socket(found->ai_family, found->ai_socktype, 0);
  const bool ok = fd_ >= 0 && ::connect(fd_, found->ai_addr, found->ai_addrlen) == 0;
  freeaddrinfo(found);
  if (!ok) {
    close();
    return false;
  }
  timeval timeout{1, 0};
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  // The probe answers with its own greeting and READY; they are never read, like the rest.
  return send_all(greeting()) && send_all(ready_as_sub());
}

bool ZmtpSubscriber::subscribe(const std::vector<std::string>& topics) {
  std::string batch;
  for (const std::string& topic : topics) {
    batch += frame("\x01" + topic, false);
    if (batch.size() >= (1 << 16) && !send_all(batch)) return false;
    if (batch.size() >= (1 << 16)) batch.clear();
  }
  return send_all(batch);
}

bool ZmtpSubscriber::open(int wait_ms) {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  if (::poll(&p, 1, wait_ms) == 0) return true;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0;
}

void ZmtpSubscriber::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool ZmtpSubscriber::send_all(const std::string& bytes) {
  size_t sent = 0;
  while (fd_ >= 0 && sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return fd_ >= 0;
}

}  // namespace keel::fault
