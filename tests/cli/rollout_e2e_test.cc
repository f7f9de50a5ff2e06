// Budget rollouts end to end with real processes on loopback (docs/ROLLOUTS.md): a
// `ripplekv-scheduler`, `ripplekv-agent`s writing files, and the `ripplekv map` / `ripplekv
// rollout` commands. The scheduler's store is seeded with a synthetic profile of a made-up model
// before it starts (rollouts need a profile, not a model), so no test here needs the model.
//
//   * 50 agents in three formats: a 3-stage rollout reaches every node, and every file equals the
//     map's bytes in its node's format (`ripplekv map get --format`);
//   * an apply hook that fails in the canary stage pauses the rollout; rollback restores the
//     previous map on every node that had the new one;
//   * kill -9 the scheduler mid-rollout and restart it: the rollout resumes where it was, and the
//     nodes that ever wrote the new map (their agents' write logs) are exactly the ones the stage
//     selected, before and after the restart;
//   * an agent killed and restarted mid-stage states the version it holds without rewriting it; a
//     node that joins late gets the map its stage says;
//   * the Python client of docs/examples/rollout_node.py (generated stubs, no agent) is a node
//     like any other (skipped unless scripts/python-grpc installed grpcio).

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench/synthetic_profile.h"
#include "nlohmann/json.hpp"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string kModel = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
constexpr int kLayers = 8;
constexpr const char* kFormats[] = {"native", "kvpress", "trtllm"};

std::vector<Json> ReadJsonLines(const fs::path& path) {
  std::vector<Json> out;
  std::istringstream lines(ReadFile(path));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) out.push_back(Json::parse(line));
  }
  return out;
}

