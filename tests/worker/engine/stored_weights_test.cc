// SmolLM2 (Q4_1) with weights kept in their stored type against the same model expanded to fp32 at
// load (needs RIPPLEKV_SMOLLM2_GGUF): prefill logits are bit-identical (the GEMM path expands the
// very same fp32 values per slice), decode logits (one row, the GEMV path) agree within float
// rounding, and the stored model holds a fraction of the memory.

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "worker/engine/kv_cache.h"
#include "worker/engine/transformer.h"
#include "worker/model/model_loader.h"

namespace ripplekv::worker {
namespace {

struct LogitsRun {
  kernels::Tensor prefill;  // [n, vocab] logits of every prompt row
  kernels::Tensor decode;   // [1, vocab] logits of one more token
};

LogitsRun Logits(const Model& model, const std::vector<int32_t>& prompt, int32_t next) {
  auto t = Transformer::Create(model, {.num_threads = 2});
  EXPECT_TRUE(t.ok()) << t.status();
  KvCache cache(model.config, static_cast<int>(prompt.size()) + 1);
  auto prefill = t->Forward({.tokens = prompt, .logits = LogitRows::kAll}, cache);
  EXPECT_TRUE(prefill.ok()) << prefill.status();
  const std::vector<int32_t> one{next};
  auto decode = t->Forward({.tokens = one}, cache);
  EXPECT_TRUE(decode.ok()) << decode.status();
  return {std::move(prefill->logits), std::move(decode->logits)};
}

TEST(StoredWeightsTest, SmolLm2StoredWeightsGiveTheLogitsOfFp32Weights) {
  const char* path = std::getenv("RIPPLEKV_SMOLLM2_GGUF");
  if (path == nullptr || *path == '\0') GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set";
  auto stored = LoadModel(path, WeightStorage::kStored);
  auto f32 = LoadModel(path, WeightStorage::kF32);
  ASSERT_TRUE(stored.ok() && f32.ok()) << stored.status() << f32.status();
  // The Q4_1 file is ~98 MB; fp32 matrices take ~540 MB.
  EXPECT_LT(WeightBytes(*stored) * 4, WeightBytes(*f32));

  std::vector<int32_t> prompt(48);
  std::iota(prompt.begin(), prompt.end(), 1000);  // arbitrary in-vocabulary ids
  const LogitsRun a = Logits(*stored, prompt, 2024);
  const LogitsRun b = Logits(*f32, prompt, 2024);
  ASSERT_EQ(a.prefill.shape(), b.prefill.shape());
  EXPECT_EQ(std::memcmp(a.prefill.data(), b.prefill.data(), a.prefill.numel() * sizeof(float)), 0)
      << "prefill logits differ";
  ASSERT_EQ(a.decode.shape(), b.decode.shape());
  float max_diff = 0.0f;
  for (int64_t i = 0; i < a.decode.numel(); ++i) {
    max_diff = std::max(max_diff, std::fabs(a.decode.data()[i] - b.decode.data()[i]));
  }
  EXPECT_LT(max_diff, 1e-3f) << "decode logits";
}

}  // namespace
}  // namespace ripplekv::worker
