// Runs the real `ripplekv` binary: exit codes, one-line errors, stdout/stderr separation, and
// (when the default model is available) the commands on SmolLM2.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace {

struct CliResult {
  int exit_code;
  std::string out;  // stdout
  std::string err;  // stderr
};

CliResult RunCli(const std::string& args) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string err_path = (dir / ("ripplekv_cli_err_" + std::to_string(::getpid()))).string();
  const std::string cmd = std::string(RIPPLEKV_CLI) + " " + args + " 2>" + err_path;
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  std::ifstream e(err_path);
  std::string err((std::istreambuf_iterator<char>(e)), {});
  std::filesystem::remove(err_path);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, err};
}

const char* ModelPath() { return std::getenv("RIPPLEKV_SMOLLM2_GGUF"); }

TEST(CliTest, UnknownSubcommandIsUsageError) {
  const CliResult r = RunCli("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
}

TEST(CliTest, MissingModelFileIsOneLineErrorWithExitCode2) {
  const CliResult r = RunCli("info /nonexistent/model.gguf");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("ripplekv: error: model not found: /nonexistent/model.gguf"),
            std::string::npos)
      << r.err;
}

TEST(CliTest, TruncatedGgufNamesTheFileAndOffset) {
  const auto path = std::filesystem::temp_directory_path() / "ripplekv_cli_truncated.gguf";
  {
    std::ofstream f(path, std::ios::binary);
    f.write("GGUF\x03\x00\x00\x00\x05", 9);  // header cut inside tensor_count
  }
  const CliResult r = RunCli("info " + path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(r.exit_code, 1) << "a truncated file is data loss (exit 1), not a usage error";
  EXPECT_NE(r.err.find(path.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tensor_count at byte 8"), std::string::npos) << r.err;
}

TEST(CliTest, HashEqualsSha256sumOfTheFile) {
  const auto path = std::filesystem::temp_directory_path() / "ripplekv_cli_hash.gguf";
  {
    std::ofstream f(path, std::ios::binary);
    f << "abc";
  }
  const CliResult r = RunCli("hash " + path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, 64),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(CliTest, GreedyGenerationOnSmolLM2IsDeterministicAndJsonParses) {
  if (ModelPath() == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  const std::string args = std::string("generate --model ") + ModelPath() +
                           " --prompt 'The capital of France is' -n 8 --threads 1 --json";
  const CliResult a = RunCli(args);
  const CliResult b = RunCli(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["tokens"], jb["tokens"]);
  EXPECT_EQ(ja["tokens"].size(), 8u);
  EXPECT_NE(ja["text"].get<std::string>().find("Paris"), std::string::npos) << a.out;
}

TEST(CliTest, InfoOnSmolLM2ReadsHeadersOnly) {
  if (ModelPath() == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  const CliResult r = RunCli(std::string("info --json ") + ModelPath());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["layers"], 30);
  EXPECT_EQ(j["kv_heads"], 3);
  EXPECT_EQ(j["format"], "gguf");
  // 134.5M weights, tied embeddings (no separate output matrix).
  EXPECT_NEAR(j["parameters"].get<double>(), 134.5e6, 0.5e6);
  // The hash reads the whole file: only with --hash.
  EXPECT_FALSE(j.contains("sha256"));
  // Memory (docs/MEMORY.md): Q4_1 weights as stored, 4 bytes per value expanded.
  EXPECT_NEAR(j["weight_bytes_stored"].get<double>(), 96.6e6, 0.1e6);
  EXPECT_NEAR(j["weight_bytes_f32"].get<double>(), 4 * 134.5e6, 2e6);
  EXPECT_EQ(j["memory_params"]["context_len"], 512);
  EXPECT_EQ(j["memory_params"]["probe_len"], 32);
  EXPECT_EQ(j["memory_params"]["trials"], 2);
  EXPECT_EQ(j["scratch_per_thread_bytes"], 128 * 1536 * 4);  // 128 rows x d_ff x fp32
  EXPECT_EQ(j["kv_cache_bytes"], 30 * 3 * (512 + 32) * (2 * 64 * 4 + 4));
  EXPECT_GT(j["calibration_scratch_bytes"].get<int64_t>(), 0);
  EXPECT_GT(j["calibration_memory_bytes_f32"].get<int64_t>(),
            j["calibration_memory_bytes_stored"].get<int64_t>());

  const CliResult hashed =
      RunCli(std::string("info --json --hash --context-len 1024 --threads 1 ") + ModelPath());
  ASSERT_EQ(hashed.exit_code, 0) << hashed.err;
  const auto h = nlohmann::json::parse(hashed.out);
  EXPECT_EQ(h["sha256"], "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53");
  EXPECT_EQ(h["kv_cache_bytes"], 30 * 3 * (1024 + 32) * (2 * 64 * 4 + 4));
  EXPECT_EQ(h["memory_params"]["threads"], 1);
}

// Writes a small valid profile file (3 layers) and returns its path.
std::string WriteProfile(const std::string& name, const std::string& kls) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream f(path);
  f << R"({"schema_version": 1,
  "model": {"hash": "abc123", "architecture": "llama", "name": "t", "n_layers": 3,
            "n_kv_heads": 1, "head_dim": 4, "d_model": 8, "vocab_size": 10},
  "params": {"mode": "cache", "alpha": 0.5, "trials": 1, "seed": 0, "samples": 1,
             "context_len": 16, "probe_len": 4, "layers": [0, 1, 2], "data_source": "test"},
  "layers": [)"
    << kls << R"(],
  "created_at": "2026-01-01T00:00:00Z", "tool_version": "test"})";
  return path.string();
}

std::string Layer(int l, double kl) {
  return "{\"layer\": " + std::to_string(l) + ", \"mean_kl\": " + std::to_string(kl) +
         ", \"stderr\": 0, \"count\": 1, \"per_sample_mean\": [" + std::to_string(kl) + "]}";
}

TEST(CliTest, BudgetsFromAProfileSumExactlyAndFollowSensitivity) {
  const std::string profile = WriteProfile(
      "ripplekv_cli_profile.json", Layer(0, 0.001) + "," + Layer(1, 0.004) + "," + Layer(2, 0.002));
  const CliResult r =
      RunCli("budgets --profile " + profile + " --avg-budget 100 --ratio 4 --json --format native");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  int64_t total = 0;
  std::vector<int64_t> tokens;
  for (const auto& layer : j["layers"])
    tokens.push_back(layer["tokens"].get<int64_t>()), total += tokens.back();
  EXPECT_EQ(total, 300);
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_GT(tokens[1], tokens[2]);
  EXPECT_GT(tokens[2], tokens[0]);

  const CliResult kv =
      RunCli("budgets --profile " + profile +
             " --avg-budget 100 --ratio 4 --json --format kvpress --context-len 1000");
  ASSERT_EQ(kv.exit_code, 0) << kv.err;
  EXPECT_EQ(nlohmann::json::parse(kv.out)["compression_ratios"].size(), 3u);
  std::filesystem::remove(profile);
}

TEST(CliTest, BudgetsRejectRatioBelowOneAndInfeasibleBoundsWithExitCode2) {
  const std::string profile =
      WriteProfile("ripplekv_cli_profile2.json",
                   Layer(0, 0.001) + "," + Layer(1, 0.002) + "," + Layer(2, 0.003));
  const CliResult low = RunCli("budgets --profile " + profile + " --avg-budget 100 --ratio 0.5");
  EXPECT_EQ(low.exit_code, 2);
  EXPECT_NE(low.err.find("ratio"), std::string::npos) << low.err;
  const CliResult infeasible =
      RunCli("budgets --profile " + profile + " --avg-budget 100 --ratio 2 --max-budget 50");
  EXPECT_EQ(infeasible.exit_code, 2);
  const CliResult over_context =
      RunCli("budgets --profile " + profile + " --avg-budget 100 --ratio 2 --context-len 64");
  EXPECT_EQ(over_context.exit_code, 2) << over_context.err;
  const CliResult missing = RunCli("budgets --profile /nonexistent.json --avg-budget 1");
  EXPECT_EQ(missing.exit_code, 2);
  std::filesystem::remove(profile);
}

// Writes a response profile (3 layers, snapkv on the grid 32 ... 256 and the full context 512,
// schema 2) and returns its path. Layer 1 loses the most at every budget, layer 2 the least.
std::string WriteResponseProfile(const std::string& name) {
  const auto path = std::filesystem::temp_directory_path() / name;
  auto layer = [](int l, const std::vector<double>& kl) {
    std::string points;
    const int budgets[] = {32, 64, 128, 256, 512};
    double mean = 0;
    for (size_t t = 0; t < 5; ++t) {
      const double value = t < kl.size() ? kl[t] : 0.0;
      mean += value / 5;
      points += (t ? ", " : "") + std::string("{\"budget\": ") + std::to_string(budgets[t]) +
                ", \"mean_kl\": " + std::to_string(value) + ", \"stderr\": 0}";
    }
    return "{\"layer\": " + std::to_string(l) + ", \"mean_kl\": " + std::to_string(mean) +
           ", \"stderr\": 0, \"count\": 5, \"per_sample_mean\": [" + std::to_string(mean) +
           "], \"response\": [" + points + "]}";
  };
  std::ofstream f(path);
  f << R"({"schema_version": 2,
  "model": {"hash": "abc123", "architecture": "llama", "name": "t", "n_layers": 3,
            "n_kv_heads": 1, "head_dim": 4, "d_model": 8, "vocab_size": 10},
  "params": {"objective": "response", "selector": "snapkv", "budgets": [32, 64, 128, 256, 512],
             "mode": "cache", "alpha": 0.5, "trials": 5, "seed": 0, "samples": 1,
             "context_len": 512, "probe_len": 32, "layers": [0, 1, 2], "data_source": "test"},
  "layers": [)"
    << layer(0, {0.9, 0.5, 0.2, 0.05}) << ", " << layer(1, {2.0, 1.2, 0.6, 0.2}) << ", "
    << layer(2, {0.3, 0.1, 0.04, 0.01}) << R"(],
  "created_at": "2026-01-01T00:00:00Z", "tool_version": "test"})";
  return path.string();
}

