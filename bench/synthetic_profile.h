#pragma once
// A sensitivity profile of a made-up model, stored as a scheduler's first profile version, for
// benchmarks and tests of what comes after calibration (budget maps, rollouts) without running
// one. Sensitivities are distinct per layer (0.001 * (1 + (7 l) mod L) nats), so the budget map
// is not flat.

#include <cstdint>
#include <string>

#include "base/status.h"
#include "method/profile.h"
#include "store/store.h"

namespace ripplekv::bench {

// Writes the profile of model `model_hash` with `n_layers` layers into the store at `db_path`
// (created if missing; the store must not be open elsewhere).
[[nodiscard]] inline Status SeedSyntheticProfile(const std::string& db_path,
                                                 const std::string& model_hash, int n_layers) {
  method::SensitivityProfile p;
  p.model = {.hash = model_hash,
             .architecture = "llama",
             .name = "synthetic",
             .n_layers = n_layers,
             .n_kv_heads = 8,
             .head_dim = 128,
             .d_model = 4096,
             .vocab_size = 32000};
  p.params.alpha = 0.5;
  p.params.trials = 1;
  p.params.samples = 1;
  p.params.context_len = 64;
  p.params.probe_len = 8;
  p.params.data_source = "synthetic";
  for (int l = 0; l < n_layers; ++l) {
    p.params.layers.push_back(l);
    const double kl = 0.001 * (1 + (l * 7) % n_layers);
    p.layers.push_back({.layer = l, .mean_kl = kl, .count = 1, .per_sample_mean = {kl}});
  }
  p.created_at = "2026-01-01T00:00:00Z";
  p.tool_version = "ripplekv synthetic";
  ASSIGN_OR_RETURN(std::string json, method::ProfileToJson(p));
  ASSIGN_OR_RETURN(std::unique_ptr<store::Store> store, store::OpenStore(db_path));
  return store->PutProfileVersion(model_hash, json).status();
}

}  // namespace ripplekv::bench
