// Time from `rollout start` to every node acknowledged, for many serving nodes
// (docs/PERFORMANCE.md, "Budget rollouts"). A real `ripplekv-scheduler` process on loopback with
// its store on disk (synced writes); N simulated serving nodes in this process, each a real
// agent::Agent on a thread of its own writing its file (under --agent-dir, by default in /dev/shm
// so that the nodes' own fsyncs, which real nodes do on their own disks, do not serialize here).
// Per N: a warm-up rollout of map A to 100% (every node connected and holding A), then the measured
// rollout of map B with stages 1, 10%, 50%, 100% and zero soak, polled with GetRollout every 5 ms;
// the scheduler's CPU time and memory come from /proc.
//
//   rollout_bench [--nodes 50,200,1000] [--runs 3] [--agents-per-channel 100]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "agent/agent.h"
#include "bench/synthetic_profile.h"
#include "proto/client_channel.h"
#include "ripplekv/v1/rollout.grpc.pb.h"
#include "spdlog/spdlog.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = ripplekv::v1;
using ripplekv::Status;
using Clock = std::chrono::steady_clock;

const std::string kModel = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
constexpr int kLayers = 32;

void Die(const std::string& what) {
  std::fprintf(stderr, "rollout_bench: %s\n", what.c_str());
  std::exit(1);
}

// /proc/PID/stat utime + stime, seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), {});
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
    if (i == 15) break;
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A line of /proc/PID/status ("VmRSS", "VmHWM"), MiB.
double StatusMiB(pid_t pid, const std::string& key) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);) {
    if (line.starts_with(key + ":")) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  }
  return 0;
}

// A port nothing listens on now: bind port 0 and read the one the kernel chose.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  if (port == 0) Die("no free port");
  return port;
}

struct Scheduler {
  pid_t pid = -1;
  std::string address;
};

Scheduler StartScheduler(const std::string& binary, const fs::path& db, const fs::path& log) {
  Scheduler s;
  s.address = "127.0.0.1:" + std::to_string(FreePort());
  std::fflush(stdout);  // the child must not print what this process buffered
  s.pid = fork();
  if (s.pid == 0) {
    std::freopen(log.c_str(), "w", stderr);
    std::freopen("/dev/null", "w", stdout);
    execl(binary.c_str(), binary.c_str(), "--listen", s.address.c_str(), "--db", db.c_str(),
          "--insecure", static_cast<char*>(nullptr));
    _exit(127);
  }
  return s;
}

void StopScheduler(const Scheduler& s) {
  kill(s.pid, SIGTERM);
  int status = 0;
  waitpid(s.pid, &status, 0);
}

void Must(const grpc::Status& status, const std::string& what) {
  if (!status.ok()) Die(what + ": " + status.error_message());
}

std::string CreateMap(v1::RolloutService::Stub& stub, int64_t average) {
  v1::CreateBudgetMapRequest request;
  request.set_model_hash(kModel);
  request.mutable_params()->set_average_tokens(average);
  request.mutable_params()->set_context_len(8192);
  request.mutable_selection()->set_method("snapkv");
  v1::CreateBudgetMapResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  Must(stub.CreateBudgetMap(&context, request, &response), "CreateBudgetMap");
  return response.map().version();
}

v1::Rollout GetRollout(v1::RolloutService::Stub& stub, const std::string& id) {
  v1::GetRolloutRequest request;
  request.set_rollout_id(id);
  v1::Rollout rollout;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  Must(stub.GetRollout(&context, request, &rollout), "GetRollout");
  return rollout;
}

