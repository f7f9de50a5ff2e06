#pragma once
// Helpers for tests that run RippleKV's real binaries on loopback: child processes with their
// output in files (SIGKILLed by the destructor on every test path), a free port, a temporary
// directory, and `ripplekv` CLI runs. The binaries' paths come from compile definitions
// (RIPPLEKV_CLI, RIPPLEKV_SCHEDULER, RIPPLEKV_WORKER) set in tests/cli/CMakeLists.txt.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace ripplekv::testing {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

// A child process with stdout and stderr sent to files.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const fs::path& out, const fs::path& err) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (o < 0 || e < 0) ::_exit(127);
      ::dup2(o, 1);
      ::dup2(e, 2);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process() { Kill(); }

  // The exit code (-1 for a signal) once it ends within `timeout`; nullopt if it still runs.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    if (exit_code_ || pid_ <= 0) return exit_code_.value_or(-1);
    const auto deadline = SteadyClock::now() + timeout;
    while (true) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        return exit_code_;
      }
      if (SteadyClock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // SIGKILL (kill -9) and reap: the process gets no chance to clean up.
  void Kill() {
    if (pid_ <= 0 || exit_code_) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exit_code_ = -1;
  }

  // SIGTERM, then SIGKILL if it has not exited within `grace`.
  void Stop(std::chrono::milliseconds grace) {
    if (pid_ <= 0 || exit_code_) return;
    ::kill(pid_, SIGTERM);
    if (!Wait(grace)) Kill();
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

inline std::string ReadFile(const fs::path& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

// A port nothing listens on now: bind port 0 and read the one the kernel chose.
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "ripplekv_process_test_XXXXXX").string();
    path_ = ::mkdtemp(templ.data()) ? fs::path(templ) : fs::path();
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

struct CliResult {
  int exit_code = -1;  // -1: killed or timed out
  std::string out;
  std::string err;
};

// Runs `ripplekv args...` to completion in `dir` (output files NAME.out / NAME.err), killing it
// after `timeout`.
inline CliResult RunCli(const fs::path& dir, const std::string& name, std::vector<std::string> args,
                        std::chrono::milliseconds timeout) {
  args.insert(args.begin(), RIPPLEKV_CLI);
  const fs::path out = dir / (name + ".out"), err = dir / (name + ".err");
  CliResult r;
  {
    Process p(args, out, err);
    r.exit_code = p.Wait(timeout).value_or(-1);
  }
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

// Polls `done` every `period` until it holds or `timeout` passes; returns its last value.
inline bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                    std::chrono::milliseconds period = std::chrono::milliseconds(50)) {
  const auto deadline = SteadyClock::now() + timeout;
  while (!done()) {
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(period);
  }
  return true;
}

// The path of the default model for tests, or empty (tests then GTEST_SKIP).
inline std::string TestModelPath() {
  const char* model = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
  return model == nullptr ? std::string() : std::string(model);
}

// A scheduler and its workers on 127.0.0.1, logs in one directory. Workers are named by the
// caller; each logs "registered with" once it may receive tasks.
class LocalCluster {
 public:
  explicit LocalCluster(const fs::path& dir) : dir_(dir), port_(FreePort()) {}

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const fs::path& dir() const { return dir_; }
  fs::path db() const { return dir_ / "db"; }

  // Starts (or restarts, after Kill) the scheduler on the same port and database (`db` when
  // given, e.g. a checkpoint), plaintext on loopback without tokens (--insecure), with `extra`
  // flags after these. A task selected for verification waits 1 s (not the default minute) for a
  // second worker before it completes unverified, so one-worker tests do not idle; a later
  // --verify-wait-ms in `extra` wins. The log of start k is scheduler-k.{out,err}.
  void StartScheduler(const fs::path& db = {}, const std::vector<std::string>& extra = {}) {
    const std::string name = "scheduler-" + std::to_string(scheduler_starts_++);
    std::vector<std::string> argv = {RIPPLEKV_SCHEDULER, "--listen",       address(),
                                     "--db",             (db.empty() ? this->db() : db).string(),
                                     "--insecure",       "--verify-wait-ms", "1000"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    scheduler_ =
        std::make_unique<Process>(argv, dir_ / (name + ".out"), dir_ / (name + ".err"));
  }
  Process& scheduler() { return *scheduler_; }

  // True once `ripplekv jobs` answers.
  bool SchedulerAnswers(std::chrono::milliseconds timeout) {
    return WaitFor(
        [&] {
          return RunCli(dir_, "probe", {"jobs", "--scheduler", address()}, std::chrono::seconds(5))
                     .exit_code == 0;
        },
        timeout, std::chrono::milliseconds(100));
  }

  // `launcher` (e.g. {mpirun, -np, 2}) runs the worker when given; `extra` flags follow.
  Process& StartWorker(const std::string& id, const std::string& model,
                       const std::vector<std::string>& launcher = {},
                       const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = launcher;
    for (const std::string& a : {std::string(RIPPLEKV_WORKER), std::string("--scheduler"),
                                 address(), std::string("--model"), model, std::string("--threads"),
                                 std::string("1"), std::string("--id"), id}) {
      argv.push_back(a);
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    workers_.emplace_back(
        id, std::make_unique<Process>(argv, dir_ / (id + ".out"), dir_ / (id + ".err")));
    return *workers_.back().second;
  }

  // A worker started with --scheduler, --model and --threads 1, then `flags`, which give its
  // identity or none (then it registers under its default id, HOST-DEVICE-N from the slot locks
  // in --state-dir). Its log is NAME.{out,err}; worker(NAME), WorkerLog(NAME) and
  // Registered(NAME) find it, and Logs() includes it when NAME contains "worker".
  Process& StartWorkerNamed(const std::string& name, const std::string& model,
                            const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {RIPPLEKV_WORKER, "--scheduler", address(), "--model",
                                     model,           "--threads",   "1"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    workers_.emplace_back(
        name, std::make_unique<Process>(argv, dir_ / (name + ".out"), dir_ / (name + ".err")));
    return *workers_.back().second;
  }

  Process& worker(const std::string& id) {
    for (auto& [name, w] : workers_) {
      if (name == id) return *w;
    }
    std::abort();  // a test bug: no such worker
  }

  std::string WorkerLog(const std::string& id) const {
    return ReadFile(dir_ / (id + ".out")) + ReadFile(dir_ / (id + ".err"));
  }

  bool Registered(const std::string& id, std::chrono::milliseconds timeout) const {
    return WaitFor([&] { return WorkerLog(id).find("registered with") != std::string::npos; },
                   timeout, std::chrono::milliseconds(100));
  }

  // Every process's log, for failure messages.
  std::string Logs() const {
    std::string text;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with("scheduler-") || name.find("worker") != std::string::npos) {
        text += "\n--- " + name + " ---\n" + ReadFile(entry.path());
      }
    }
    return text;
  }

  void StopAll() {
    for (auto& [id, w] : workers_) w->Stop(std::chrono::seconds(10));
    if (scheduler_) scheduler_->Stop(std::chrono::seconds(10));
  }

 private:
  fs::path dir_;
  int port_;
  int scheduler_starts_ = 0;
  std::unique_ptr<Process> scheduler_;
  std::vector<std::pair<std::string, std::unique_ptr<Process>>> workers_;
};

}  // namespace ripplekv::testing
