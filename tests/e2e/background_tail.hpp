// BackgroundTail: `keel-cli tail --json` running beside a test, its output in a file.
//
// What it is for: e2e tests that check the telemetry a trainer published. The output goes to a
// file, not a pipe, so the tail never blocks on a test that is busy elsewhere (a full pipe
// would stall it and let ZeroMQ drop records for it). Its own timeout is long, so a slow
// trainer start on a loaded machine does not end it; the test ends it with SIGINT once it has
// seen what it waits for.
// Threads: the test thread.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace keel::e2e {

class BackgroundTail {
 public:
  // Starts the tail on `endpoint`; its files are `prefix`.jsonl, .pid and .rc.
  BackgroundTail(const std::string& cli_path, const std::string& endpoint, const std::string& prefix)
      : out_path_(prefix + ".jsonl"), pid_path_(prefix + ".pid"), rc_path_(prefix + ".rc") {
    for (const std::string* path : {&out_path_, &pid_path_, &rc_path_}) std::remove(path->c_str());
    const std::string command = "(" + cli_path + " tail --json --timeout 300 --endpoint " + endpoint + " > " +
                                out_path_ + " 2>/dev/null & echo $! > " + pid_path_ + "; wait $!; echo $? > " +
                                rc_path_ + ") &";
    started_ = std::system(command.c_str()) == 0;
  }
  BackgroundTail(const BackgroundTail&) = delete;
  BackgroundTail& operator=(const BackgroundTail&) = delete;
  ~BackgroundTail() { stop(); }

  bool started() const { return started_; }
  // Everything the tail printed so far.
  const std::string& output() {
    std::ifstream in(out_path_, std::ios::binary);
    in.seekg(std::streamoff(text_.size()));
    std::stringstream more;
    if (in) more << in.rdbuf();
    text_ += more.str();
    return text_;
  }

  // Waits for a whole line containing `needle` and returns it; "" on timeout. Lines already
  // searched are not searched again, so it costs what was printed since the last call.
  std::string wait_for(const std::string& needle, double timeout_secs) {
    for (double waited = 0; waited < timeout_secs; waited += 0.05) {
      const std::string& text = output();
      for (size_t end; (end = text.find('\n', searched_)) != std::string::npos; searched_ = end + 1) {
        const std::string line = text.substr(searched_, end - searched_);
        if (line.find(needle) != std::string::npos) {
          searched_ = end + 1;
          return line;
        }
      }
      usleep(50000);
    }
    return "";
  }

  // Ends the tail (SIGINT) and waits until it has exited; false if it had not started or
  // did not exit within 20 s.
  bool stop() {
    if (!started_ || stopped_) return stopped_;
    if (!read_file(rc_path_).empty()) return stopped_ = true;   // ended by itself: no pid to signal
    pid_t pid = 0;
    for (int i = 0; i < 200 && pid <= 0; ++i) {
      pid = pid_t(std::atol(read_file(pid_path_).c_str()));
      if (pid <= 0) usleep(50000);
    }
    if (pid > 0) kill(pid, SIGINT);
    for (int i = 0; i < 400 && read_file(rc_path_).empty(); ++i) usleep(50000);
    stopped_ = !read_file(rc_path_).empty();
    return stopped_;
  }

 private:
  static std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string out_path_, pid_path_, rc_path_;
  std::string text_;      // the output read so far
  size_t searched_ = 0;   // where the next wait_for starts: the line after the last match
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace keel::e2e
