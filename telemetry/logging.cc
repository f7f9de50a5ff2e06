#include "telemetry/logging.h"

#include <chrono>
#include <ctime>
#include <memory>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace ripplekv::telemetry {
namespace {

thread_local LogIds current_ids;

std::string_view SeverityName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warning";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "critical";
    default:
      return "info";
  }
}

// "2026-12-02T23:10:00.123Z"
std::string Rfc3339Utc(spdlog::log_clock::time_point t) {
  const auto since = t.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since - seconds);
  const std::time_t tt = seconds.count();
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[40];
  std::snprintf(out, sizeof(out), "%s.%03dZ", buf, static_cast<int>(millis.count()));
  return out;
}

class JsonFormatter final : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string service) : service_(std::move(service)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    nlohmann::ordered_json line;
    line["ts"] = Rfc3339Utc(msg.time);
    line["severity"] = SeverityName(msg.level);
    line["service"] = service_;
    line["msg"] = std::string(msg.payload.data(), msg.payload.size());
    const LogIds& ids = current_ids;
    if (!ids.job.empty()) line["job"] = ids.job;
    if (!ids.task.empty()) line["task"] = ids.task;
    if (!ids.rollout.empty()) line["rollout"] = ids.rollout;
    if (!ids.worker.empty()) line["worker"] = ids.worker;
    const std::string text =
        line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    dest.append(text.data(), text.data() + text.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(service_);
  }

 private:
  const std::string service_;
};

}  // namespace

Status ConfigureLogging(std::string_view service, std::string_view format) {
  if (format != "text" && format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("log format '", std::string(format), "': expected text or json"));
  }
  auto logger = std::make_shared<spdlog::logger>(std::string(service),
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_level(spdlog::default_logger()->level());
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>(std::string(service)));
  }
  spdlog::set_default_logger(std::move(logger));
  return absl::OkStatus();
}

ScopedLogIds::ScopedLogIds(const LogIds& ids) : saved_(current_ids) {
  if (!ids.job.empty()) current_ids.job = ids.job;
  if (!ids.task.empty()) current_ids.task = ids.task;
  if (!ids.rollout.empty()) current_ids.rollout = ids.rollout;
  if (!ids.worker.empty()) current_ids.worker = ids.worker;
}

ScopedLogIds::~ScopedLogIds() { current_ids = std::move(saved_); }

const LogIds& CurrentLogIds() { return current_ids; }

}  // namespace ripplekv::telemetry
