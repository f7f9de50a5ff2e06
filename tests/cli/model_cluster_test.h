#pragma once
// The fixture of the cluster tests that need the default model: skips (saying why) without
// RIPPLEKV_SMOLLM2_GGUF, gives each test a temporary directory and a LocalCluster in it (nothing
// started), and stops whatever the test started at the end. A suite that starts more in SetUp
// calls ModelClusterTest::SetUp() first and returns when IsSkipped().

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
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

  // The job as `ripplekv jobs --json` prints it; null when the scheduler does not answer.
  nlohmann::json Job(const std::string& id) {
    const CliResult r =
        RunCli(tmp_.path(), "jobs", {"jobs", "--scheduler", cluster_->address(), "--json"},
               std::chrono::seconds(10));
    if (r.exit_code != 0) return nullptr;
    const nlohmann::json all = nlohmann::json::parse(r.out, nullptr, false);
    if (all.is_discarded() || !all.contains("jobs")) return nullptr;
    for (const auto& job : all["jobs"]) {
      if (job.value("job_id", "") == id) return job;
    }
    return nullptr;
  }

  // `ripplekv watch` until the job ends (at most `timeout`); its exit code (0: SUCCEEDED).
  int Watch(const std::string& id, std::chrono::seconds timeout = std::chrono::seconds(300)) {
    const CliResult r = RunCli(tmp_.path(), "watch",
                               {"watch", "--scheduler", cluster_->address(), id}, timeout);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << cluster_->Logs();
    return r.exit_code;
  }

  std::string model_;
  TempDir tmp_;
  std::unique_ptr<LocalCluster> cluster_;
};

// The integer at `path` of a proto JSON object, e.g. JsonInt(job, {"progress", "tasks_done"}):
// an int64 is a string, an int32 a number, and a field left out (proto3 JSON omits zeros) is 0.
// Walks with contains(): operator[] of a const json on a missing key is undefined behaviour.
inline int64_t JsonInt(const nlohmann::json& j, std::initializer_list<const char*> path) {
  const nlohmann::json* at = &j;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return 0;
    at = &(*at)[key];
  }
  if (at->is_string()) return std::stoll(at->get<std::string>());
  return at->is_number() ? at->get<int64_t>() : 0;
}

}  // namespace ripplekv::testing