std::vector<int64_t> Tokens(const nlohmann::json& map) {
  std::vector<int64_t> tokens;
  for (const auto& layer : map["layers"]) tokens.push_back(layer["tokens"].get<int64_t>());
  return tokens;
}

TEST(CliTest, BudgetsFromAResponseProfileFollowTheMeasuredLoss) {
  const std::string profile = WriteResponseProfile("ripplekv_cli_response.json");
  const CliResult r = RunCli("budgets --profile " + profile + " --avg-budget 100 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const std::vector<int64_t> tokens = Tokens(j);
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[0] + tokens[1] + tokens[2], 300);
  EXPECT_GT(tokens[1], tokens[0]);
  EXPECT_GT(tokens[0], tokens[2]);
  // SnapKV keeps its 32-token window: the lower bound is raised to it and recorded.
  EXPECT_EQ(j["params"]["min_tokens"], 32);
  for (int64_t t : tokens) EXPECT_GE(t, 32);

  // The noise mapping's flags change nothing; a warning says they are not read.
  const CliResult ratio =
      RunCli("budgets --profile " + profile + " --avg-budget 100 --json --ratio 8");
  ASSERT_EQ(ratio.exit_code, 0) << ratio.err;
  EXPECT_EQ(ratio.out, r.out);
  EXPECT_NE(ratio.err.find("--ratio not read"), std::string::npos) << ratio.err;

  // The table says how the map was made and what it is predicted to lose.
  const CliResult table = RunCli("budgets --profile " + profile + " --avg-budget 100");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("predicted KL"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("response allocation (snapkv, budgets within [32, unbounded])"),
            std::string::npos)
      << table.out;

  // Too few tokens for SnapKV's window: the message says why the bound is 32.
  const CliResult small = RunCli("budgets --profile " + profile + " --avg-budget 20");
  EXPECT_EQ(small.exit_code, 2);
  EXPECT_NE(small.err.find("the smallest budget snapkv keeps"), std::string::npos) << small.err;
  // --max-budget bounds every layer.
  const CliResult capped =
      RunCli("budgets --profile " + profile + " --avg-budget 100 --max-budget 110 --json");
  ASSERT_EQ(capped.exit_code, 0) << capped.err;
  for (int64_t t : Tokens(nlohmann::json::parse(capped.out))) EXPECT_LE(t, 110);
  std::filesystem::remove(profile);
}

