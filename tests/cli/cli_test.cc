// Runs the real `ripplekv` binary: exit codes, one-line errors, stdout/stderr separation, and
// (when the default model is available) the commands on SmolLM2.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

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
  EXPECT_EQ(r.out.substr(0, 64), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
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
  EXPECT_EQ(j["sha256"], "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53");
}

TEST(CliTest, BadFlagValueIsUsageError) {
  const CliResult r = RunCli("generate --model x --prompt y --temp -1");
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