class RolloutE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    cluster_ = std::make_unique<LocalCluster>(tmp_.path());
    const ripplekv::Status seeded =
        bench::SeedSyntheticProfile(cluster_->db().string(), kModel, kLayers);
    ASSERT_TRUE(seeded.ok()) << seeded;
    StartScheduler();
  }

  void StartScheduler() {
    cluster_->StartScheduler();
    ASSERT_TRUE(cluster_->SchedulerAnswers(seconds(30))) << SchedulerLog();
  }

  std::string SchedulerLog() const {
    std::string log;
    for (int i = 0; i < 4; ++i) {
      log += ReadFile(tmp_.path() / ("scheduler-" + std::to_string(i) + ".err"));
    }
    return log;
  }

  CliResult Cli(const std::string& name, std::vector<std::string> args) {
    args.insert(args.begin() + 2, {"--scheduler", cluster_->address()});
    return RunCli(tmp_.path(), name, std::move(args), seconds(60));
  }

  // `ripplekv map create` with average budget `average`; returns the version id.
  std::string CreateMap(int average) {
    CliResult r = Cli("map-create", {"map", "create", "--model-hash", kModel, "--avg-budget",
                                     std::to_string(average), "--context-len", "4096",
                                     "--selection", "snapkv", "--selection-param", "window=32"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string version = r.out;
    while (!version.empty() && (version.back() == '\n' || version.back() == ' ')) {
      version.pop_back();
    }
    EXPECT_EQ(version.size(), 16u) << r.out;
    return version;
  }

  // The bytes `ripplekv map get` prints for `version` in `format`.
  std::string Render(const std::string& version, const std::string& format) {
    auto [it, fresh] = rendered_.try_emplace(version + "/" + format);
    if (fresh) {
      CliResult r =
          Cli("map-get", {"map", "get", "--model-hash", kModel, version, "--format", format});
      EXPECT_EQ(r.exit_code, 0) << r.err;
      it->second = r.out;
    }
    return it->second;
  }

  struct Agent {
    std::string node;
    std::string format;
    fs::path dir;
    std::unique_ptr<Process> process;
    int starts = 0;
    fs::path file() const { return dir / "budgets.json"; }
    fs::path writes() const { return dir / "writes.jsonl"; }
  };

  // Starts (or restarts) the agent of `node`.
  Agent& StartAgent(const std::string& node, const std::string& format,
                    const std::string& apply_cmd = "") {
    Agent& a = agents_[node];
    a.node = node;
    a.format = format;
    a.dir = tmp_.path() / "nodes" / node;
    fs::create_directories(a.dir);
    std::vector<std::string> argv = {RIPPLEKV_AGENT,
                                     "--scheduler",
                                     cluster_->address(),
                                     "--node-id",
                                     node,
                                     "--model-hash",
                                     kModel,
                                     "--out",
                                     a.file().string(),
                                     "--format",
                                     format,
                                     "--write-log",
                                     a.writes().string()};
    if (!apply_cmd.empty()) argv.insert(argv.end(), {"--apply-cmd", apply_cmd});
    const std::string log = (a.dir / ("agent-" + std::to_string(a.starts++))).string();
    a.process = std::make_unique<Process>(argv, log + ".out", log + ".err");
    return a;
  }

  void StartAgents(int count, const std::string& apply_cmd = "") {
    for (int i = 0; i < count; ++i) {
      StartAgent(Node(i), kFormats[i % 3], apply_cmd);
    }
  }
  static std::string Node(int i) { return "node-" + std::to_string(100 + i); }

  // `ripplekv rollout status --json` (with nodes); null when it fails.
  Json Status(const std::string& id) {
    CliResult r = Cli("status", {"rollout", "status", id, "--nodes", "--json"});
    if (r.exit_code != 0) return Json();
    return Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  }
  static std::string State(const Json& rollout) { return rollout.value("state", std::string()); }
  static int Stage(const Json& rollout) { return rollout.value("stage", 0); }

  // Waits until the rollout's state is `state`; returns the last status.
  Json AwaitState(const std::string& id, const std::string& state, seconds timeout = seconds(120)) {
    Json last;
    const bool reached = WaitFor(
        [&] {
          last = Status(id);
          return State(last) == state;
        },
        timeout, milliseconds(200));
    EXPECT_TRUE(reached) << id << " never reached " << state << "; last: " << last.dump() << "\n"
                         << SchedulerLog();
    return last;
  }

  // Every node has connected (the scheduler counts them).
  void AwaitConnected(const std::string& id, int nodes) {
    const bool all = WaitFor([&] { return Status(id).value("connected_nodes", 0) == nodes; },
                             seconds(60), milliseconds(200));
    EXPECT_TRUE(all) << Status(id).dump();
  }

  std::string Start(const std::string& map, const std::string& stages,
                    const std::string& soak = "0s") {
    CliResult r = Cli("start", {"rollout", "start", "--model-hash", kModel, "--map", map,
                                "--stages", stages, "--soak", soak});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string id = r.out;
    while (!id.empty() && id.back() == '\n') id.pop_back();
    return id;
  }

  // node id -> its entry of the rollout's per-node states.
  static std::map<std::string, Json> Nodes(const Json& rollout) {
    std::map<std::string, Json> out;
    for (const Json& node : rollout.value("nodes", Json::array())) {
      out[node.value("node_id", std::string())] = node;
    }
    return out;
  }

  // Nodes whose agents ever wrote `version` (their write logs).
  std::set<std::string> EverWrote(const std::string& version) const {
    std::set<std::string> out;
    for (const auto& [node, agent] : agents_) {
      for (const Json& line : ReadJsonLines(agent.writes())) {
        if (line.value("version", std::string()) == version) out.insert(node);
      }
    }
    return out;
  }

  // Waits until every agent's file holds `version` in its format.
  void AwaitFiles(const std::string& version) {
    for (auto& [node, agent] : agents_) {
      const std::string expected = Render(version, agent.format);
      const bool same = WaitFor([&] { return ReadFile(agent.file()) == expected; }, seconds(60));
      EXPECT_TRUE(same) << node << " (" << agent.format << ") holds:\n"
                        << ReadFile(agent.file()).substr(0, 400) << "\nexpected:\n"
                        << expected.substr(0, 400);
    }
  }

  TempDir tmp_;
  std::unique_ptr<LocalCluster> cluster_;
  std::map<std::string, Agent> agents_;
  std::map<std::string, std::string> rendered_;
};

TEST_F(RolloutE2ETest, FiftyAgentsReceiveTheMapInThreeStagesInTheirFormats) {
  const std::string map = CreateMap(256);
  // Freezing the same inputs again gives the same version.
  EXPECT_EQ(CreateMap(256), map);
  StartAgents(50);
  const std::string id = Start(map, "1,10%,100%");
  ASSERT_EQ(id, "r1");
  AwaitConnected(id, 50);
  const Json done = AwaitState(id, "ROLLOUT_STATE_SUCCEEDED");
  EXPECT_EQ(Stage(done), 2);
  EXPECT_EQ(done.value("acknowledged", 0), 50);
  const std::map<std::string, Json> nodes = Nodes(done);
  ASSERT_EQ(nodes.size(), 50u);
  for (const auto& [node, state] : nodes) {
    EXPECT_EQ(state.value("held_version", std::string()), map) << node;
    EXPECT_EQ(state.value("state", std::string()), "NODE_MAP_STATE_APPLIED") << node;
  }
  AwaitFiles(map);
  // Each node wrote the map once.
  for (const auto& [node, agent] : agents_) {
    EXPECT_EQ(ReadJsonLines(agent.writes()).size(), 1u) << node;
  }
}

TEST_F(RolloutE2ETest, AFailingHookPausesTheCanaryStageAndRollbackRestoresThePreviousMap) {
  const std::string good = CreateMap(128);
  const std::string bad = CreateMap(160);
  // The hook refuses the bad map on every node, with a last stderr line the report carries.
  StartAgents(8, "if [ \"$RIPPLEKV_MAP_VERSION\" = " + bad +
                     " ]; then echo noise >&2; echo \"engine refused $RIPPLEKV_MAP_VERSION\" >&2; "
                     "exit 3; fi");
  const std::string first = Start(good, "100%");
  AwaitConnected(first, 8);
  AwaitState(first, "ROLLOUT_STATE_SUCCEEDED");
  AwaitFiles(good);

  const std::string second = Start(bad, "1,100%");
  const Json paused = AwaitState(second, "ROLLOUT_STATE_PAUSED");
  const std::string reason = paused.value("pause_reason", std::string());
  EXPECT_NE(reason.find("exited 3"), std::string::npos) << reason;
  EXPECT_NE(reason.find("engine refused " + bad), std::string::npos) << reason;
  // Only the canary was given the bad map.
  const std::set<std::string> tried = EverWrote(bad);
  ASSERT_EQ(tried.size(), 1u);
  EXPECT_EQ(Nodes(paused).at(*tried.begin()).value("state", std::string()),
            "NODE_MAP_STATE_FAILED");

  CliResult rollback = Cli("rollback", {"rollout", "rollback", second});
  ASSERT_EQ(rollback.exit_code, 0) << rollback.err;
  EXPECT_EQ(State(Status(second)), "ROLLOUT_STATE_ROLLED_BACK");
  AwaitFiles(good);  // the canary's file is the good map again, byte for byte
  const std::string canary = *tried.begin();
  const bool restored = WaitFor(
      [&] { return Nodes(Status(second)).at(canary).value("held_version", std::string()) == good; },
      seconds(30));
  EXPECT_TRUE(restored) << Status(second).dump();
  EXPECT_EQ(EverWrote(bad), tried);
}

TEST_F(RolloutE2ETest, ASchedulerKilledMidRolloutResumesItWhereItWas) {
  const std::string map = CreateMap(200);
  StartAgents(12);
  // A long soak holds the rollout in its second stage (25% of 12 = 3 nodes) while it is killed.
  const std::string id = Start(map, "1,25%,100%", "8s");
  AwaitConnected(id, 12);
  Json before;
  ASSERT_TRUE(WaitFor(
      [&] {
        before = Status(id);
        return Stage(before) == 1 && before.value("acknowledged", 0) == 3;
      },
      seconds(60), milliseconds(100)))
      << Status(id).dump();
  std::set<std::string> members;
  for (const auto& [node, state] : Nodes(before)) {
    if (state.value("in_rollout", false)) members.insert(node);
  }
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(EverWrote(map), members);

  cluster_->scheduler().Kill();
  StartScheduler();
  // Read the restarted scheduler's first answer: the soak starts again once the stage's nodes
  // reconnect and report, so waiting for all 12 first could outlast it on a loaded machine.
  Json after;
  ASSERT_TRUE(
      WaitFor([&] { return !(after = Status(id)).is_null(); }, seconds(60), milliseconds(100)))
      << SchedulerLog();
  EXPECT_EQ(State(after), "ROLLOUT_STATE_RUNNING");
  EXPECT_EQ(Stage(after), 1);  // the soak restarted with the process
  std::set<std::string> members_after;
  for (const auto& [node, state] : Nodes(after)) {
    if (state.value("in_rollout", false)) members_after.insert(node);
  }
  EXPECT_EQ(members_after, members);
  EXPECT_EQ(EverWrote(map), members);  // nobody outside the stage got it across the restart

  AwaitConnected(id, 12);
  AwaitState(id, "ROLLOUT_STATE_SUCCEEDED");
  AwaitFiles(map);
  // Every node wrote the map exactly once: the stage's nodes were not rewritten after the restart.
  for (const auto& [node, agent] : agents_) {
    EXPECT_EQ(ReadJsonLines(agent.writes()).size(), 1u) << node;
  }
}

TEST_F(RolloutE2ETest, RestartedAgentsStateWhatTheyHoldAndLateNodesGetTheirStagesMap) {
  const std::string map = CreateMap(144);
  StartAgents(6);
  const std::string id = Start(map, "50%,100%", "30s");
  AwaitConnected(id, 6);
  Json stage;
  ASSERT_TRUE(WaitFor(
      [&] {
        stage = Status(id);
        return stage.value("acknowledged", 0) == 3;
      },
      seconds(60), milliseconds(100)))
      << Status(id).dump();
  std::string member;
  for (const auto& [node, state] : Nodes(stage)) {
    if (state.value("in_rollout", false)) member = node;
  }
  ASSERT_FALSE(member.empty());

  // kill -9 a node of the stage and start it again: it reports the version it holds and does not
  // write it again.
  Agent& restarted = agents_.at(member);
  restarted.process->Kill();
  const bool gone = WaitFor([&] { return Status(id).value("connected_nodes", 0) == 5; },
                            seconds(30), milliseconds(100));
  EXPECT_TRUE(gone);
  StartAgent(member, restarted.format);
  AwaitConnected(id, 6);
  const Json back = Nodes(Status(id)).at(member);
  EXPECT_TRUE(back.value("connected", false));
  EXPECT_EQ(back.value("held_version", std::string()), map);
  EXPECT_EQ(back.value("state", std::string()), "NODE_MAP_STATE_APPLIED");
  EXPECT_EQ(ReadJsonLines(restarted.writes()).size(), 1u);
  EXPECT_EQ(ReadFile(restarted.file()), Render(map, restarted.format));

  // Two late nodes: the stage grows to 50% of 8 = 4 nodes, so exactly one of the five nodes
  // outside it joins (the first by rank); each late node holds what its record says.
  StartAgent("late-1", "native");
  StartAgent("late-2", "trtllm");
  AwaitConnected(id, 8);
  Json grown;
  ASSERT_TRUE(WaitFor(
      [&] {
        grown = Status(id);
        return grown.value("stage_nodes", 0) == 4 && grown.value("acknowledged", 0) == 4;
      },
      seconds(60), milliseconds(100)))
      << Status(id).dump();
  const std::map<std::string, Json> nodes = Nodes(grown);
  for (const std::string& late : {std::string("late-1"), std::string("late-2")}) {
    const std::string assigned = nodes.at(late).value("assigned_version", std::string());
    const Agent& agent = agents_.at(late);
    if (assigned == map) {
      EXPECT_TRUE(
          WaitFor([&] { return ReadFile(agent.file()) == Render(map, agent.format); }, seconds(30)))
          << late;
    } else {
      EXPECT_EQ(assigned, "") << late;
      EXPECT_FALSE(fs::exists(agent.file())) << late;
      EXPECT_TRUE(ReadJsonLines(agent.writes()).empty()) << late;
    }
  }
  EXPECT_EQ(EverWrote(map).size(), 4u);
}

// `map create --selection snapkv --window 64`: every layer keeps at least the window, and the
// frozen version records it; a map whose layers would pass --context-len is capped there.
TEST_F(RolloutE2ETest, MapCreateKeepsTheSelectorsFloorAndCapsAtTheContext) {
  CliResult floor =
      Cli("floor", {"map", "create", "--model-hash", kModel, "--avg-budget", "80", "--ratio", "4",
                    "--selection", "snapkv", "--window", "64", "--json"});
  ASSERT_EQ(floor.exit_code, 0) << floor.err;
  EXPECT_NE(floor.err.find("--min-budget is 64 (was 1)"), std::string::npos) << floor.err;
  const Json created = Json::parse(floor.out)["map"];
  int64_t total = 0;
  for (const Json& tokens : created["tokens"]) {
    EXPECT_GE(std::stoll(tokens.get<std::string>()), 64) << created.dump();
    total += std::stoll(tokens.get<std::string>());
  }
  EXPECT_EQ(total, 8 * 80);
  EXPECT_EQ(created["selection"]["method"], "snapkv");
  EXPECT_EQ(created["selection"]["params"]["window"], "64");
  // At ratio 4 and no floor, the least sensitive layer keeps fewer than 64.
  CliResult plain = Cli("plain", {"map", "create", "--model-hash", kModel, "--avg-budget", "80",
                                  "--ratio", "4", "--json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  int64_t fewest = INT64_MAX;
  const Json plain_map = Json::parse(plain.out)["map"];
  for (const Json& tokens : plain_map["tokens"]) {
    fewest = std::min<int64_t>(fewest, std::stoll(tokens.get<std::string>()));
  }
  EXPECT_LT(fewest, 64);

  // Ratio 8 gives the most sensitive layer about 227 tokens: more than a 120-token context.
  CliResult capped = Cli("capped", {"map", "create", "--model-hash", kModel, "--avg-budget", "100",
                                    "--ratio", "8", "--context-len", "120", "--json"});
  ASSERT_EQ(capped.exit_code, 0) << capped.err;
  EXPECT_NE(capped.err.find("capped there"), std::string::npos) << capped.err;
  total = 0;
  const Json capped_map = Json::parse(capped.out)["map"];
  for (const Json& tokens : capped_map["tokens"]) {
    EXPECT_LE(std::stoll(tokens.get<std::string>()), 120);
    total += std::stoll(tokens.get<std::string>());
  }
  EXPECT_EQ(total, 800);
  CliResult too_much = Cli("too-much", {"map", "create", "--model-hash", kModel, "--avg-budget",
                                        "200", "--context-len", "120"});
  EXPECT_EQ(too_much.exit_code, 2);
  EXPECT_NE(too_much.err.find("--avg-budget: 1600 tokens do not fit 8 layers of at most "
                              "--context-len 120 tokens each"),
            std::string::npos)
      << too_much.err;
}

TEST_F(RolloutE2ETest, APythonClientWithTheGeneratedStubsIsANodeLikeAnyOther) {
  const char* python_path = std::getenv("RIPPLEKV_PYTHON_GRPC");
  if (python_path == nullptr || *python_path == '\0') {
    GTEST_SKIP() << "RIPPLEKV_PYTHON_GRPC is not set (scripts/python-grpc installs grpcio; "
                    "scripts/test sets it)";
  }
  const std::string source = RIPPLEKV_SOURCE_DIR;
  const fs::path stubs = tmp_.path() / "stubs";
  fs::create_directories(stubs);
  const std::string env = "PYTHONPATH='" + stubs.string() + ":" + python_path + "' ";
  const std::string generate =
      env + "python3 -m grpc_tools.protoc -I '" + source + "/proto' " + "--python_out='" +
      stubs.string() + "' --grpc_python_out='" + stubs.string() + "' '" + source +
      "/proto/ripplekv/v1/calibration.proto' '" + source + "/proto/ripplekv/v1/rollout.proto' > '" +
      (tmp_.path() / "protoc.log").string() + "' 2>&1";
  ASSERT_EQ(std::system(generate.c_str()), 0) << ReadFile(tmp_.path() / "protoc.log");

  const std::string map = CreateMap(96);
  StartAgents(2);
  const fs::path out = tmp_.path() / "python-node.json";
  Process python({"/bin/sh", "-c",
                  env + "exec python3 '" + source + "/docs/examples/rollout_node.py' --scheduler " +
                      cluster_->address() + " --node-id py-node --model-hash " + kModel +
                      " --out '" + out.string() + "'"},
                 tmp_.path() / "python.out", tmp_.path() / "python.err");
  const std::string id = Start(map, "1,100%");
  AwaitConnected(id, 3);
  const Json done = AwaitState(id, "ROLLOUT_STATE_SUCCEEDED");
  EXPECT_EQ(Nodes(done).at("py-node").value("held_version", std::string()), map);
  EXPECT_FALSE(python.Wait(milliseconds(0))) << ReadFile(tmp_.path() / "python.err");
  // It wrote TensorRT-LLM's list: the same tokens as the agent's trtllm rendering.
  EXPECT_EQ(Json::parse(ReadFile(out)), Json::parse(Render(map, "trtllm")));
}

}  // namespace
}  // namespace ripplekv::testing