TEST(CliTest, BudgetsFrontierOfAResponseProfile) {
  const std::string profile = WriteResponseProfile("ripplekv_cli_frontier.json");
  const CliResult r = RunCli("budgets --profile " + profile + " --frontier --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["selector"], "snapkv");
  EXPECT_EQ(j["min_tokens"], 32);
  const auto& points = j["points"];
  ASSERT_EQ(points.size(), 5u);  // the grid's budgets
  std::vector<int64_t> averages;
  for (size_t i = 0; i < points.size(); ++i) {
    averages.push_back(points[i]["average_tokens"].get<int64_t>());
    EXPECT_EQ(points[i]["total_tokens"].get<int64_t>(), 3 * averages.back());
    EXPECT_LE(points[i]["hull_kl"].get<double>(), points[i]["predicted_kl"].get<double>());
    if (i > 0) {
      EXPECT_LT(points[i]["predicted_kl"].get<double>(),
                points[i - 1]["predicted_kl"].get<double>());
    }
  }
  EXPECT_EQ(averages, (std::vector<int64_t>{32, 64, 128, 256, 512}));
  EXPECT_NEAR(points[0]["predicted_kl"].get<double>(), 3.2, 1e-12);  // every layer at 32
  EXPECT_EQ(points[4]["predicted_kl"].get<double>(), 0.0);           // every full cache

  // Each point is the map `--avg-budget` gives.
  const CliResult map = RunCli("budgets --profile " + profile + " --avg-budget 128 --json");
  ASSERT_EQ(map.exit_code, 0) << map.err;
  EXPECT_EQ(points[2]["tokens"].get<std::vector<int64_t>>(),
            Tokens(nlohmann::json::parse(map.out)));

  // The bounds limit the default averages; --averages chooses them.
  const CliResult bounded =
      RunCli("budgets --profile " + profile + " --frontier --json --max-budget 200");
  ASSERT_EQ(bounded.exit_code, 0) << bounded.err;
  EXPECT_EQ(nlohmann::json::parse(bounded.out)["points"].size(), 3u);  // 32, 64, 128
  const CliResult chosen = RunCli("budgets --profile " + profile + " --frontier --averages 40,100");
  ASSERT_EQ(chosen.exit_code, 0) << chosen.err;
  EXPECT_NE(chosen.out.find("avg budget  total tokens    predicted KL      hull bound"),
            std::string::npos)
      << chosen.out;
  EXPECT_NE(chosen.out.find("       100           300"), std::string::npos) << chosen.out;
  const CliResult below = RunCli("budgets --profile " + profile + " --frontier --averages 16");
  EXPECT_EQ(below.exit_code, 2);
  EXPECT_NE(below.err.find("--averages: 16 is outside the bounds [32, unbounded]"),
            std::string::npos)
      << below.err;

  // The chart.
  const std::string svg =
      (std::filesystem::temp_directory_path() / "ripplekv_cli_frontier.svg").string();
  const CliResult drawn =
      RunCli("budgets --profile " + profile + " --frontier --frontier-svg " + svg);
  ASSERT_EQ(drawn.exit_code, 0) << drawn.err;
  std::ifstream f(svg);
  const std::string chart((std::istreambuf_iterator<char>(f)), {});
  EXPECT_NE(chart.find("<svg"), std::string::npos);
  EXPECT_NE(chart.find("response frontier"), std::string::npos);
  EXPECT_NE(chart.find("<polyline"), std::string::npos);
  std::filesystem::remove(svg);
  std::filesystem::remove(profile);
}

TEST(CliTest, BudgetsMaxKlPicksTheSmallestAverageThatReachesIt) {
  const std::string profile = WriteResponseProfile("ripplekv_cli_max_kl.json");
  const std::string out =
      (std::filesystem::temp_directory_path() / "ripplekv_cli_max_kl_map.json").string();
  const std::string svg =
      (std::filesystem::temp_directory_path() / "ripplekv_cli_max_kl.svg").string();
  const CliResult r = RunCli("budgets --profile " + profile + " --max-kl 0.5 --json --out " + out +
                             " --frontier-svg " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const int64_t average = j["params"]["average_tokens"].get<int64_t>();
  std::ifstream written(out);
  EXPECT_EQ(nlohmann::json::parse(written), j);
  // Its predicted KL is at most 0.5 nats, and one token less per layer's is not.
  const CliResult around =
      RunCli("budgets --profile " + profile + " --frontier --json --averages " +
             std::to_string(average - 1) + "," + std::to_string(average));
  ASSERT_EQ(around.exit_code, 0) << around.err;
  const auto points = nlohmann::json::parse(around.out)["points"];
  EXPECT_GT(points[0]["predicted_kl"].get<double>(), 0.5);
  EXPECT_LE(points[1]["predicted_kl"].get<double>(), 0.5);
  EXPECT_EQ(points[1]["tokens"].get<std::vector<int64_t>>(), Tokens(j));
  std::ifstream f(svg);
  const std::string chart((std::istreambuf_iterator<char>(f)), {});
  EXPECT_NE(chart.find("max KL 0.5"), std::string::npos);
  EXPECT_NE(chart.find("chosen: average " + std::to_string(average)), std::string::npos);

  // A KL the bounds cannot reach: NOT_FOUND, naming the lowest reachable.
  const CliResult unreachable =
      RunCli("budgets --profile " + profile + " --max-kl 0.01 --max-budget 256");
  EXPECT_EQ(unreachable.exit_code, 2);
  EXPECT_TRUE(unreachable.out.empty());
  EXPECT_NE(unreachable.err.find("predicts a KL of at most 0.01 nats (the lowest is 0.26)"),
            std::string::npos)
      << unreachable.err;
  // The average is chosen, not given.
  const CliResult both = RunCli("budgets --profile " + profile + " --max-kl 0.5 --avg-budget 100");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("--avg-budget: not with --max-kl"), std::string::npos) << both.err;
  for (const auto& p : {out, svg, profile}) std::filesystem::remove(p);
}

TEST(CliTest, BudgetsResponseAnswersNeedAResponseProfile) {
  const std::string profile =
      WriteProfile("ripplekv_cli_noise_frontier.json",
                   Layer(0, 0.001) + "," + Layer(1, 0.004) + "," + Layer(2, 0.002));
  for (const char* flags :
       {"--frontier", "--max-kl 0.1", "--avg-budget 100 --frontier-svg x.svg"}) {
    const CliResult r = RunCli("budgets --profile " + profile + " " + flags);
    EXPECT_EQ(r.exit_code, 2) << flags;
    EXPECT_NE(r.err.find("needs a response profile (ripplekv calibrate --objective response)"),
              std::string::npos)
        << r.err;
  }
  const CliResult none = RunCli("budgets --profile " + profile);
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("--avg-budget"), std::string::npos) << none.err;
  std::filesystem::remove(profile);
}

