// End to end through real processes on loopback: ripplekv-scheduler + 2 ripplekv-worker, a job
// submitted with `ripplekv submit --wait`, the profile fetched with `ripplekv profile get --json`,
// must equal local `ripplekv calibrate --json` bit for bit (DESIGN.md §2, canonical aggregation).
// Needs RIPPLEKV_SMOLLM2_GGUF; skipped without it. Every process is killed on every path.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A child process with stdout and stderr sent to files. The destructor SIGKILLs it if it still
// runs, so no path of a test leaves a process behind.
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
  ~Process() {
    if (pid_ > 0 && !exit_code_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // The exit code (-1 for a signal) once it ends within `timeout`; nullopt if it still runs.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    if (exit_code_ || pid_ <= 0) return exit_code_.value_or(-1);
    const auto deadline = Clock::now() + timeout;
    while (true) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        return exit_code_;
      }
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // SIGTERM, then SIGKILL if it has not exited within `grace`.
  void Stop(std::chrono::milliseconds grace) {
    if (pid_ <= 0 || exit_code_) return;
    ::kill(pid_, SIGTERM);
    if (!Wait(grace)) {
      ::kill(pid_, SIGKILL);
      Wait(std::chrono::milliseconds(5000));
    }
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

// A port nothing listens on now: bind port 0 and read the one the kernel chose.
int FreePort() {
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

struct Result {
  int exit_code = -1;  // -1: killed or timed out
  std::string out;
  std::string err;
};

// Runs `ripplekv args...` to completion, killing it after `timeout`.
Result RunCli(const fs::path& dir, const std::string& name, std::vector<std::string> args,
              std::chrono::milliseconds timeout) {
  args.insert(args.begin(), RIPPLEKV_CLI);
  const fs::path out = dir / (name + ".out"), err = dir / (name + ".err");
  Result r;
  {
    Process p(args, out, err);
    r.exit_code = p.Wait(timeout).value_or(-1);
  }
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "ripplekv_cluster_e2e_XXXXXX").string();
    path_ = ::mkdtemp(templ.data()) ? fs::path(templ) : fs::path();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

const std::vector<std::string> kParams = {
    "--samples", "2", "--context-len", "64", "--probe", "8",  "--layers", "0,7,29",
    "--trials",  "2", "--seed",        "3",  "--alpha", "0.5"};

TEST(ClusterE2eTest, TwoWorkerJobEqualsLocalCalibrateBitForBit) {
  const char* model = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
  if (model == nullptr || *model == '\0') {
    GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set (path of SmolLM2-135M-Instruct.Q4_1.gguf)";
  }
  const auto start = Clock::now();
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const fs::path& dir = tmp.path();
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const std::string addr = "127.0.0.1:" + std::to_string(port);

  Process scheduler({RIPPLEKV_SCHEDULER, "--listen", addr, "--db", (dir / "db").string()},
                    dir / "scheduler.out", dir / "scheduler.err");
  Process worker1(
      {RIPPLEKV_WORKER, "--scheduler", addr, "--model", model, "--threads", "1", "--id", "e2e-1"},
      dir / "worker1.out", dir / "worker1.err");
  Process worker2(
      {RIPPLEKV_WORKER, "--scheduler", addr, "--model", model, "--threads", "1", "--id", "e2e-2"},
      dir / "worker2.out", dir / "worker2.err");
  auto logs = [&] {
    std::string text;
    for (const char* name : {"scheduler", "worker1", "worker2"}) {
      text += std::string("\n--- ") + name + " ---\n" +
              ReadFile(dir / (std::string(name) + ".out")) +
              ReadFile(dir / (std::string(name) + ".err"));
    }
    return text;
  };

  // The scheduler answers once `ripplekv jobs` succeeds.
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    up = RunCli(dir, "jobs", {"jobs", "--scheduler", addr}, std::chrono::seconds(5)).exit_code == 0;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(up) << "scheduler did not answer on " << addr << logs();
  // A job needs a registered worker holding the model (the scheduler takes the layer count from
  // it); the workers log "registered with" once they are.
  auto registered = [&](const std::string& name) {
    return (ReadFile(dir / (name + ".out")) + ReadFile(dir / (name + ".err")))
               .find("registered with") != std::string::npos;
  };
  const auto register_deadline = Clock::now() + std::chrono::seconds(40);
  while (!(registered("worker1") && registered("worker2")) && Clock::now() < register_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(registered("worker1") && registered("worker2"))
      << "workers did not register" << logs();

  std::vector<std::string> submit = {"submit", "--scheduler", addr, "--model", model, "--wait"};
  submit.insert(submit.end(), kParams.begin(), kParams.end());
  const Result job = RunCli(dir, "submit", submit, std::chrono::seconds(60));
  ASSERT_EQ(job.exit_code, 0) << job.err << logs();
  EXPECT_NE(job.out.find("mean KL"), std::string::npos) << job.out;

  std::vector<std::string> calibrate = {"calibrate", "--model", model, "--json", "--threads", "1"};
  calibrate.insert(calibrate.end(), kParams.begin(), kParams.end());
  const Result local = RunCli(dir, "calibrate", calibrate, std::chrono::seconds(60));
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const nlohmann::json local_json = nlohmann::json::parse(local.out, nullptr, false);
  ASSERT_FALSE(local_json.is_discarded()) << local.out;
  const std::string hash = local_json["model"]["hash"].get<std::string>();

  const Result fetched = RunCli(
      dir, "profile", {"profile", "get", "--scheduler", addr, "--model-hash", hash, "--json"},
      std::chrono::seconds(20));
  ASSERT_EQ(fetched.exit_code, 0) << fetched.err << logs();
  const nlohmann::json remote_json = nlohmann::json::parse(fetched.out, nullptr, false);
  ASSERT_FALSE(remote_json.is_discarded()) << fetched.out;

  // Exact doubles: the profile JSON writes shortest round-trip numbers, so equal text is equal
  // bits; compare the values and their printed form.
  const auto& a = local_json["layers"];
  const auto& b = remote_json["layers"];
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), a.size()) << fetched.out;
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("layer entry " + std::to_string(i));
    EXPECT_EQ(b[i]["layer"], a[i]["layer"]);
    EXPECT_EQ(b[i]["mean_kl"].get<double>(), a[i]["mean_kl"].get<double>());
    EXPECT_EQ(b[i]["mean_kl"].dump(), a[i]["mean_kl"].dump());
    EXPECT_EQ(b[i]["per_sample_mean"], a[i]["per_sample_mean"]);
    EXPECT_EQ(b[i]["count"], a[i]["count"]);
    EXPECT_GT(a[i]["mean_kl"].get<double>(), 0.0);
  }
  // data_source and model.name are descriptive and differ between the paths (workers describe the
  // data and name the model differently); the method parameters must not.
  nlohmann::json remote_params = remote_json["params"], local_params = local_json["params"];
  remote_params.erase("data_source");
  local_params.erase("data_source");
  EXPECT_EQ(remote_params, local_params);
  EXPECT_EQ(remote_json["model"]["hash"], local_json["model"]["hash"]);

  worker1.Stop(std::chrono::seconds(10));
  worker2.Stop(std::chrono::seconds(10));
  scheduler.Stop(std::chrono::seconds(10));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(90));
}

}  // namespace
