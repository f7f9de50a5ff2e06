#include "worker/calibration/calibration_run.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ripplekv::worker {

method::ProfileModel ProfileModelOf(const ModelConfig& config, std::string hash) {
  return {.hash = std::move(hash),
          .architecture = config.architecture,
          .name = config.name,
          .n_layers = config.n_layers,
          .n_kv_heads = config.n_kv_heads,
          .head_dim = config.head_dim,
          .d_model = config.d_model,
          .vocab_size = config.vocab_size};
}

StatusOr<std::vector<TrialKl>> RunCalibration(const Transformer& model,
                                              std::span<const CalibrationInput> samples,
                                              const CalibrationOptions& options,
                                              const CalibrationProgress& progress) {
  if (samples.empty()) return absl::InvalidArgumentError("calibration needs at least one sample");
  const int n_layers = model.config().n_layers;
  std::vector<int> layers = options.layers;
  if (layers.empty()) {
    for (int l = 0; l < n_layers; ++l) layers.push_back(l);
  }
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  for (int l : layers) {
    if (l < 0 || l >= n_layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("--layers: layer ", l, " outside [0, ", n_layers, ")"));
    }
  }
  const int64_t total = static_cast<int64_t>(samples.size()) * layers.size();
  int64_t done = 0;
  std::vector<TrialKl> results;
  results.reserve(total * options.trials.trials);
  if (options.first_sample < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("first sample index must be >= 0, got ", options.first_sample));
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    const int s = options.first_sample + static_cast<int>(i);
    ASSIGN_OR_RETURN(std::unique_ptr<SampleCalibrator> cal,
                     SampleCalibrator::Prepare(model, s, samples[i].context, samples[i].probe,
                                               options.mode, ObserverOptionsFor(options.trials)));
    for (int l : layers) {
      ASSIGN_OR_RETURN(std::vector<double> kl, options.naive ? cal->RunLayerNaive(l, options.trials)
                                                             : cal->RunLayer(l, options.trials));
      for (int t = 0; t < static_cast<int>(kl.size()); ++t) {
        results.push_back({s, l, t, kl[t]});
      }
      if (progress) progress(++done, total);
    }
  }
  return results;
}

}  // namespace ripplekv::worker