// Writes a per-head response profile (3 layers of 2 KV heads, snapkv on 32 ... 256 and the full
// 512) and returns its path: head 1 of layer 1 loses the most at every budget, head 0 of layer 2
// the least; each layer's response is the sum of its heads'.
std::string WritePerHeadResponseProfile(const std::string& name) {
  const auto path = std::filesystem::temp_directory_path() / name;
  const int budgets[] = {32, 64, 128, 256, 512};
  auto points = [&](const std::vector<double>& kl) {
    std::string out;
    for (size_t t = 0; t < 5; ++t) {
      out += (t ? ", " : "") + std::string("{\"budget\": ") + std::to_string(budgets[t]) +
             ", \"mean_kl\": " + std::to_string(t < kl.size() ? kl[t] : 0.0) + ", \"stderr\": 0}";
    }
    return "[" + out + "]";
  };
  auto layer = [&](int l, const std::vector<double>& h0, const std::vector<double>& h1) {
    std::vector<double> sum(h0.size());
    double mean = 0;
    for (size_t t = 0; t < h0.size(); ++t) sum[t] = h0[t] + h1[t], mean += sum[t] / 5;
    return "{\"layer\": " + std::to_string(l) + ", \"mean_kl\": " + std::to_string(mean) +
           ", \"stderr\": 0, \"count\": 10, \"per_sample_mean\": [" + std::to_string(mean) +
           "], \"response\": " + points(sum) + ", \"head_response\": [" + points(h0) + ", " +
           points(h1) + "]}";
  };
  std::ofstream f(path);
  f << R"({"schema_version": 2,
  "model": {"hash": "abc123", "architecture": "llama", "name": "t", "n_layers": 3,
            "n_kv_heads": 2, "head_dim": 4, "d_model": 8, "vocab_size": 10},
  "params": {"objective": "response", "selector": "snapkv", "budgets": [32, 64, 128, 256, 512],
             "kv_heads": 2, "mode": "cache", "alpha": 0.5, "trials": 10, "seed": 0,
             "samples": 1, "context_len": 512, "probe_len": 32, "layers": [0, 1, 2],
             "data_source": "test"},
  "layers": [)"
    << layer(0, {0.5, 0.3, 0.1, 0.03}, {0.4, 0.2, 0.1, 0.02}) << ", "
    << layer(1, {0.6, 0.4, 0.2, 0.05}, {1.4, 0.8, 0.4, 0.15}) << ", "
    << layer(2, {0.1, 0.03, 0.01, 0.002}, {0.2, 0.07, 0.03, 0.008}) << R"(],
  "created_at": "2026-01-01T00:00:00Z", "tool_version": "test"})";
  return path.string();
}

