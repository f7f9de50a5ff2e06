#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

#include "spdlog/spdlog.h"

namespace ripplekv::cli {

namespace {
std::string FormatDuration(double s) {
  char buf[32];
  const int t = static_cast<int>(s + 0.5);
  if (t >= 3600) {
    std::snprintf(buf, sizeof(buf), "%dh%02dm", t / 3600, (t / 60) % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%d:%02d", t / 60, t % 60);
  }
  return buf;
}
}  // namespace

Progress::Progress(std::string label, int64_t total, std::string unit, double min_interval_s)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      min_interval_s_(min_interval_s),
      tty_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

Progress::~Progress() {
  if (tty_ && printed_) std::fputc('\n', stderr);
}

void Progress::Update(int64_t done) {
  if (spdlog::get_level() > spdlog::level::info) return;  // --quiet
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double since = std::chrono::duration<double>(now - last_print_).count();
  const bool finished = done >= total_;
  if (!tty_ && !finished && printed_ && since < min_interval_s_) return;
  last_print_ = now;
  printed_ = true;
  const double rate = elapsed > 0 ? done / elapsed : 0.0;
  const double eta = rate > 0 ? (total_ - done) / rate : 0.0;
  const double frac = total_ > 0 ? static_cast<double>(done) / total_ : 1.0;
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    std::string bar(filled, '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%s [%s] %lld/%lld %s  %.2f %s/s  ETA %s   ", label_.c_str(),
                 bar.c_str(), static_cast<long long>(done), static_cast<long long>(total_),
                 unit_.c_str(), rate, unit_.c_str(), FormatDuration(eta).c_str());
  } else {
    std::fprintf(stderr, "%s: %lld/%lld %s (%.0f%%), %.2f %s/s, elapsed %s, ETA %s\n",
                 label_.c_str(), static_cast<long long>(done), static_cast<long long>(total_),
                 unit_.c_str(), 100.0 * frac, rate, unit_.c_str(), FormatDuration(elapsed).c_str(),
                 FormatDuration(eta).c_str());
  }
  std::fflush(stderr);
}

}  // namespace ripplekv::cli
