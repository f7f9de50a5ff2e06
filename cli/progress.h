#pragma once
// Progress on stderr: a redrawn bar with rate and ETA when stderr is a terminal, otherwise one
// plain line per update at most every `min_interval_s` seconds (logs stay readable).
// Not thread-safe; update from one thread.

#include <chrono>
#include <cstdint>
#include <string>

namespace ripplekv::cli {

class Progress {
 public:
  Progress(std::string label, int64_t total, std::string unit, double min_interval_s = 2.0);
  ~Progress();  // ends the bar's line

  void Update(int64_t done);

 private:
  std::string label_;
  int64_t total_;
  std::string unit_;
  double min_interval_s_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_print_;
  bool printed_ = false;
};

}  // namespace ripplekv::cli