TEST(CliTest, BudgetsPerHeadGivesEachHeadABudgetAndTrtllmRefusesIt) {
  const std::string profile = WritePerHeadResponseProfile("ripplekv_cli_per_head.json");
  const CliResult r =
      RunCli("budgets --profile " + profile + " --avg-budget 100 --per-head --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  int64_t heads_total = 0;
  for (const auto& layer : j["layers"]) {
    ASSERT_EQ(layer["head_tokens"].size(), 2u) << layer;
    for (const auto& b : layer["head_tokens"]) heads_total += b.get<int64_t>();
  }
  EXPECT_EQ(heads_total, 2 * 300);
  EXPECT_GT(j["layers"][1]["head_tokens"][1].get<int64_t>(),
            j["layers"][1]["head_tokens"][0].get<int64_t>())
      << "head 1 of layer 1 loses the most";

  // The table shows each layer's head budgets.
  const CliResult table = RunCli("budgets --profile " + profile + " --avg-budget 100 --per-head");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  const std::string row1 = " " + std::to_string(j["layers"][1]["head_tokens"][0].get<int64_t>()) +
                           " " + std::to_string(j["layers"][1]["head_tokens"][1].get<int64_t>()) +
                           "\n";
  EXPECT_NE(table.out.find("heads\n"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(row1), std::string::npos) << table.out;

  const CliResult kvpress = RunCli("budgets --profile " + profile +
                                   " --avg-budget 100 --per-head --json --format kvpress "
                                   "--context-len 512");
  ASSERT_EQ(kvpress.exit_code, 0) << kvpress.err;
  const auto k = nlohmann::json::parse(kvpress.out);
  EXPECT_EQ(k["compression_ratios"].size(), 3u);
  EXPECT_EQ(k["head_compression_ratios"].size(), 3u);

  const CliResult trtllm = RunCli("budgets --profile " + profile +
                                  " --avg-budget 100 --per-head --json --format trtllm");
  EXPECT_EQ(trtllm.exit_code, 2);
  EXPECT_NE(trtllm.err.find("one window per layer"), std::string::npos) << trtllm.err;
  EXPECT_NE(trtllm.err.find("without --per-head"), std::string::npos) << trtllm.err;
  // Without --per-head the same profile gives a per-layer map, which trtllm takes.
  const CliResult per_layer =
      RunCli("budgets --profile " + profile + " --avg-budget 100 --json --format trtllm");
  EXPECT_EQ(per_layer.exit_code, 0) << per_layer.err;
  std::filesystem::remove(profile);
}

// The frontier of a per-head profile with --per-head: the optimal per-head maps, each average B
// per KV head, so the same memory as the per-layer frontier's B; never worse in prediction.
TEST(CliTest, BudgetsFrontierPerHeadIsThePerHeadMapsAtEveryAverage) {
  const std::string profile = WritePerHeadResponseProfile("ripplekv_cli_frontier_heads.json");
  const std::string common =
      "budgets --profile " + profile + " --frontier --averages 40,100 --json";
  const CliResult heads = RunCli(common + " --per-head");
  const CliResult layers = RunCli(common);
  ASSERT_EQ(heads.exit_code, 0) << heads.err;
  ASSERT_EQ(layers.exit_code, 0) << layers.err;
  const auto h = nlohmann::json::parse(heads.out), l = nlohmann::json::parse(layers.out);
  ASSERT_EQ(h["points"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& point = h["points"][i];
    EXPECT_EQ(point["total_tokens"], l["points"][i]["total_tokens"]);
    ASSERT_EQ(point["head_tokens"].size(), 3u) << point;
    int64_t sum = 0;
    for (const auto& layer : point["head_tokens"]) {
      ASSERT_EQ(layer.size(), 2u);
      for (const auto& b : layer) sum += b.get<int64_t>();
    }
    EXPECT_EQ(sum, 2 * point["total_tokens"].get<int64_t>());
    // Each layer's curve is its heads' sum, so the per-layer map is a per-head map with equal
    // heads: the per-head optimum predicts no more.
    EXPECT_LE(point["predicted_kl"].get<double>(),
              l["points"][i]["predicted_kl"].get<double>() + 1e-12);
    // The map at that average is the frontier's.
    const CliResult map =
        RunCli("budgets --profile " + profile + " --per-head --json --avg-budget " +
               std::to_string(point["average_tokens"].get<int64_t>()));
    ASSERT_EQ(map.exit_code, 0) << map.err;
    const auto m = nlohmann::json::parse(map.out);
    for (size_t layer = 0; layer < 3; ++layer) {
      EXPECT_EQ(m["layers"][layer]["head_tokens"], point["head_tokens"][layer]);
    }
  }
  const CliResult table = RunCli("budgets --profile " + profile + " --frontier --per-head");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("optimal maps of 3 layers x 2 KV heads"), std::string::npos)
      << table.out;
  std::filesystem::remove(profile);
}

// --selection sets the selector's floor: SnapKV its window, StreamingLLM its sinks, H2O a token.
TEST(CliTest, BudgetsSelectionKeepsTheSelectorsFloor) {
  const std::string profile =
      WriteProfile("ripplekv_cli_selection.json",
                   Layer(0, 0.001) + "," + Layer(1, 0.004) + "," + Layer(2, 0.002));
  const std::string common = "budgets --profile " + profile + " --avg-budget 100 --ratio 4 --json";
  auto tokens = [](const CliResult& r) {
    std::vector<int64_t> out;
    const nlohmann::json map = nlohmann::json::parse(r.out);
    for (const auto& layer : map["layers"]) out.push_back(layer["tokens"]);
    return out;
  };
  const CliResult plain = RunCli(common);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(tokens(plain), (std::vector<int64_t>{46, 182, 72}));
  const CliResult snapkv = RunCli(common + " --selection snapkv --window 64");
  ASSERT_EQ(snapkv.exit_code, 0) << snapkv.err;
  const std::vector<int64_t> floored = tokens(snapkv);
  EXPECT_EQ(floored[0], 64);
  EXPECT_EQ(floored[0] + floored[1] + floored[2], 300);
  EXPECT_EQ(nlohmann::json::parse(snapkv.out)["params"]["min_tokens"], 64);
  EXPECT_NE(snapkv.err.find("--selection snapkv: every layer keeps at least 64 tokens"),
            std::string::npos)
      << snapkv.err;
  // RippleKV's own window by default; the floor below the map's smallest budget changes nothing.
  const CliResult default_window = RunCli(common + " --selection snapkv");
  ASSERT_EQ(default_window.exit_code, 0) << default_window.err;
  EXPECT_EQ(tokens(default_window), (std::vector<int64_t>{46, 182, 72}));
  EXPECT_EQ(nlohmann::json::parse(default_window.out)["params"]["min_tokens"], 32);
  const CliResult streaming = RunCli(common + " --selection streaming --sinks 50");
  ASSERT_EQ(streaming.exit_code, 0) << streaming.err;
  EXPECT_EQ(tokens(streaming)[0], 50);
  const CliResult h2o = RunCli(common + " --selection h2o");
  ASSERT_EQ(h2o.exit_code, 0) << h2o.err;
  EXPECT_EQ(tokens(h2o), (std::vector<int64_t>{46, 182, 72}));

  const std::vector<std::pair<std::string, std::string>> refused = {
      {" --window 64", "--window: only with --selection snapkv"},
      {" --selection h2o --window 64", "--window: only with --selection snapkv"},
      {" --selection snapkv --sinks 4", "--sinks: only with --selection streaming"},
      {" --selection snapkv --window -1", "--window: must be >= 1"},
      {" --selection adakv",
       "--selection: unknown selector \"adakv\" (known: snapkv, h2o, "
       "streaming)"},
  };
  for (const auto& [flags, message] : refused) {
    const CliResult r = RunCli(common + flags);
    EXPECT_EQ(r.exit_code, 2) << flags;
    EXPECT_NE(r.err.find(message), std::string::npos) << flags << ": " << r.err;
  }
  std::filesystem::remove(profile);
}

// A map whose layers would pass --context-len is capped there, the excess spread over the other
// layers, as `eval` fits a map to its context; every export then holds.
TEST(CliTest, BudgetsCapAMapAtTheContextLength) {
  const std::string profile =
      WriteProfile("ripplekv_cli_context_cap.json",
                   Layer(0, 0.001) + "," + Layer(1, 0.004) + "," + Layer(2, 0.002));
  // Uncapped the map is [46, 182, 72]; layer 1 passes a context of 150.
  const CliResult capped = RunCli("budgets --profile " + profile +
                                  " --avg-budget 100 --ratio 4 --context-len 150 --json");
  ASSERT_EQ(capped.exit_code, 0) << capped.err;
  EXPECT_NE(capped.err.find("1 of 3 layers would keep more than --context-len 150 tokens (up to "
                            "182); capped there"),
            std::string::npos)
      << capped.err;
  const auto j = nlohmann::json::parse(capped.out);
  int64_t total = 0;
  for (const auto& layer : j["layers"]) {
    EXPECT_LE(layer["tokens"].get<int64_t>(), 150);
    total += layer["tokens"].get<int64_t>();
  }
  EXPECT_EQ(total, 300);
  EXPECT_EQ(j["layers"][1]["tokens"], 150);
  EXPECT_EQ(j["params"]["max_tokens"], 150);
  // kvpress: every ratio in [0, 1), each giving back its layer's budget.
  const CliResult kvpress = RunCli("budgets --profile " + profile +
                                   " --avg-budget 100 --ratio 4 --context-len 150 --json "
                                   "--format kvpress");
  ASSERT_EQ(kvpress.exit_code, 0) << kvpress.err;
  const auto ratios = nlohmann::json::parse(kvpress.out)["compression_ratios"];
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_EQ(static_cast<int64_t>(150 * (1 - ratios[l].get<double>())),
              j["layers"][l]["tokens"].get<int64_t>());
  }
  // A map that fits is left as it is, with nothing said.
  const CliResult fits = RunCli("budgets --profile " + profile +
                                " --avg-budget 100 --ratio 4 --context-len 200 --json");
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(fits.err.find("capped"), std::string::npos) << fits.err;
  EXPECT_TRUE(nlohmann::json::parse(fits.out)["params"]["max_tokens"].is_null());
  // More tokens than the layers' contexts hold: the flag is named.
  const CliResult too_much =
      RunCli("budgets --profile " + profile + " --avg-budget 200 --context-len 150");
  EXPECT_EQ(too_much.exit_code, 2);
  EXPECT_NE(too_much.err.find("--avg-budget: 600 tokens do not fit 3 layers of at most "
                              "--context-len 150 tokens each"),
            std::string::npos)
      << too_much.err;
  std::filesystem::remove(profile);
}

TEST(CliTest, BudgetsPerHeadNeedsAProfileWithHeadCurves) {
  const std::string noise =
      WriteProfile("ripplekv_cli_noise_per_head.json",
                   Layer(0, 0.001) + "," + Layer(1, 0.004) + "," + Layer(2, 0.002));
  const CliResult r = RunCli("budgets --profile " + noise + " --avg-budget 100 --per-head");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("per-head"), std::string::npos) << r.err;
  std::filesystem::remove(noise);
}

