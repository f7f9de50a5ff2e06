#include "worker/calibration/prepared_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/worker/engine/tiny_model.h"

namespace ripplekv::worker {
namespace {

class PreparedCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeTinyModel({.n_layers = 2});
    transformer_ = std::make_unique<Transformer>(Transformer::Create(model_, {}).value());
  }
  PreparedSampleCache::Prepare Maker(int sample, std::atomic<int>* calls = nullptr) {
    return [this, sample, calls]() {
      if (calls) ++*calls;
      const std::vector<int32_t> context(16, 3 + sample), probe(4, 5);
      return SampleCalibrator::Prepare(*transformer_, sample, context, probe, PerturbMode::kCache);
    };
  }
  int64_t OneSampleBytes() {
    return SampleCalibrator::Prepare(*transformer_, 0, std::vector<int32_t>(16, 3),
                                     std::vector<int32_t>(4, 5), PerturbMode::kCache)
        .value()
        ->memory_bytes();
  }
  Model model_;
  std::unique_ptr<Transformer> transformer_;
};

TEST_F(PreparedCacheTest, SecondRequestIsAHitAndSharesThePreparedSample) {
  PreparedSampleCache cache({});
  std::atomic<int> calls = 0;
  auto a = cache.GetOrPrepare("job1/0", Maker(0, &calls));
  auto b = cache.GetOrPrepare("job1/0", Maker(0, &calls));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cache.stats().hits, 1);
  EXPECT_EQ(cache.stats().misses, 1);
  EXPECT_GT(cache.stats().bytes, 0);
}

TEST_F(PreparedCacheTest, EvictsLeastRecentlyUsedBeyondTheByteBudget) {
  const int64_t one = OneSampleBytes();
  PreparedSampleCache cache({.max_bytes = 2 * one});
  ASSERT_TRUE(cache.GetOrPrepare("j/0", Maker(0)).ok());
  ASSERT_TRUE(cache.GetOrPrepare("j/1", Maker(1)).ok());
  ASSERT_TRUE(cache.GetOrPrepare("j/0", Maker(0)).ok());  // j/0 becomes most recent
  ASSERT_TRUE(cache.GetOrPrepare("j/2", Maker(2)).ok());  // evicts j/1
  EXPECT_TRUE(cache.Contains("j/0"));
  EXPECT_FALSE(cache.Contains("j/1"));
  EXPECT_TRUE(cache.Contains("j/2"));
  EXPECT_EQ(cache.stats().evictions, 1);
  EXPECT_LE(cache.stats().bytes, 2 * one);
  EXPECT_EQ(cache.Keys(), (std::vector<std::string>{"j/2", "j/0"}));
}

TEST_F(PreparedCacheTest, EntryLargerThanTheBudgetIsReturnedButNotKept) {
  PreparedSampleCache cache({.max_bytes = 10});
  auto a = cache.GetOrPrepare("j/0", Maker(0));
  ASSERT_TRUE(a.ok());
  EXPECT_NE(a->get(), nullptr);
  EXPECT_FALSE(cache.Contains("j/0"));
  EXPECT_EQ(cache.stats().bytes, 0);
}

TEST_F(PreparedCacheTest, FailedPrepareIsReturnedAndNotCached) {
  PreparedSampleCache cache({});
  auto bad = cache.GetOrPrepare("j/0", [] {
    return StatusOr<std::unique_ptr<SampleCalibrator>>(absl::InvalidArgumentError("no"));
  });
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(cache.Contains("j/0"));
  EXPECT_TRUE(cache.GetOrPrepare("j/0", Maker(0)).ok());
}

TEST_F(PreparedCacheTest, EraseWithPrefixDropsOneJob) {
  PreparedSampleCache cache({});
  ASSERT_TRUE(cache.GetOrPrepare("a/0", Maker(0)).ok());
  ASSERT_TRUE(cache.GetOrPrepare("b/0", Maker(1)).ok());
  cache.EraseWithPrefix("a/");
  EXPECT_FALSE(cache.Contains("a/0"));
  EXPECT_TRUE(cache.Contains("b/0"));
  EXPECT_EQ(cache.stats().entries, 1);
}

TEST_F(PreparedCacheTest, ConcurrentRequestsForOneKeyPrepareOnce) {
  PreparedSampleCache cache({});
  std::atomic<int> calls = 0;
  std::vector<std::thread> threads;
  std::vector<const SampleCalibrator*> got(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] { got[i] = cache.GetOrPrepare("j/0", Maker(0, &calls))->get(); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls, 1);
  for (auto* p : got) EXPECT_EQ(p, got[0]);
}

}  // namespace
}  // namespace ripplekv::worker
