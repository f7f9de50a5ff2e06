#pragma once
// The fixture of the cluster tests that need the default model: skips (saying why) without
// RIPPLEKV_SMOLLM2_GGUF, gives each test a temporary directory and a LocalCluster in it (nothing
// started), and stops whatever the test started at the end. A suite that starts more in SetUp
// calls ModelClusterTest::SetUp() first and returns when IsSkipped().

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {

class ModelClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = TestModelPath();
    if (model_.empty()) {
      GTEST_SKIP() << "RIPPLEKV_SMOLLM2_GGUF is not set (path of SmolLM2-135M-Instruct.Q4_1.gguf)";
    }
    ASSERT_FALSE(tmp_.path().empty());
    cluster_ = std::make_unique<LocalCluster>(tmp_.path());
  }
  void TearDown() override {
    if (cluster_) cluster_->StopAll();
  }

  std::string model_;
  TempDir tmp_;
  std::unique_ptr<LocalCluster> cluster_;
};

// A proto JSON int64 is a string; an int32 a number.
inline int64_t JsonInt(const nlohmann::json& j) {
  if (j.is_string()) return std::stoll(j.get<std::string>());
  return j.is_number() ? j.get<int64_t>() : 0;
}

}  // namespace ripplekv::testing
