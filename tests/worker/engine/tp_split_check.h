#pragma once
// The check of a model split over GPUs, for every way the ranks are formed (processes under
// mpirun: tp_device_test.cc; threads of one process: device_engine_test.cc): run by every rank
// together, each with its own CUDA session and the group's NCCL communicator, against the whole
// model on the CPU: the logits of the rank's vocabulary slice and a calibration task (fp32
// weights on the devices).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops/communicator.h"
#include "kernels/ops/devices.h"
#include "tests/worker/engine/tiny_model.h"
#include "worker/calibration/calibration_run.h"
#include "worker/engine/transformer.h"
#include "worker/model/model_shard.h"

namespace ripplekv::worker::tp_split_check {

inline std::vector<int32_t> Tokens(int n, int vocab, int first) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (first + i * 7919) % vocab;
  return t;
}

inline void ExpectSplitMatchesTheWholeModel(const kernels::DeviceSession& session,
                                            kernels::Communicator& nccl) {
  const Model full = testing::MakeTinyModel({.n_layers = 3, .n_heads = 4, .n_kv_heads = 2});
  auto shard = ShardModel(full, nccl.rank(), nccl.size());
  ASSERT_TRUE(shard.ok());
  auto whole = Transformer::Create(full, {.num_threads = 1});
  auto split = Transformer::Create(*shard, {.num_threads = 1,
                                            .device = &session,
                                            .device_weights = kernels::DType::kF32,
                                            .communicator = &nccl});
  ASSERT_TRUE(whole.ok() && split.ok()) << split.status();

  const std::vector<int32_t> tokens = Tokens(29, full.config.vocab_size, 3);
  KvCache cpu_cache = whole->NewCache(29), device_cache = split->NewCache(29);
  auto want = whole->Forward({.tokens = tokens, .logits = LogitRows::kAll}, cpu_cache);
  auto got = split->Forward({.tokens = tokens, .logits = LogitRows::kAll}, device_cache);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  const kernels::Tensor got_host = kernels::OnHost(std::move(got->logits));
  const int vocab = full.config.vocab_size, slice = shard->config.vocab_size;
  float scale = 0.0f, worst = 0.0f;
  for (int64_t i = 0; i < 29; ++i) {
    for (int j = 0; j < slice; ++j) {
      const float w = want->logits.data()[i * vocab + shard->shard.first_vocab + j];
      scale = std::max(scale, std::abs(w));
      worst = std::max(worst, std::abs(got_host.data()[i * slice + j] - w));
    }
  }
  EXPECT_LE(worst, 1e-5f * scale);  // fp32 on both, sums in other orders

  const std::vector<CalibrationInput> samples = {{Tokens(40, vocab, 11), Tokens(8, vocab, 13)}};
  const CalibrationOptions options{.trials = {.alpha = 0.5f, .trials = 2, .seed = 7}};
  auto want_kl = RunCalibration(*whole, samples, options);
  auto got_kl = RunCalibration(*split, samples, options);
  ASSERT_TRUE(want_kl.ok() && got_kl.ok()) << got_kl.status();
  for (size_t i = 0; i < want_kl->size(); ++i) {
    // The device's noise differs from the CPU's by a few ulp (kernels/ops/noise.h).
    EXPECT_NEAR((*got_kl)[i].kl, (*want_kl)[i].kl, 1e-4 * (*want_kl)[i].kl) << i;
  }
}

}  // namespace ripplekv::worker::tp_split_check
