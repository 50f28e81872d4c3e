// Writes the fuzzers' seed corpus from real messages: every message type with its optional
// parts present and absent, and a command of every kind (the seeds of the mutation tests,
// tests/shared/wire_mutator.hpp), encoded by the real encoder.
// Usage: keel_fuzz_corpus tests/fuzz/corpus
//   -> corpus/fuzz_decode/NN-<topic>.msgpack (every seed), corpus/fuzz_command/NN-cmd.msgpack
// Old seeds (*.msgpack) in those folders are removed first, so a changed wire format leaves
// no stale ones; inputs the fuzzers saved under other names are kept.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "keel/wire/codec.hpp"
#include "wire_mutator.hpp"

namespace fs = std::filesystem;

namespace {

bool write_seeds(const fs::path& dir, const std::vector<keel::wire::Message>& messages) {
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".msgpack") fs::remove(entry.path());
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "%02zu-%s.msgpack", i, keel::wire::topic_of(messages[i]));
    const std::vector<char> bytes = keel::wire::encode(messages[i]);
    std::ofstream out(dir / name, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", (dir / name).c_str());
      return false;
    }
  }
  std::printf("%zu seeds in %s\n", messages.size(), dir.c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  const fs::path root(argv[1]);
  const std::vector<keel::wire::Message> all = keel::wire::testing::seed_messages();
  std::vector<keel::wire::Message> commands;
  for (const keel::wire::Message& m : all) {
    if (std::holds_alternative<keel::wire::Command>(m)) commands.push_back(m);
  }
  const bool ok = write_seeds(root / "fuzz_decode", all) && write_seeds(root / "fuzz_command", commands);
  return ok ? 0 : 1;
}
