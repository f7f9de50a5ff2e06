// The calibration memory estimate's terms against hand-computed values for a small config, and
// the weight bytes read from a file's tensor table against WeightBytes() of the loaded model.

#include "worker/calibration/memory_estimate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "bench/model/synthetic_model.h"
#include "worker/model/model_loader.h"

namespace ripplekv::worker {
namespace {

// L 2, d 8, 2 query heads and 1 KV head of 4, d_ff 16, vocab 32.
ModelConfig SmallConfig() {
  ModelConfig c;
  c.n_layers = 2;
  c.d_model = 8;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 4;
  c.d_ff = 16;
  c.vocab_size = 32;
  return c;
}

// C 4, W 2, T 3, 2 threads.
MemoryOptions SmallOptions() {
  return {.threads = 2, .context_len = 4, .probe_len = 2, .trials = 3};
}

TEST(MemoryEstimateTest, CacheModeTermsMatchHandComputedValues) {
  const MemoryEstimate e = EstimateCalibrationMemory(SmallConfig(), 1000, SmallOptions());
  EXPECT_EQ(e.weight_bytes, 1000);
  // 128 rows x max K (d_ff 16) x 4 bytes, per thread; 2 threads.
  EXPECT_EQ(e.scratch_per_thread_bytes, 128 * 16 * 4);
  EXPECT_EQ(e.thread_scratch_bytes, 2 * 128 * 16 * 4);
  // L 2 x H_kv 1 x (C + W = 6) tokens x (2 x 4 values x 4 bytes + 4 bytes of position).
  EXPECT_EQ(e.kv_cache_bytes, 2 * 1 * 6 * (2 * 4 * 4 + 4));
  EXPECT_EQ(e.kv_cache_bytes, KvCacheBytes(SmallConfig(), 6));
  // Held by the prepared sample: clean logits 2 x 32 x 4 = 256, layer inputs 2 x 2 x 8 x 4 = 128.
  // Layer buffers per row (xn, q, attn, k, v, gate, up): 8 + 2*8 + 2*4 + 2*16 = 64 floats.
  // Trials (6 rows): residual 6*8*4 = 192; perturbed values 3 x 1 x 6 x 4 x 4 = 288; probe K/V
  // 2 x 3 x 1 x 2 x 4 x 4 = 192; max(layer buffers 6*64*4 = 1536 + attention scratch
  // 2 x (6 x 6 + 6) x 4 = 336, logits 6 x (8 + 32) x 4 = 960) = 1872. Sum 2544, larger than the
  // context pass (128 + 1024 + 240 = 1392) and the probe pass (64 + 656 = 720).
  EXPECT_EQ(e.calibration_bytes, 256 + 128 + 192 + 288 + 192 + 1872);
  EXPECT_EQ(e.load_bytes, 0);
  EXPECT_EQ(e.tokenizer_bytes, kTokenizerBytesPerToken * 32);
  EXPECT_EQ(e.process_bytes, kProcessBytes);
  EXPECT_EQ(e.total_bytes(),
            1000 + 2 * 128 * 16 * 4 + kTokenizerBytesPerToken * 32 + kProcessBytes + 432 + 2928);
}

TEST(MemoryEstimateTest, PrefillModeKeepsEveryRowsInputsAndASecondCache) {
  MemoryOptions options = SmallOptions();
  options.mode = method::PerturbMode::kPrefill;
  const MemoryEstimate e = EstimateCalibrationMemory(SmallConfig(), 1000, options);
  // Held: logits 256 + layer inputs at all 6 rows 2 x 6 x 8 x 4 = 384; each trial's own cache
  // 432; one pass over 6 rows: residual 192 + max(1536 + 336, 2 x 8 x 4 + 2 x 40 x 4 = 384).
  EXPECT_EQ(e.calibration_bytes, 256 + 384 + 432 + 192 + 1872);
}

TEST(MemoryEstimateTest, F32WeightsHaveNoSliceBufferButALoadPeak) {
  MemoryOptions options = SmallOptions();
  options.weights = WeightStorage::kF32;
  options.f32_load_mapped_bytes = 100000;
  const MemoryEstimate e = EstimateCalibrationMemory(SmallConfig(), 4000, options);
  EXPECT_EQ(e.scratch_per_thread_bytes, 0);
  EXPECT_EQ(e.thread_scratch_bytes, 0);
  EXPECT_EQ(e.load_bytes, 100000);
  // The load's peak (no task yet) is larger than the task here.
  EXPECT_EQ(e.total_bytes(), 4000 + kTokenizerBytesPerToken * 32 + kProcessBytes + 100000);
  options.weights = WeightStorage::kStored;
  EXPECT_EQ(EstimateCalibrationMemory(SmallConfig(), 4000, options).load_bytes, 0);
}

TEST(MemoryEstimateTest, NonsenseInputsGiveNoNegativeTerms) {
  ModelConfig c = SmallConfig();
  c.vocab_size = -5;
  const MemoryEstimate e =
      EstimateCalibrationMemory(c, -1, {.threads = 0, .context_len = -3, .trials = -1});
  EXPECT_EQ(e.weight_bytes, 0);
  EXPECT_GE(e.calibration_bytes, 0);
  EXPECT_EQ(e.tokenizer_bytes, 0);
  EXPECT_EQ(e.thread_scratch_bytes, e.scratch_per_thread_bytes);  // threads 0 counts as 1
}

TEST(MemoryEstimateTest, FormatsBytesAndNamesEveryTerm) {
  EXPECT_EQ(FormatBytes(12), "12 B");
  EXPECT_EQ(FormatBytes(4096), "4.0 KiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 20), "3.0 MiB");
  EXPECT_EQ(FormatBytes(int64_t{33500000000}), "31.2 GiB");
  const std::string line =
      DescribeEstimate(EstimateCalibrationMemory(SmallConfig(), int64_t{5} << 30, SmallOptions()));
  for (const char* term : {"weights 5.0 GiB", "thread scratch 16.0 KiB", "KV cache 432 B",
                           "calibration scratch", "tokenizer 16.0 KiB", "process 22.0 MiB"}) {
    EXPECT_NE(line.find(term), std::string::npos) << term << " in " << line;
  }
}

// The header's weight bytes are what the loaded model holds, for both storages.
TEST(MemoryEstimateTest, HeaderWeightBytesEqualWeightBytesOfTheLoadedModel) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("ripplekv_memory_estimate_" + std::to_string(::getpid()) + ".gguf");
  StatusOr<bench::SyntheticShape> shape = bench::FindSyntheticShape("smollm2-135m");
  ASSERT_TRUE(shape.ok()) << shape.status();
  ASSERT_TRUE(bench::WriteSyntheticModel(path.string(), {.shape = *shape,
                                                         .n_layers = 2,
                                                         .vocab_size = 512,
                                                         .type = kernels::GgmlType::kQ8_0,
                                                         .sync = false})
                  .ok());
  StatusOr<ModelSummary> summary = DescribeModel(path.string());
  ASSERT_TRUE(summary.ok()) << summary.status();
  for (WeightStorage storage : {WeightStorage::kStored, WeightStorage::kF32}) {
    StatusOr<Model> model = LoadModel(path.string(), storage);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(summary->weight_bytes(storage), WeightBytes(*model)) << WeightStorageName(storage);
  }
  EXPECT_LT(summary->stored_weight_bytes, summary->f32_weight_bytes);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ripplekv::worker
