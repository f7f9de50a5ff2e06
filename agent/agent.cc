#include "agent/agent.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/apply_hook.h"
#include "agent/map_file.h"
#include "grpcpp/grpcpp.h"
#include "base/file_io.h"
#include "method/frozen_map.h"
#include "nlohmann/json.hpp"
#include "proto/client_channel.h"
#include "ripplekv/v1/rollout.grpc.pb.h"
#include "spdlog/spdlog.h"

namespace ripplekv::agent {
namespace {

namespace pb = ::ripplekv::v1;
using Clock = std::chrono::steady_clock;

// Longest error text sent in a report, bytes.
constexpr size_t kMaxReportErrorBytes = 1024;
// Characters of a version id: the first 16 hex digits of the SHA-256 of the map's document.
constexpr size_t kVersionChars = 16;

bool IsNodeIdChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '-';
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool Fatal(grpc::StatusCode code) {
  return code == grpc::StatusCode::PERMISSION_DENIED || code == grpc::StatusCode::UNAUTHENTICATED ||
         code == grpc::StatusCode::INVALID_ARGUMENT;
}

std::string_view Or(std::string_view s, std::string_view none) { return s.empty() ? none : s; }

// What running the apply hook (or not running one) came to.
struct HookOutcome {
  bool ok = true;
  int exit_code = 0;       // 0 when no hook ran; -1 killed, timed out or not started
  std::string error;       // one line when !ok
  bool cancelled = false;  // Stop() killed it
};

}  // namespace

Status ValidateAgentOptions(const AgentOptions& options) {
  if (options.node_id.empty() || options.node_id.size() > 128 ||
      !std::all_of(options.node_id.begin(), options.node_id.end(), IsNodeIdChar)) {
    return absl::InvalidArgumentError(
        absl::StrCat("node id '", options.node_id, "' must be 1..128 characters [A-Za-z0-9._:-]"));
  }
  if (options.model_hash.empty()) return absl::InvalidArgumentError("model hash is empty");
  if (options.map_path.empty()) return absl::InvalidArgumentError("map file path is empty");
  if (options.apply_timeout.count() <= 0) {
    return absl::InvalidArgumentError("apply timeout must be positive");
  }
  if (options.initial_backoff.count() <= 0 || options.max_backoff < options.initial_backoff) {
    return absl::InvalidArgumentError("backoff must be positive, the cap at least the first delay");
  }
  if (options.report_attempts < 1) {
    return absl::InvalidArgumentError("report attempts must be at least 1");
  }
  if (options.report_deadline.count() <= 0) {
    return absl::InvalidArgumentError("report deadline must be positive");
  }
  return absl::OkStatus();
}

AssignmentStep NextStep(std::string_view assigned_version, std::string_view held_version,
                        bool applied, bool files_exist) {
  if (assigned_version.empty()) {
    return held_version.empty() && !files_exist ? AssignmentStep::kReport : AssignmentStep::kRemove;
  }
  return assigned_version == held_version && applied ? AssignmentStep::kReport
                                                     : AssignmentStep::kWrite;
}

std::string_view StatedVersion(std::string_view held_version, bool applied) {
  return applied ? held_version : std::string_view();
}

struct Agent::Impl {
  AgentOptions options;
  std::string format_name;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::RolloutService::Stub> stub;
  int write_log_fd = -1;
  std::mt19937_64 rng{std::random_device{}()};

  // Run()'s thread only.
  HeldMap held;              // held.version "" : nothing
  bool files_exist = false;  // FILE or its sidecar is on disk

  std::atomic<bool> stopping{false};              // also the apply hook's cancel flag
  mutable std::mutex mu;                          // guards what follows
  std::condition_variable cv;                     // Stop() while waiting to retry
  grpc::ClientContext* stream_context = nullptr;  // the open WatchBudgets call
  grpc::ClientContext* report_context = nullptr;  // the ReportBudget call in flight
  AgentStats stats;

