// Is the sum of the layers' responses a good predictor of what a budget map costs jointly?
// (docs/BUDGETS.md, "Is the sum a good predictor?"; issue: response profiles.)
//
//   ripplekv-response-additivity --model M --profile RESPONSE.json --data TEXT|BUILTIN
//     [--samples 16] [--context-len 1024] [--probe 64] [--averages 64,128,256] [--threads 1]
//     [--json FILE]
//
// The profile gives the maps (method::ComputeBudgetMap, as `ripplekv budgets` and `eval`'s resp+S
// make them) and the selector. For each sample of the data (windows of C + W tokens, as calibrate
// reads them) and each layer, the sample's own response curve is measured on the profile's grid
// (clipped to C, the full cache appended); then for each average budget B:
//   predicted = sum over layers of the sample's own curve at the map's budget (log-interpolated),
//   joint     = the probe's KL with every layer compressed to its map budget at once.
// Reported per B: the means of both, their ratio (joint / predicted), Pearson's and Spearman's
// correlation over the samples, and the profile's own prediction (its frontier at B: the mean
// curves of the calibration text at its own C), whose gap to the joint mean is what a user of
// `ripplekv budgets --frontier` sees on other text at another length.

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/response_bench.h"
#include "method/budget_map.h"
#include "method/calibration_params.h"
#include "method/profile.h"
#include "method/resampling.h"
#include "method/response_allocation.h"
#include "nlohmann/json.hpp"
#include "worker/calibration/sample_calibrator.h"
#include "worker/data/calibration_data.h"
#include "worker/engine/open_engine.h"

