#include "checkpoint_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "remove_tree.hpp"

namespace keel::probe {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int error) { return std::strerror(error); }

// Writes all of `bytes` to a new file and makes it durable. "" on success, else why not.
std::string write_file(const fs::path& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create " + path.string() + ": " + errno_text(errno);
  size_t written = 0;
  std::string error;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = "cannot write " + path.string() + ": " + errno_text(n < 0 ? errno : EIO);
      break;
    }
    written += static_cast<size_t>(n);
  }
  if (error.empty() && ::fsync(fd) != 0) error = "cannot sync " + path.string() + ": " + errno_text(errno);
  if (::close(fd) != 0 && error.empty()) error = "cannot close " + path.string() + ": " + errno_text(errno);
  return error;
}

// Makes a rename inside `dir` durable.
void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Renames `partial` to the first of name, name-2, name-3, ... in `dir` that is free, in one
// step that cannot take a name another process took meanwhile: checking for a free name and
// then renaming let two ranks that share a dump directory pick the same one, and the second
// rename failed. Where the filesystem has no RENAME_NOREPLACE (EINVAL), the check and rename
// remain. Sets `error` (and returns the last name tried) when none could be taken.
fs::path rename_to_free_name(const fs::path& partial, const fs::path& dir, const std::string& name, std::string& error) {
  auto failed = [&](const fs::path& to) {
    error = "cannot rename " + partial.string() + " to " + to.string() + ": " + errno_text(errno);
    return to;
  };
  bool no_replace = true;
  fs::path candidate = dir / name;
  for (int i = 2;; ++i) {
    if (no_replace) {
      if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, candidate.c_str(), RENAME_NOREPLACE) == 0) return candidate;
      if (errno == EINVAL || errno == ENOSYS) {
        no_replace = false;   // this name again, the old way
      } else if (errno != EEXIST && errno != ENOTEMPTY) {
        return failed(candidate);
      }
    }
    if (!no_replace) {
      std::error_code ec;
      if (!fs::exists(candidate, ec)) return ::rename(partial.c_str(), candidate.c_str()) == 0 ? candidate : failed(candidate);
    }
    if (i > 1000) {
      error = "no free name for " + (dir / name).string() + " (1000 taken)";
      return candidate;
    }
    candidate = dir / (name + "-" + std::to_string(i));
  }
}

}  // namespace

std::string sanitize_label(const std::string& label) {
  std::string out;
  for (const char c : label) {
    if (out.size() >= 64) break;
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                       c == '_' || c == '-';
    if (out.empty() && c == '.') continue;
    out += plain ? c : '_';
  }
  return out;
}

std::string absolute_dir(const std::string& dir) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(dir, ec);
  if (ec) return dir;
  // Canonical rather than only lexically normal: "runs/link/../dumps" is not "runs/dumps"
  // when link is a symbolic link, and the path reported must be the one written.
  const fs::path canonical = fs::weakly_canonical(absolute, ec);
  return (ec ? absolute.lexically_normal() : canonical).string();
}

CheckpointResult write_checkpoint(const CheckpointJob& job) {
  const auto start = std::chrono::steady_clock::now();
  CheckpointResult result;
  result.token = job.token;
  result.step = job.step;
  const fs::path dir(absolute_dir(job.dir));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    result.path = (dir / job.name).string();
    result.error = "cannot create dump directory " + dir.string() + ": " + ec.message();
    return result;
  }
  int64_t bytes = 0;
  for (const CheckpointFile& file : job.files) bytes += static_cast<int64_t>(file.bytes.size());
  const fs::space_info space = fs::space(dir, ec);
  const auto available = static_cast<int64_t>(std::min<uintmax_t>(space.available, INT64_MAX));
  if (!ec && available - bytes < job.min_free_bytes) {
    result.path = (dir / job.name).string();
    result.error = "not written: its " + std::to_string(bytes) + " bytes ";
    if (bytes > available) {
      result.error += "do not fit in the " + std::to_string(available) + " bytes free on " + dir.string() + "'s filesystem";
    } else {
      result.error += "would leave " + std::to_string(available - bytes) + " bytes free on " + dir.string() +
                      "'s filesystem, less than the " + std::to_string(job.min_free_bytes) +
                      " kept free (ProbeOptions::dump_min_free_bytes)";
    }
    return result;
  }
  // Unique to this write: other processes (the pid) and other writers of this one (two probes
  // dumping the same step's name at once) each build in a directory of their own.
  static std::atomic<uint64_t> writes{0};
  const fs::path partial =
      dir / ("." + job.name + ".partial-" + std::to_string(::getpid()) + "-" + std::to_string(writes.fetch_add(1)));
  result.path = (dir / job.name).string();
  if (::mkdir(partial.c_str(), 0755) != 0) {
    result.error = "cannot create " + partial.string() + ": " + errno_text(errno);
    return result;
  }
  for (const CheckpointFile& file : job.files) {
    result.error = write_file(partial / file.name, file.bytes);
    if (!result.error.empty()) break;
    result.bytes += static_cast<int64_t>(file.bytes.size());
  }
  if (result.error.empty()) {
    sync_directory(partial);
    result.path = rename_to_free_name(partial, dir, job.name, result.error).string();
  }
  if (!result.error.empty()) {
    // A partial dump is worthless and fills the disk further: remove what was written.
    remove_tree(partial.string());
    result.bytes = 0;
  } else {
    sync_directory(dir);
    result.ok = true;
  }
  result.write_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

CheckpointWriter::CheckpointWriter() : thread_([this] { run(); }) {}

CheckpointWriter::~CheckpointWriter() { finish(); }

void CheckpointWriter::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool CheckpointWriter::accepts(Admission admission) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return accepts_locked(admission);
}

bool CheckpointWriter::accepts_locked(Admission admission) const {
  const size_t ahead = queue_.size() + (writing_ ? 1 : 0);
  const size_t may_be_ahead = admission == Admission::kBehindOne ? 1 : 0;
  return !stop_ && ahead <= may_be_ahead;
}

bool CheckpointWriter::submit(CheckpointJob job, Admission admission) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!accepts_locked(admission)) return false;
    queue_.push_back(std::move(job));
  }
  wake_.notify_all();
  return true;
}

bool CheckpointWriter::poll(std::vector<CheckpointResult>& out) {
  out.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  while (!done_.empty()) {
    out.push_back(std::move(done_.front()));
    done_.pop_front();
  }
  return !out.empty();
}

void CheckpointWriter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;   // stopping with nothing left to write
    CheckpointJob job = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    CheckpointResult result;
    try {
      result = write_checkpoint(job);
    } catch (const std::exception& e) {
      // std::filesystem or an allocation failed: a failed dump, never a dead writer.
      result.token = job.token;
      result.step = job.step;
      result.error = std::string("dump failed: ") + e.what();
    }
    // No longer counted ahead of a submission before the ack goes out: a client that asks for
    // the next dump as soon as it has the ack must meet the rate limit, not "still being written".
    lock.lock();
    writing_ = false;
    done_.push_back(result);
    lock.unlock();
    if (job.on_written) {
      try {
        job.on_written(result);
      } catch (const std::exception&) {
        // The callback only queues an ack; losing it makes the client time out.
      }
    }
    lock.lock();
  }
}

}  // namespace keel::probe