  ~Impl() {
    if (write_log_fd >= 0) ::close(write_log_fd);
  }

  const std::string& node() const { return options.node_id; }

  void SetHeld(HeldMap next) {
    held = std::move(next);
    std::lock_guard<std::mutex> lock(mu);
    stats.held_version = held.version;
    stats.applied = held.applied;
  }

  void Count(int64_t AgentStats::*counter) {
    std::lock_guard<std::mutex> lock(mu);
    ++(stats.*counter);
  }

  // Re-reads what is on disk after a failed change, which may have left either file behind.
  void Reload() {
    HeldMapRead read = ReadHeldMap(options.map_path, options.model_hash, format_name);
    files_exist = read.files_exist;
    SetHeld(std::move(read.held));
  }

  // Waits up to `delay`; true when Stop() was called.
  bool SleepUnlessStopped(std::chrono::milliseconds delay) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, delay, [&] { return stopping.load(); });
  }

  // Full jitter: uniform in [0, bound].
  std::chrono::milliseconds Jitter(std::chrono::milliseconds bound) {
    std::uniform_int_distribution<int64_t> pick(0, bound.count());
    return std::chrono::milliseconds(pick(rng));
  }

  // Appends one line to the write log: one write(), then fsync.
  void LogWrite(const std::string& version, const std::string& rollout_id, bool ok) {
    if (write_log_fd < 0) return;
    nlohmann::ordered_json j;
    j["time_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
    j["version"] = version;
    j["rollout_id"] = rollout_id;
    j["ok"] = ok;
    const std::string line = j.dump() + "\n";
    ssize_t n;
    do {
      n = ::write(write_log_fd, line.data(), line.size());
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(line.size()) || ::fsync(write_log_fd) != 0) {
      spdlog::warn("node {}: cannot append to write log {}: {}", node(), options.write_log_path,
                   n < 0 ? std::strerror(errno) : "short write");
    }
  }

  // The bytes FILE should hold for assignment `a` (whose version is set).
  StatusOr<std::string> Render(const pb::BudgetAssignment& a) const {
    const std::string& document = a.map().document();
    if (document.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("assignment of version ", a.version(), " carries no map document"));
    }
    if (!a.map().version().empty() && a.map().version() != a.version()) {
      return absl::InvalidArgumentError(absl::StrCat("assignment of version ", a.version(),
                                                     " carries map version ", a.map().version()));
    }
    const std::string content = Sha256Hex(document).substr(0, kVersionChars);
    if (content != a.version()) {
      return absl::InvalidArgumentError(absl::StrCat("map document does not match version ",
                                                     a.version(), " (its content hash is ", content,
                                                     ")"));
    }
    ASSIGN_OR_RETURN(method::FrozenMap frozen, method::FrozenMapFromJson(document));
    if (frozen.map.model_hash != options.model_hash) {
      return absl::InvalidArgumentError(absl::StrCat("map version ", a.version(), " is for model ",
                                                     frozen.map.model_hash, ", not ",
                                                     options.model_hash));
    }
    return method::RenderFrozenMap(frozen, options.format);
  }

  HookOutcome RunHook(const std::string& version, const std::string& rollout_id) {
    HookOutcome out;
    if (options.apply_command.empty()) return out;
    ApplyHookOptions hook{.command = options.apply_command,
                          .env = {{"RIPPLEKV_MAP_FILE", options.map_path},
                                  {"RIPPLEKV_MAP_VERSION", version},
                                  {"RIPPLEKV_MODEL_HASH", options.model_hash},
                                  {"RIPPLEKV_ROLLOUT_ID", rollout_id},
                                  {"RIPPLEKV_NODE_ID", options.node_id}},
                          .timeout = options.apply_timeout,
                          .cancel = &stopping};
    const Clock::time_point start = Clock::now();
    StatusOr<ApplyHookResult> result = RunApplyHook(hook);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (!result.ok()) {
      out = {.ok = false,
             .exit_code = -1,
             .error = absl::StrCat("apply hook could not start: ", result.status().message())};
    } else {
      out = {.ok = result->ok(),
             .exit_code = result->exit_code,
             .error = DescribeApplyHookFailure(*result, options.apply_timeout),
             .cancelled = result->cancelled};
    }
    if (out.ok) {
      spdlog::info("node {}: apply hook for version {} succeeded in {:.0f} ms", node(),
                   Or(version, "(none)"), ms);
    } else {
      spdlog::warn("node {}: apply hook for version {} failed after {:.0f} ms: {}", node(),
                   Or(version, "(none)"), ms, out.error);
    }
    return out;
  }

  // Tells the scheduler an assignment's outcome. Retries while it is unavailable; a report given
  // up on is only logged (the next WatchBudgets request states what the node holds).
  void Report(const std::string& version, bool ok, const std::string& error, int hook_exit_code) {
    pb::ReportBudgetRequest request;
    request.set_node_id(options.node_id);
    request.set_model_hash(options.model_hash);
    request.set_version(version);
    request.set_ok(ok);
    if (!ok) request.set_error(OneCleanLine(error, kMaxReportErrorBytes));
    request.set_hook_exit_code(hook_exit_code);
    std::chrono::milliseconds backoff = options.initial_backoff;
    for (int attempt = 1; attempt <= options.report_attempts; ++attempt) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + options.report_deadline);
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) return;
        report_context = &context;
      }
      pb::ReportBudgetResponse response;
      const grpc::Status s = stub->ReportBudget(&context, request, &response);
      {
        std::lock_guard<std::mutex> lock(mu);
        report_context = nullptr;
      }
      if (s.ok()) {
        Count(&AgentStats::reports_sent);
        spdlog::info("node {}: reported version {} {}{}", node(), Or(version, "(none)"),
                     ok ? "ok" : "failed: ", ok ? "" : request.error());
        return;
      }
      if (stopping) return;
      const bool transient = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                             s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      if (!transient || attempt == options.report_attempts) {
        Count(&AgentStats::reports_lost);
        spdlog::warn("node {}: report of version {} lost after {} attempt(s): code {}: {}", node(),
                     Or(version, "(none)"), attempt, static_cast<int>(s.error_code()),
                     s.error_message());
        return;
      }
      const std::chrono::milliseconds delay = Jitter(backoff);
      spdlog::info("node {}: report of version {} failed (code {}: {}); retrying in {} ms", node(),
                   Or(version, "(none)"), static_cast<int>(s.error_code()), s.error_message(),
                   delay.count());
      if (SleepUnlessStopped(delay)) return;
      backoff = std::min(backoff * 2, options.max_backoff);
    }
  }

  void Fail(const std::string& version, const std::string& error, int hook_exit_code) {
    Count(&AgentStats::failures);
    Report(version, /*ok=*/false, error, hook_exit_code);
  }

  void Write(const pb::BudgetAssignment& a) {
    const std::string& version = a.version();
    StatusOr<std::string> rendered = Render(a);
    if (!rendered.ok()) {
      spdlog::warn("node {}: cannot render version {} as {}: {}", node(), version, format_name,
                   std::string(rendered.status().message()));
      return Fail(version, std::string(rendered.status().message()), 0);
    }
    HeldMap next{.model_hash = options.model_hash,
                 .version = version,
                 .rollout_id = a.rollout_id(),
                 .format = format_name,
                 .sha256 = Sha256Hex(*rendered),
                 .applied = false};
    if (Status written = WriteMapFile(options.map_path, *rendered, next); !written.ok()) {
      spdlog::error("node {}: cannot write version {}: {}", node(), version,
                    std::string(written.message()));
      Reload();
      LogWrite(version, a.rollout_id(), false);
      return Fail(version, absl::StrCat("cannot write the map: ", written.message()), 0);
    }
    files_exist = true;
    SetHeld(next);
    Count(&AgentStats::writes);
    spdlog::info("node {}: wrote version {} to {} ({}, {} bytes)", node(), version,
                 options.map_path, format_name, rendered->size());
    const HookOutcome hook = RunHook(version, a.rollout_id());
    if (hook.ok) {
      next.applied = true;
      SetHeld(next);
      if (Status recorded = WriteSidecar(options.map_path, next); !recorded.ok()) {
        // Applied all the same; after a restart the hook runs again, which it must tolerate.
        spdlog::warn("node {}: cannot record version {} as applied: {}", node(), version,
                     std::string(recorded.message()));
      }
    }
    LogWrite(version, a.rollout_id(), hook.ok);
    if (hook.cancelled) return;  // stopping: the next stream states what is held
    if (hook.ok) {
      Report(version, /*ok=*/true, "", hook.exit_code);
    } else {
      Fail(version, hook.error, hook.exit_code);
    }
  }

  void Remove(const pb::BudgetAssignment& a) {
    if (Status removed = RemoveFileDurably(options.map_path); !removed.ok()) {
      spdlog::error("node {}: cannot remove {}: {}", node(), options.map_path,
                    std::string(removed.message()));
      Reload();
      LogWrite("", a.rollout_id(), false);
      return Fail("", absl::StrCat("cannot remove the map: ", removed.message()), 0);
    }
    SetHeld({});
    Count(&AgentStats::removals);
    spdlog::info("node {}: removed {}", node(), options.map_path);
    const HookOutcome hook = RunHook("", a.rollout_id());
    if (hook.ok) {
      // The sidecar goes last, once the hook succeeded: while it is there, a new empty assignment
      // (after a failed hook or a crash) removes and runs the hook again.
      if (Status removed = RemoveFileDurably(SidecarPath(options.map_path)); removed.ok()) {
        files_exist = false;
      } else {
        spdlog::warn("node {}: cannot remove the sidecar: {}", node(),
                     std::string(removed.message()));
      }
    }
    LogWrite("", a.rollout_id(), hook.ok);
    if (hook.cancelled) return;
    if (hook.ok) {
      Report("", /*ok=*/true, "", hook.exit_code);
    } else {
      Fail("", hook.error, hook.exit_code);
    }
  }

  void Handle(const pb::BudgetAssignment& a) {
    Count(&AgentStats::assignments);
    spdlog::info("node {}: assignment: version {} (rollout {})", node(), Or(a.version(), "(none)"),
                 Or(a.rollout_id(), "(none)"));
    if (!a.model_hash().empty() && a.model_hash() != options.model_hash) {
      spdlog::warn("node {}: assignment for model {} ignored: this node serves {}", node(),
                   a.model_hash(), options.model_hash);
      return Fail(a.version(),
                  absl::StrCat("assignment for model ", a.model_hash(), ", node serves ",
                               options.model_hash),
                  0);
    }
    switch (NextStep(a.version(), held.version, held.applied, files_exist)) {
      case AssignmentStep::kReport:
        spdlog::info("node {}: already holds version {}", node(), Or(a.version(), "(none)"));
        return Report(a.version(), /*ok=*/true, "", 0);
      case AssignmentStep::kWrite:
        return Write(a);
      case AssignmentStep::kRemove:
        return Remove(a);
    }
  }

  // One WatchBudgets stream until it ends. `delivered`: it carried at least one assignment.
  grpc::Status Watch(bool* delivered) {
    pb::WatchBudgetsRequest request;
    request.set_node_id(options.node_id);
    request.set_model_hash(options.model_hash);
    request.set_held_version(std::string(StatedVersion(held.version, held.applied)));
    grpc::ClientContext context;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping) return grpc::Status::CANCELLED;
      stream_context = &context;
      ++stats.streams;
    }
    spdlog::info("node {}: watching model {}, holding version {}", node(), options.model_hash,
                 Or(request.held_version(), "(none)"));
    std::unique_ptr<grpc::ClientReader<pb::BudgetAssignment>> reader =
        stub->WatchBudgets(&context, request);
    pb::BudgetAssignment assignment;
    while (!stopping && reader->Read(&assignment)) {
      *delivered = true;
      Handle(assignment);
    }
    // Reading stops early only after Stop(), which cancelled the call; cancelling here otherwise
    // would race the server's status and could turn it into CANCELLED.
    grpc::Status status = reader->Finish();
    std::lock_guard<std::mutex> lock(mu);
    stream_context = nullptr;
    return status;
  }
};

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() = default;

