#include "cli/keygen_command.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>

#include "keel/wire/curve_keys.hpp"

namespace keel::app {
namespace {

// Creates `path` (never replacing a file) with `text` and the given mode; "" or the error.
std::string write_new_file(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return "cannot create " + path + ": " + std::strerror(errno);
  const ssize_t written = ::write(fd, text.data(), text.size());
  const bool ok = written == static_cast<ssize_t>(text.size());
  const int error = errno;
  ::close(fd);
  return ok ? std::string() : "cannot write " + path + ": " + std::strerror(error);
}

}  // namespace

int run_keygen(const std::string& name, std::ostream& out, std::ostream& err) {
  if (!keel::wire::curve_available()) {
    err << "keel-cli: this libzmq has no CURVE support; keys would be useless\n";
    return 1;
  }
  const keel::wire::CurveKeyPair pair = keel::wire::generate_curve_key_pair();
  const std::string secret_path = name + ".key", public_path = name + ".pub";
  if (::access(secret_path.c_str(), F_OK) == 0 || ::access(public_path.c_str(), F_OK) == 0) {
    err << "keel-cli: " << secret_path << " or " << public_path << " exists already; not overwriting it\n";
    return 1;
  }
  std::string error = write_new_file(secret_path, pair.secret_key + "\n", 0600);
  if (error.empty()) error = write_new_file(public_path, pair.public_key + "\n", 0644);
  if (!error.empty()) {
    err << "keel-cli: " << error << '\n';
    return 1;
  }
  out << pair.public_key << '\n';
  err << "keel-cli: wrote " << secret_path << " (secret, keep it on this machine) and " << public_path
      << " (public)\n";
  return 0;
}

CliCommand add_keygen_command(CLI::App& app) {
  auto name = std::make_shared<std::string>();
  CLI::App* keygen = app.add_subcommand("keygen", "Make a CURVE key pair NAME.key (secret) and NAME.pub for "
                                                  "authenticated commands");
  keygen->add_option("name", *name, "Path prefix of the two files")->required();
  return CliCommand{keygen, [name] { return run_keygen(*name, std::cout, std::cerr); }};
}

}  // namespace keel::app