// Alpha 0 measures nothing and no profile accepts it, so it fails at once with the rule of
// method/calibration_params.h (the scheduler's message too), before the model is opened: the
// model path does not exist, and the error is still the alpha one.
TEST(CliTest, CalibrateRefusesAlphaZeroBeforeAnyModelWork) {
  const CliResult r = RunCli("calibrate --model /nonexistent.gguf --alpha 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("ripplekv: error: params.alpha: must be finite and > 0, got 0"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("nonexistent"), std::string::npos) << r.err;  // the model was not opened
  const CliResult stable = RunCli("calibrate --model /nonexistent.gguf --until-stable --samples 1");
  EXPECT_EQ(stable.exit_code, 2);
  EXPECT_NE(stable.err.find("params.samples: until_stable needs rounds of at least 2 samples"),
            std::string::npos)
      << stable.err;
}

// Every rule of method/calibration_params.h, each edge refused by calibrate before the model is
// opened (the path does not exist), exit 2, with the message a scheduler and a worker give.
TEST(CliTest, CalibrateRefusesEveryInvalidParameterWithTheMethodsMessage) {
  struct Edge {
    const char* flags;
    const char* message;
  };
  const std::vector<Edge> edges = {
      {"--alpha 0", "params.alpha: must be finite and > 0, got 0"},
      {"--alpha -0.5", "params.alpha: must be finite and > 0, got -0.5"},
      {"--alpha nan", "params.alpha: must be finite and > 0, got nan"},
      {"--alpha inf", "params.alpha: must be finite and > 0, got inf"},
      {"--trials 0", "params.trials: must be >= 1, got 0"},
      {"--samples 0", "params.samples: must be >= 1, got 0"},
      {"--samples -3", "params.samples: must be >= 1, got -3"},
      {"--context-len 0", "params.context_len: must be >= 1, got 0"},
      {"--probe 0", "params.probe_len: must be >= 1, got 0"},
      {"--context-len 32 --probe 32",
       "params.probe_len: must be < params.context_len (32), got 32"},
      {"--layers 2,2", "params.layers[1]: layer 2 repeated"},
      {"--until-stable --samples 1",
       "params.samples: until_stable needs rounds of at least 2 samples, got 1"},
      {"--until-stable --samples 8 --max-samples 4",
       "params.max_samples: must be >= params.samples (8), got 4"},
      {"--per-head", "--per-head: only with --objective response"},
  };
  for (const Edge& edge : edges) {
    const CliResult r = RunCli(std::string("calibrate --model /nonexistent.gguf ") + edge.flags);
    EXPECT_EQ(r.exit_code, 2) << edge.flags;
    EXPECT_NE(r.err.find(std::string("ripplekv: error: ") + edge.message), std::string::npos)
        << edge.flags << ": " << r.err;
    EXPECT_EQ(r.err.find("nonexistent"), std::string::npos) << r.err;  // the model not opened
  }
}

TEST(CliTest, CalibrateRejectsBadParametersNamingThem) {
  const CliResult alpha = RunCli("calibrate --model /nonexistent.gguf --alpha -1");
  EXPECT_EQ(alpha.exit_code, 2);
  EXPECT_NE(alpha.err.find("params.alpha: must be finite and > 0, got -1"), std::string::npos)
      << alpha.err;
  const CliResult probe = RunCli("calibrate --model /nonexistent.gguf --context-len 32 --probe 32");
  EXPECT_EQ(probe.exit_code, 2);
  EXPECT_NE(probe.err.find("probe"), std::string::npos) << probe.err;
  const CliResult mode = RunCli("calibrate --model /nonexistent.gguf --mode sideways");
  EXPECT_EQ(mode.exit_code, 2);
  EXPECT_NE(mode.err.find("sideways"), std::string::npos) << mode.err;
  // Checked before the model is opened: the known names are listed.
  const CliResult builtin = RunCli("calibrate --model /nonexistent.gguf --builtin war-and-peace");
  EXPECT_EQ(builtin.exit_code, 2);
  EXPECT_NE(builtin.err.find("--builtin: unknown built-in calibration set \"war-and-peace\"; "
                             "known: mixed, sherlock-holmes, tom-sawyer, code, docs"),
            std::string::npos)
      << builtin.err;
  const CliResult both = RunCli("calibrate --model /nonexistent.gguf --builtin code --data x.txt");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
}

TEST(CliTest, CalibrateOnSmolLM2WritesProfilePlotAndIsDeterministic) {
  if (ModelPath() == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  const auto dir = std::filesystem::temp_directory_path();
  const std::string out1 = (dir / "ripplekv_cli_cal1.json").string();
  const std::string out2 = (dir / "ripplekv_cli_cal2.json").string();
  const std::string svg = (dir / "ripplekv_cli_cal.svg").string();
  const std::string common = std::string("calibrate --model ") + ModelPath() +
                             " --samples 2 --context-len 64 --probe 8 --layers 0,7,29 -q";
  const CliResult a = RunCli(common + " -t 1 --out " + out1 + " --plot " + svg);
  const CliResult b = RunCli(common + " -t 2 --out " + out2);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  std::ifstream f1(out1), f2(out2), fs(svg);
  auto p1 = nlohmann::json::parse(f1), p2 = nlohmann::json::parse(f2);
  EXPECT_EQ(p1["layers"], p2["layers"]) << "same seed, 1 vs 2 threads: identical profile";
  ASSERT_EQ(p1["layers"].size(), 3u);
  for (const auto& l : p1["layers"]) EXPECT_GT(l["mean_kl"].get<double>(), 0.0);
  const std::string plot((std::istreambuf_iterator<char>(fs)), {});
  EXPECT_NE(plot.find("<svg"), std::string::npos);
  for (const auto& p : {out1, out2, svg}) std::filesystem::remove(p);
}

// The profile's data description names the built-in set and the spread seed the flags chose.
TEST(CliTest, CalibrateBuiltinAndDataSeedReachTheProfile) {
  if (ModelPath() == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  const std::string common = std::string("calibrate --model ") + ModelPath() +
                             " --samples 1 --context-len 32 --probe 4 --layers 0 --trials 1 "
                             "-t 1 -q --json";
  const CliResult by_default = RunCli(common);
  const CliResult docs = RunCli(common + " --builtin docs --data-seed 2");
  ASSERT_EQ(by_default.exit_code, 0) << by_default.err;
  ASSERT_EQ(docs.exit_code, 0) << docs.err;
  const std::string a = nlohmann::json::parse(by_default.out)["params"]["data_source"];
  const std::string b = nlohmann::json::parse(docs.out)["params"]["data_source"];
  EXPECT_EQ(a.rfind("built-in mixed (prose: ", 0), 0u) << a;
  EXPECT_NE(a.find("spread seed 0 over "), std::string::npos) << a;
  EXPECT_EQ(b.rfind("built-in docs (docs: ", 0), 0u) << b;
  EXPECT_NE(b.find("spread seed 2 over "), std::string::npos) << b;
}

// `text` as one single-quoted shell word.
std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

// Writes `contents` to a temporary file and returns its path.
std::string WriteTempFile(const std::string& name, const std::string& contents) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream f(path, std::ios::binary);
  f << contents;
  return path.string();
}

std::vector<int32_t> TokenizeIds(const std::string& args) {
  const CliResult r = RunCli(std::string("tokenize --model ") + ModelPath() + " --json " + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return {};
  const auto j = nlohmann::json::parse(r.out);
  std::vector<int32_t> ids;
  for (const auto& t : j["tokens"]) ids.push_back(t["id"].get<int32_t>());
  EXPECT_EQ(j["n_tokens"].get<size_t>(), ids.size());
  return ids;
}

TEST(CliTest, TokenizeOnSmolLM2MatchesLlamaCppFixtureIds) {
  if (ModelPath() == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  // The fixture's add_special = true cases: what llama_tokenize gives for the same GGUF. Each text
  // goes through --file so that newlines, tabs and quotes reach the tokenizer unchanged.
  std::ifstream f(RIPPLEKV_FIXTURES_DIR "/llamacpp/tokens.json");
  ASSERT_TRUE(f) << "missing tests/fixtures/llamacpp/tokens.json";
  const auto fixture = nlohmann::json::parse(f);
  int checked = 0;
  for (const auto& c : fixture["cases"]) {
    if (!c["add_special"].get<bool>()) continue;
    const std::string text = c["text"].get<std::string>();
    const std::string path = WriteTempFile("ripplekv_cli_tokenize_case.txt", text);
    const auto ids =
        TokenizeIds("--file " + path + (c["parse_special"].get<bool>() ? " --special" : ""));
    std::filesystem::remove(path);
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << "text: " << text;
    ++checked;
  }
  EXPECT_GT(checked, 60);
}

TEST(CliTest, TokenizeAgreesWithGeneratePromptTokenIds) {
  if (ModelPath() == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  const std::string text = "The capital of France is";
  const auto ids = TokenizeIds("--text " + ShellQuote(text));
  const CliResult g = RunCli(std::string("generate --model ") + ModelPath() + " --prompt " +
                             ShellQuote(text) + " --max-tokens 1 --threads 1 --json -q");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const auto j = nlohmann::json::parse(g.out);
  EXPECT_EQ(j["prompt_token_ids"].get<std::vector<int32_t>>(), ids);
  EXPECT_EQ(j["prompt_tokens"].get<size_t>(), ids.size());
  EXPECT_FALSE(ids.empty());
}

TEST(CliTest, TokenizeSpecialParsesControlTokens) {
  if (ModelPath() == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  EXPECT_EQ(TokenizeIds("--special --text '<|im_start|>'"), std::vector<int32_t>{1});
  EXPECT_GT(TokenizeIds("--text '<|im_start|>'").size(), 1u) << "plain text without --special";
}

TEST(CliTest, TokenizeHumanOutputIsOneLinePerToken) {
  if (ModelPath() == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  // Newlines, a tab, a backslash and an emoji (split into partial-UTF-8 byte pieces).
  const std::string path =
      WriteTempFile("ripplekv_cli_tokenize_human.txt", "line one\n\n\tC:\\dir it's 🍕\n");
  const auto ids = TokenizeIds("--file " + path);
  const CliResult r = RunCli(std::string("tokenize --model ") + ModelPath() + " --file " + path);
  std::filesystem::remove(path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<int32_t> printed;
  const std::regex pattern(R"(^ *(\d+) -> '(.*)'$)");
  while (std::getline(lines, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, pattern)) << "line: " << line;
    printed.push_back(std::stoi(m[1]));
  }
  EXPECT_EQ(printed, ids);
  EXPECT_NE(r.out.find("\\n"), std::string::npos) << r.out;  // escaped, not raw newlines
  EXPECT_NE(r.out.find("\\x"), std::string::npos) << "partial UTF-8 bytes as \\xNN: " << r.out;
  EXPECT_NE(r.err.find(std::to_string(ids.size()) + " tokens"), std::string::npos) << r.err;

  // --json keeps partial-UTF-8 pieces: U+FFFD in "piece", the exact bytes in "bytes".
  const std::string emoji = WriteTempFile("ripplekv_cli_tokenize_emoji.txt", "🍕");
  const CliResult j =
      RunCli(std::string("tokenize --json --model ") + ModelPath() + " -f " + emoji);
  std::filesystem::remove(emoji);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  std::string bytes;
  int partial = 0;
  const auto parsed = nlohmann::json::parse(j.out);
  for (const auto& t : parsed["tokens"]) {
    if (!t.contains("bytes")) {
      bytes += t["piece"].get<std::string>();
      continue;
    }
    ++partial;
    EXPECT_NE(t["piece"].get<std::string>().find("\uFFFD"), std::string::npos) << t.dump();
    for (const auto& b : t["bytes"]) bytes.push_back(static_cast<char>(b.get<int>()));
  }
  EXPECT_GT(partial, 0);
  EXPECT_EQ(bytes, "🍕");
}

TEST(CliTest, TokenizeMissingFileNamesThePathWithExitCode2) {
  const CliResult r =
      RunCli("tokenize --model /nonexistent/model.gguf --file /nonexistent/calib.txt");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("ripplekv: error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/calib.txt"), std::string::npos) << r.err;
}

TEST(CliTest, TokenizeNeedsExactlyOneOfTextAndFile) {
  const CliResult both = RunCli("tokenize --model m.gguf --text hi --file x.txt");
  EXPECT_EQ(both.exit_code, 2) << both.err;
  EXPECT_TRUE(both.out.empty()) << both.out;
  const CliResult neither = RunCli("tokenize --model m.gguf");
  EXPECT_EQ(neither.exit_code, 2) << neither.err;
}

TEST(CliTest, BadFlagValueIsUsageError) {
  const CliResult r = RunCli("generate --model x --prompt y --temp -1");
  EXPECT_EQ(r.exit_code, 2);
}

// The device is opened before the model is read, so a missing device is the error even with a
// model path that does not exist; no machine has 99 GPUs. Without a GPU (or a CUDA backend) the
// message gives the reason; with one it gives the device count.
TEST(CliTest, AnUnusableDeviceIsAOneLineErrorNamingIt) {
  for (const char* command : {"generate --prompt hi", "calibrate", "eval"}) {
    const CliResult r =
        RunCli(std::string(command) + " --model /nonexistent/model.gguf --device cuda:99");
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << command;
    EXPECT_NE(r.err.find("ripplekv: error: "), std::string::npos) << command << ": " << r.err;
    const bool no_device = r.err.find("no usable cuda device: ") != std::string::npos;
    const bool past_count = r.err.find("cuda:99: this machine has ") != std::string::npos;
    EXPECT_TRUE(no_device || past_count) << command << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  const CliResult bad = RunCli("generate --model /nonexistent/model.gguf --prompt hi --device gpu");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("device 'gpu' is not cpu, cuda or cuda:N"), std::string::npos) << bad.err;
}

// --- The scheduler commands' checks, with no scheduler running --------------------------------

// Nothing listens on loopback port 1 (binding it needs root): every call is UNAVAILABLE.
const std::string kNoScheduler = "--scheduler 127.0.0.1:1";

size_t Lines(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

// --verify is checked before the model is read and before any call, so a bad value is the error
// even with a model that does not exist and no scheduler.
TEST(CliTest, SubmitRejectsVerifyOutsideZeroToOneNamingTheFlag) {
  for (const char* bad : {"1.5", "-0.1", "nan", "inf"}) {
    const CliResult r =
        RunCli("submit " + kNoScheduler + " --model /nonexistent/model.gguf --verify=" + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << bad << ": " << r.out;
    EXPECT_NE(r.err.find("ripplekv: error: --verify must be a fraction of the tasks in [0, 1]"),
              std::string::npos)
        << bad << ": " << r.err;
    EXPECT_EQ(r.err.find("nonexistent"), std::string::npos) << bad << ": " << r.err;
    EXPECT_EQ(Lines(r.err), 1u) << bad << ": " << r.err;
  }
  // In range (the bounds included) the check passes and the missing model is the error.
  for (const char* good : {"0", "1", "0.05"}) {
    const CliResult r =
        RunCli("submit " + kNoScheduler + " --model /nonexistent/model.gguf --verify " + good);
    EXPECT_EQ(r.exit_code, 2) << good << ": " << r.err;
    EXPECT_EQ(r.err.find("--verify"), std::string::npos) << good << ": " << r.err;
    EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << good << ": " << r.err;
  }
  const CliResult word =
      RunCli("submit " + kNoScheduler + " --model /nonexistent/model.gguf --verify most");
  EXPECT_EQ(word.exit_code, 2) << word.err;
  EXPECT_NE(word.err.find("--verify"), std::string::npos) << word.err;
}

TEST(CliTest, WorkersWithoutASchedulerIsOneUnavailableLine) {
  for (const char* json : {"", " --json"}) {
    const CliResult r = RunCli("workers " + kNoScheduler + json);
    EXPECT_EQ(r.exit_code, 3) << json << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << json << ": " << r.out;
    EXPECT_EQ(r.err.rfind("ripplekv: error: scheduler 127.0.0.1:1: ", 0), 0u) << json << r.err;
    EXPECT_EQ(Lines(r.err), 1u) << r.err;
  }
  const CliResult no_address = RunCli("workers");
  EXPECT_EQ(no_address.exit_code, 2) << no_address.err;
  EXPECT_NE(no_address.err.find("--scheduler"), std::string::npos) << no_address.err;
}

TEST(CliTest, UnquarantineNeedsAWorkerIdAndFailsCleanlyWithoutAScheduler) {
  const CliResult r = RunCli("admin unquarantine " + kNoScheduler + " worker-7");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("ripplekv: error: UNAVAILABLE: scheduler 127.0.0.1:1: "), std::string::npos)
      << r.err;
  EXPECT_EQ(Lines(r.err), 1u) << r.err;

  const CliResult empty = RunCli("admin unquarantine " + kNoScheduler + " ''");
  EXPECT_EQ(empty.exit_code, 2) << empty.err;
  EXPECT_NE(empty.err.find("ripplekv: error: the worker id must not be empty"), std::string::npos)
      << empty.err;
  const CliResult missing = RunCli("admin unquarantine " + kNoScheduler);
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find("worker"), std::string::npos) << missing.err;
}

// The completion script is generated from the command definitions: the new commands and the
// new flag are in it.
TEST(CliTest, CompletionOffersWorkersUnquarantineAndVerify) {
  const CliResult r = RunCli("completion bash");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex root("\n    \"\"\\) echo \"[^\"]*\\bworkers\\b[^\"]*\" ;;");
  EXPECT_TRUE(std::regex_search(r.out, root)) << r.out;
  const std::regex admin("\n    \"admin\"\\) echo \"[^\"]*\\bunquarantine\\b[^\"]*\" ;;");
  EXPECT_TRUE(std::regex_search(r.out, admin)) << r.out;
  EXPECT_NE(r.out.find("\"submit|--verify\") echo \"\"; return 0 ;;"), std::string::npos);
  const std::regex workers_flags("\n    \"workers\"\\) echo \"[^\"]*--scheduler[^\"]*--json");
  const std::regex workers_flags_other("\n    \"workers\"\\) echo \"[^\"]*--json[^\"]*--scheduler");
  EXPECT_TRUE(std::regex_search(r.out, workers_flags) ||
              std::regex_search(r.out, workers_flags_other))
      << r.out;
  const std::regex budgets_per_head("\n    \"budgets\"\\) echo \"[^\"]*--per-head[^\"]*\" ;;");
  EXPECT_TRUE(std::regex_search(r.out, budgets_per_head)) << r.out;
}

}  // namespace