namespace ripplekv {
namespace {

struct Args {
  std::string model, profile, data, json;
  int64_t samples = 16, context_len = 1024, probe = 64;
  std::vector<int> averages = {64, 128, 256};
  int threads = 1;
};

int Fail(const Status& s) {
  std::fprintf(stderr, "response-additivity: %s\n", s.ToString().c_str());
  return 1;
}

using bench::LoadSamples;
using bench::Mean;

int Run(const Args& args) {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<method::SensitivityProfile> profile = method::ReadProfileFile(args.profile);
  if (!profile.ok()) return Fail(profile.status());
  if (profile->params.objective != method::Objective::kResponse) {
    return Fail(absl::InvalidArgumentError(args.profile + " is not a response profile"));
  }
  StatusOr<std::unique_ptr<worker::Engine>> engine =
      worker::OpenEngine(args.model, {.num_threads = args.threads});
  if (!engine.ok()) return Fail(engine.status());
  const worker::Transformer& model = *(*engine)->transformer;
  const int n_layers = model.config().n_layers;

  // The profile's selector on its grid, clipped to this context.
  method::CalibrationParams params = profile->params;
  params.context_len = args.context_len;
  params.probe_len = args.probe;
  params.samples = args.samples;
  params.budgets.pop_back();  // the profile's full cache; this context's is appended
  params = method::ResolveResponseGrid(params);
  const worker::TrialOptions trials = worker::TrialOptionsOf(params);
  const worker::ResponseTrials& response = *trials.response;

  StatusOr<worker::CalibrationSet> set = LoadSamples(args.data, **engine, params);
  if (!set.ok()) return Fail(set.status());

  // The maps, one per average budget, as eval's resp+S makes them.
  std::vector<std::vector<int>> maps;
  std::vector<double> profile_prediction;
  StatusOr<std::vector<method::ResponseCurve>> profile_curves = method::ResponseCurves(*profile);
  if (!profile_curves.ok()) return Fail(profile_curves.status());
  for (int b : args.averages) {
    method::BudgetOptions options;
    options.average_tokens = b;
    options.min_tokens = std::min<int64_t>(method::MinResponseBudget(params.selector), b);
    StatusOr<method::BudgetMap> map = method::ComputeBudgetMap(*profile, options);
    if (!map.ok()) return Fail(map.status());
    maps.emplace_back(map->tokens.begin(), map->tokens.end());
    double sum = 0.0;
    for (int l = 0; l < n_layers; ++l) {
      sum += method::InterpolateResponse((*profile_curves)[l], static_cast<double>(map->tokens[l]));
    }
    profile_prediction.push_back(sum);
  }

  std::vector<std::vector<double>> predicted(maps.size()), joint(maps.size());
  for (size_t s = 0; s < set->samples.size(); ++s) {
    const worker::CalibrationSample& sample = set->samples[s];
    StatusOr<std::unique_ptr<worker::SampleCalibrator>> cal = worker::SampleCalibrator::Prepare(
        model, static_cast<int>(s), sample.context, sample.probe, worker::PerturbMode::kCache,
        worker::ObserverOptionsFor(trials));
    if (!cal.ok()) return Fail(cal.status());
    std::vector<method::ResponseCurve> curves;
    for (int l = 0; l < n_layers; ++l) {
      StatusOr<std::vector<double>> kl = (*cal)->RunLayer(l, trials);
      if (!kl.ok()) return Fail(kl.status());
      curves.push_back({params.budgets, *kl});
    }
    for (size_t m = 0; m < maps.size(); ++m) {
      double sum = 0.0;
      for (int l = 0; l < n_layers; ++l) {
        sum += method::InterpolateResponse(curves[l], static_cast<double>(maps[m][l]));
      }
      StatusOr<double> kl = (*cal)->RunCompressedMap(maps[m], response);
      if (!kl.ok()) return Fail(kl.status());
      predicted[m].push_back(sum);
      joint[m].push_back(*kl);
    }
    std::fprintf(stderr, "sample %zu/%zu\n", s + 1, set->samples.size());
  }

  nlohmann::ordered_json out = {
      {"profile", args.profile},
      {"selector", std::string(method::ResponseSelectorName(params.selector))},
      {"data", set->description},
      {"context_len", args.context_len},
      {"probe_len", args.probe},
      {"grid", params.budgets},
      {"rows", nlohmann::json::array()}};
  std::printf(
      "| average B | samples | predicted (own curves) | joint | joint / predicted | "
      "Pearson r | Spearman rho | profile's prediction | joint / profile's |\n");
  std::printf("|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (size_t m = 0; m < maps.size(); ++m) {
    const double p = Mean(predicted[m]), j = Mean(joint[m]);
    const double r = method::PearsonCorrelation(predicted[m], joint[m]);
    const double rho = method::SpearmanCorrelation(predicted[m], joint[m]);
    std::printf("| %d | %zu | %.4f | %.4f | %.2f | %.3f | %.3f | %.4f | %.2f |\n", args.averages[m],
                predicted[m].size(), p, j, j / p, r, rho, profile_prediction[m],
                j / profile_prediction[m]);
    out["rows"].push_back({{"average", args.averages[m]},
                           {"map", maps[m]},
                           {"predicted", predicted[m]},
                           {"joint", joint[m]},
                           {"pearson", r},
                           {"spearman", rho},
                           {"profile_prediction", profile_prediction[m]}});
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "%.0f s\n", seconds);
  if (!args.json.empty()) {
    std::ofstream(args.json) << out.dump(1) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace ripplekv

int main(int argc, char** argv) {
  ripplekv::Args args;
  CLI::App app{"Joint KL of response maps against the sum of the layers' responses"};
  app.add_option("--model", args.model, "GGUF model")->required();
  app.add_option("--profile", args.profile, "Response profile JSON (the maps and the selector)")
      ->required();
  app.add_option("--data", args.data, "Text file or built-in set of the samples")->required();
  app.add_option("--samples", args.samples, "Samples")->capture_default_str();
  app.add_option("--context-len", args.context_len, "Context tokens C")->capture_default_str();
  app.add_option("--probe", args.probe, "Probe tokens W")->capture_default_str();
  app.add_option("--averages", args.averages, "Average budgets B")->delimiter(',');
  app.add_option("--threads", args.threads, "CPU threads")->capture_default_str();
  app.add_option("--json", args.json, "Also write every sample's values as JSON");
  CLI11_PARSE(app, argc, argv);
  return ripplekv::Run(args);
}