// Starts a rollout and waits until it succeeded with `nodes` acknowledged; seconds taken.
double RollOut(v1::RolloutService::Stub& stub, const std::string& map,
               const std::vector<std::string>& stages, int nodes) {
  v1::CreateRolloutRequest request;
  request.set_model_hash(kModel);
  request.set_map_version(map);
  for (const std::string& s : stages) {
    if (s.ends_with('%')) {
      request.add_stages()->set_percent(std::stod(s));
    } else {
      request.add_stages()->set_nodes(std::stoi(s));
    }
  }
  const auto start = Clock::now();
  v1::Rollout rollout;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  Must(stub.CreateRollout(&context, request, &rollout), "CreateRollout");
  while (true) {
    const v1::Rollout now = GetRollout(stub, rollout.rollout_id());
    // Every node holds the map: the stage's acknowledgements, and (warm-up) nodes that connected
    // after the rollout succeeded, which get the map without being counted in its stages.
    const bool all_hold =
        now.state() == v1::ROLLOUT_STATE_SUCCEEDED &&
        (now.acknowledged() == nodes ||
         (now.connected_nodes() == nodes &&
          std::count_if(now.nodes().begin(), now.nodes().end(), [&](const v1::RolloutNode& n) {
            return n.held_version() == map;
          }) == nodes));
    if (all_hold) break;
    if (now.state() == v1::ROLLOUT_STATE_PAUSED) Die("rollout paused: " + now.pause_reason());
    if (Clock::now() - start > std::chrono::minutes(5)) Die("rollout did not finish in 5 minutes");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Result {
  double seconds = 0;
  double cpu_seconds = 0;
  double rss_mib = 0;
  double hwm_mib = 0;
};

Result RunOnce(const std::string& binary, int nodes, int per_channel, const fs::path& work,
               const fs::path& agent_dir) {
  fs::remove_all(work);
  fs::remove_all(agent_dir);
  fs::create_directories(work);
  fs::create_directories(agent_dir);
  if (Status seeded =
          ripplekv::bench::SeedSyntheticProfile((work / "db").string(), kModel, kLayers);
      !seeded.ok()) {
    Die("cannot seed the profile: " + seeded.ToString());
  }
  const Scheduler scheduler = StartScheduler(binary, work / "db", work / "scheduler.log");
  v1::ClientChannelOptions channel_options;
  channel_options.keepalive_without_calls = true;
  auto control = v1::MakeClientChannel(scheduler.address, channel_options);
  if (!control->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(30))) {
    Die("the scheduler did not start (see " + (work / "scheduler.log").string() + ")");
  }
  auto stub = v1::RolloutService::NewStub(control);
  const std::string map_a = CreateMap(*stub, 256);
  const std::string map_b = CreateMap(*stub, 384);

  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<ripplekv::agent::Agent>> agents;
  std::vector<std::thread> threads;
  constexpr ripplekv::method::BudgetFormat kFormats[] = {ripplekv::method::BudgetFormat::kNative,
                                                         ripplekv::method::BudgetFormat::kKvpress,
                                                         ripplekv::method::BudgetFormat::kTrtllm};
  for (int i = 0; i < nodes; ++i) {
    if (i % per_channel == 0) {
      // A subchannel pool of its own: a connection of its own (gRPC would otherwise share one
      // connection between channels, and the server takes 256 streams per connection).
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
      args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
      channels.push_back(
          grpc::CreateCustomChannel(scheduler.address, grpc::InsecureChannelCredentials(), args));
    }
    ripplekv::agent::AgentOptions options;
    options.node_id = "node-" + std::to_string(i);
    options.model_hash = kModel;
    options.map_path = (agent_dir / (options.node_id + ".json")).string();
    options.format = kFormats[i % 3];
    auto agent = ripplekv::agent::Agent::Create(options, channels.back());
    if (!agent.ok()) Die(agent.status().ToString());
    agents.push_back(*std::move(agent));
  }
  for (auto& agent : agents) {
    threads.emplace_back([&agent] { (void)agent->Run(); });
  }
  // Warm-up: every node connected and holding A (some may connect after it succeeded).
  RollOut(*stub, map_a, {"100%"}, nodes);
  const double cpu_before = CpuSeconds(scheduler.pid);
  Result result;
  result.seconds = RollOut(*stub, map_b, {"1", "10%", "50%", "100%"}, nodes);
  result.cpu_seconds = CpuSeconds(scheduler.pid) - cpu_before;
  result.rss_mib = StatusMiB(scheduler.pid, "VmRSS");
  result.hwm_mib = StatusMiB(scheduler.pid, "VmHWM");
  for (auto& agent : agents) agent->Stop();
  for (auto& thread : threads) thread.join();
  StopScheduler(scheduler);
  fs::remove_all(agent_dir);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time from rollout start to 100% acknowledged, per number of serving nodes"};
  std::vector<int> node_counts = {50, 200, 1000};
  int runs = 3;
  int per_channel = 100;
  std::string binary = RIPPLEKV_SCHEDULER_BIN;
  std::string work = (fs::temp_directory_path() / "ripplekv_rollout_bench").string();
  std::string agent_dir =
      (fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path()) /
      "ripplekv_rollout_bench_nodes";
  app.add_option("--nodes", node_counts, "Numbers of serving nodes")->delimiter(',');
  app.add_option("--runs", runs, "Runs per number of nodes")->check(CLI::Range(1, 100));
  app.add_option("--agents-per-channel", per_channel, "Agents sharing one connection")
      ->check(CLI::Range(1, 200));
  app.add_option("--scheduler-binary", binary, "ripplekv-scheduler to run");
  app.add_option("--work-dir", work, "Scheduler database and log (removed and recreated)");
  app.add_option("--agent-dir", agent_dir, "The simulated nodes' files (removed and recreated)");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);

  std::printf(
      "| nodes | run | start -> 100%% acknowledged, s | scheduler CPU, s | RSS, MiB | "
      "peak RSS, MiB |\n|---|---|---|---|---|---|\n");
  for (int nodes : node_counts) {
    for (int run = 0; run < runs; ++run) {
      const Result r = RunOnce(binary, nodes, per_channel, work, agent_dir);
      std::printf("| %d | %d | %.3f | %.3f | %.1f | %.1f |\n", nodes, run + 1, r.seconds,
                  r.cpu_seconds, r.rss_mib, r.hwm_mib);
      std::fflush(stdout);
    }
  }
  return 0;
}
