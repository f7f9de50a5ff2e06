// The calibration memory estimate against the measured peak RSS of the real work: the
// `ripplekv calibrate` binary runs in a child process (1 thread, 1 sample x 1 layer x 2 trials,
// C 512, W 32, cache mode) and wait4's ru_maxrss (the child's peak resident set, KiB) is compared
// with EstimateCalibrationMemory(...).total_bytes() for the same shape, computed from the file's
// header alone (DescribeModel). Passes when they agree within 10 % of the measured peak, for
// --weights stored and f32, on SmolLM2-135M (RIPPLEKV_SMOLLM2_GGUF; skipped without it) and on a
// 1-layer synthetic Llama 3 8B shape written into a temporary directory.

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/model/synthetic_model.h"
#include "worker/calibration/memory_estimate.h"
#include "worker/model/model_loader.h"

namespace ripplekv::worker {
namespace {

// Peak RSS of `ripplekv calibrate` on `model`, bytes; -1 when it did not exit 0.
int64_t CalibratePeakRss(const std::string& model, const std::string& weights) {
  std::vector<std::string> args = {
      RIPPLEKV_CLI, "calibrate", "--model",  model, "--weights", weights, "--threads",     "1",
      "--samples",  "1",         "--layers", "0",   "--trials",  "2",     "--context-len", "512",
      "--probe",    "32",        "--json"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);  // the child must not write the parent's buffered output again
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The profile and logs are not needed: only the peak memory.
    if (std::freopen("/dev/null", "w", stdout) == nullptr) _exit(126);
    if (std::freopen("/dev/null", "w", stderr) == nullptr) _exit(126);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage = {};
  if (pid < 0 || ::wait4(pid, &status, 0, &usage) != pid) return -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
}

void ExpectEstimateWithinTenPercent(const std::string& model) {
  StatusOr<ModelSummary> summary = DescribeModel(model);
  ASSERT_TRUE(summary.ok()) << summary.status();
  for (WeightStorage storage : {WeightStorage::kStored, WeightStorage::kF32}) {
    const std::string name(WeightStorageName(storage));
    const MemoryEstimate e =
        EstimateCalibrationMemory(summary->config, summary->weight_bytes(storage),
                                  {.threads = 1,
                                   .context_len = 512,
                                   .probe_len = 32,
                                   .trials = 2,
                                   .weights = storage,
                                   .f32_load_mapped_bytes = summary->stored_weight_bytes});
    const int64_t rss = CalibratePeakRss(model, name);
    ASSERT_GT(rss, 0) << "ripplekv calibrate failed on " << model;
    const double ratio = static_cast<double>(e.total_bytes()) / static_cast<double>(rss);
    std::printf("%s --weights %s: estimate %s, peak RSS %s (estimate / RSS %.3f)\n", model.c_str(),
                name.c_str(), FormatBytes(e.total_bytes()).c_str(), FormatBytes(rss).c_str(),
                ratio);
    EXPECT_NEAR(ratio, 1.0, 0.10) << name << ": " << DescribeEstimate(e) << " vs peak RSS "
                                  << FormatBytes(rss);
  }
}

TEST(MemoryRssTest, EstimateIsWithinTenPercentOfPeakRssOnSmolLM2) {
  const char* path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
  if (path == nullptr) GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF not set";
  ExpectEstimateWithinTenPercent(path);
}

TEST(MemoryRssTest, EstimateIsWithinTenPercentOfPeakRssOnASyntheticLlama3Layer) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("ripplekv_memory_rss_" + std::to_string(::getpid()) + ".gguf");
  StatusOr<bench::SyntheticShape> shape = bench::FindSyntheticShape("llama3-8b");
  ASSERT_TRUE(shape.ok()) << shape.status();
  // d_model 4096, d_ff 14336, GQA 32/8: one layer (132 MB at q4_0), a 2048-token vocabulary.
  StatusOr<bench::SyntheticModelStats> written =
      bench::WriteSyntheticModel(path.string(), {.shape = *shape,
                                                 .n_layers = 1,
                                                 .vocab_size = 2048,
                                                 .type = kernels::GgmlType::kQ4_0,
                                                 .sync = false});
  ASSERT_TRUE(written.ok()) << written.status();
  ExpectEstimateWithinTenPercent(path.string());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ripplekv::worker