StatusOr<std::unique_ptr<Agent>> Agent::Create(const AgentOptions& options,
                                               std::shared_ptr<grpc::Channel> channel) {
  RETURN_IF_ERROR(ValidateAgentOptions(options));
  if (channel == nullptr) return absl::InvalidArgumentError("no channel to the scheduler");
  const std::string dir = DirectoryOf(options.map_path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return FileErrnoStatus(errno, dir, "stat");
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": not a directory"));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->format_name = std::string(method::BudgetFormatName(options.format));
  impl->channel = std::move(channel);
  impl->stub = pb::RolloutService::NewStub(impl->channel);
  if (!options.write_log_path.empty()) {
    impl->write_log_fd =
        ::open(options.write_log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (impl->write_log_fd < 0) return FileErrnoStatus(errno, options.write_log_path, "open");
  }
  HeldMapRead read = ReadHeldMap(options.map_path, options.model_hash, impl->format_name);
  if (!read.reason.empty()) {
    spdlog::warn("node {}: holds no map: {}", options.node_id, read.reason);
  } else if (!read.held.version.empty()) {
    spdlog::info("node {}: holds version {} ({})", options.node_id, read.held.version,
                 read.held.applied ? "applied" : "written, not applied");
  }
  impl->files_exist = read.files_exist;
  impl->SetHeld(std::move(read.held));
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

Status Agent::Run() {
  Impl& im = *impl_;
  std::chrono::milliseconds backoff = im.options.initial_backoff;
  while (!im.stopping) {
    bool delivered = false;
    const grpc::Status s = im.Watch(&delivered);
    if (im.stopping) break;
    const std::string why = absl::StrCat(
        "code ", static_cast<int>(s.error_code()), ": ",
        std::string(Or(s.error_message(), "(no message)")),
        std::string(pb::TlsHintFor(s.error_code(), s.error_message(), im.options.plaintext)));
    if (Fatal(s.error_code())) {
      spdlog::error("node {}: the scheduler refused the agent ({}); not retrying", im.node(), why);
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    }
    // ABORTED: a newer stream of this node id replaced ours, i.e. another agent claims the id.
    // Its backoff is not reset, so two such agents alternate at the slowest rate, not in a loop.
    if (delivered && s.error_code() != grpc::StatusCode::ABORTED) {
      backoff = im.options.initial_backoff;
    }
    if (s.error_code() == grpc::StatusCode::ABORTED) {
      spdlog::warn("node {}: stream replaced by a newer one of the same node id ({})", im.node(),
                   why);
    }
    const std::chrono::milliseconds delay = im.Jitter(backoff);
    spdlog::info("node {}: stream ended ({}); reconnecting in {} ms", im.node(), why,
                 delay.count());
    if (im.SleepUnlessStopped(delay)) break;
    backoff = std::min(backoff * 2, im.options.max_backoff);
  }
  spdlog::info("node {}: stopped", im.node());
  return absl::OkStatus();
}

void Agent::Stop() {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  im.stopping = true;
  if (im.stream_context != nullptr) im.stream_context->TryCancel();
  if (im.report_context != nullptr) im.report_context->TryCancel();
  im.cv.notify_all();
}

AgentStats Agent::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

}  // namespace ripplekv::agent
