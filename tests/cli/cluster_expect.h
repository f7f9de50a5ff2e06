#pragma once
// Profile checks shared by the cluster tests: a local `ripplekv calibrate --json` reference, the
// scheduler's profile fetched with `ripplekv profile get --json`, and their comparison.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli/process_harness.h"

namespace ripplekv::testing {

// `ripplekv calibrate --json --threads 1 PARAMS` on `model`; null JSON (with a test failure) on
// error.
inline nlohmann::json LocalCalibrateJson(const fs::path& dir, const std::string& model,
                                         const std::vector<std::string>& params) {
  std::vector<std::string> args = {"calibrate", "--model", model, "--json", "--threads", "1"};
  args.insert(args.end(), params.begin(), params.end());
  const CliResult r = RunCli(dir, "calibrate", args, std::chrono::seconds(300));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return nullptr;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j.is_discarded() ? nlohmann::json() : j;
}

// The latest profile of `hash` from the scheduler at `address`; null JSON on error.
inline nlohmann::json FetchProfileJson(const fs::path& dir, const std::string& address,
                                       const std::string& hash) {
  const CliResult r = RunCli(
      dir, "profile", {"profile", "get", "--scheduler", address, "--model-hash", hash, "--json"},
      std::chrono::seconds(20));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return nullptr;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j.is_discarded() ? nlohmann::json() : j;
}

// The remote profile equals the local one bit for bit: per layer mean, standard error,
// per-sample means and count, and the method parameters. Exact doubles: the profile JSON writes
// shortest round-trip numbers, so equal text is equal bits.
inline void ExpectSameProfile(const nlohmann::json& remote, const nlohmann::json& local,
                              size_t layers) {
  const auto& a = local["layers"];
  const auto& b = remote["layers"];
  ASSERT_EQ(a.size(), layers);
  ASSERT_EQ(b.size(), a.size()) << remote.dump();
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("layer entry " + std::to_string(i));
    EXPECT_EQ(b[i]["layer"], a[i]["layer"]);
    EXPECT_EQ(b[i]["mean_kl"].dump(), a[i]["mean_kl"].dump());
    EXPECT_EQ(b[i]["stderr"].dump(), a[i]["stderr"].dump());
    EXPECT_EQ(b[i]["per_sample_mean"], a[i]["per_sample_mean"]);
    EXPECT_EQ(b[i]["count"], a[i]["count"]);
    // A response profile's points (absent from both in a noise profile), to the bit.
    EXPECT_EQ(b[i].value("response", nlohmann::json()).dump(),
              a[i].value("response", nlohmann::json()).dump());
    EXPECT_EQ(b[i].value("head_response", nlohmann::json()).dump(),
              a[i].value("head_response", nlohmann::json()).dump());
    EXPECT_GT(a[i]["mean_kl"].get<double>(), 0.0);
  }
  // Parameters, the data description (source, shape and token fingerprint, as the workers
  // derived the samples) and the model summary agree exactly; only created_at differs.
  EXPECT_EQ(remote["params"], local["params"]);
  EXPECT_EQ(remote["model"], local["model"]);
  EXPECT_EQ(remote["tool_version"], local["tool_version"]);
}

}  // namespace ripplekv::testing
