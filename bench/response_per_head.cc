// Do budgets per KV head lower the joint KL at equal memory? (docs/BUDGETS.md, "Per-head budgets,
// measured"; issue: response profiles, the per-head response.)
//
//   ripplekv-response-per-head --model M [--selector snapkv|h2o] [--calib-data mixed]
//     [--calib-samples 8] [--calib-context 512] [--calib-probe 32] --eval-data TEXT|BUILTIN
//     [--eval-samples 8] [--eval-context 1024] [--eval-probe 64] [--averages 64,128,256]
//     [--threads 1] [--json FILE]
//
// 1. On the calibration samples (a response calibration's default shape), every layer's response
//    curve (RunLayer, the selector's resolved default grid) and every (layer, KV head)'s curve
//    (RunHeadResponse: that head alone compressed), each the mean over samples.
// 2. For each average budget B, the optimal allocation of the layer curves (L budgets, total L*B)
//    and of the head curves (L*H budgets, total L*H*B: the same memory), both within
//    [the selector's minimum, calibration context]. Predicted: the layer map's sum of layer
//    curves, the head map's sum of head curves, and the layer map's sum of head curves (every head
//    of layer l at b_l), which predicts the layer map in the head curves' terms.
// 3. On held-out samples (the eval shape), the joint KL of both maps, every layer and head
//    compressed at once (RunHeadMap; the layer map with equal heads), and of the layer map by the
//    naive route (RunCompressedMap, a fresh prefill) as a check of the masked one. Reported per B:
//    the means, the paired mean difference (head - layer) with a percentile bootstrap 95% interval
//    over samples, and the samples where the head map loses less.
//
// Results to stdout (a markdown table), progress to stderr; exit 1 on any error.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/response_bench.h"
#include "method/calibration_params.h"
#include "method/resampling.h"
#include "method/response_allocation.h"
#include "nlohmann/json.hpp"
#include "worker/calibration/sample_calibrator.h"
#include "worker/data/calibration_data.h"
#include "worker/engine/open_engine.h"

namespace ripplekv {
namespace {

struct Args {
  std::string model, selector = "snapkv", calib_data = "mixed", eval_data, json;
  int64_t calib_samples = 8, calib_context = 512, calib_probe = 32;
  int64_t eval_samples = 8, eval_context = 1024, eval_probe = 64;
  std::vector<int> averages = {64, 128, 256};
  int threads = 1;
};

int Fail(const Status& s) {
  std::fprintf(stderr, "response-per-head: %s\n", s.ToString().c_str());
  return 1;
}

using bench::BootstrapMeanInterval;
using bench::LoadSamples;
using bench::Mean;
using bench::Seconds;

int Run(const Args& args) {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<method::ResponseSelector> selector = method::ParseResponseSelector(args.selector);
  if (!selector.ok()) return Fail(selector.status());
  StatusOr<std::unique_ptr<worker::Engine>> engine =
      worker::OpenEngine(args.model, {.num_threads = args.threads});
  if (!engine.ok()) return Fail(engine.status());
  const worker::Transformer& model = *(*engine)->transformer;
  const int n_layers = model.config().n_layers, n_heads = model.config().n_kv_heads;

  // The calibration: the selector's default grid at the calibration context.
  method::CalibrationParams params;
  params.objective = method::Objective::kResponse;
  params.selector = *selector;
  params.samples = args.calib_samples;
  params.context_len = args.calib_context;
  params.probe_len = args.calib_probe;
  params = method::ResolveResponseGrid(params);
  const worker::TrialOptions trials = worker::TrialOptionsOf(params);
  const worker::ResponseTrials& response = *trials.response;
  const size_t grid = params.budgets.size();
  StatusOr<worker::CalibrationSet> calib = LoadSamples(args.calib_data, **engine, params);
  if (!calib.ok()) return Fail(calib.status());

  // Sums over samples of each layer's and each (layer, head)'s KL at each grid budget.
  std::vector<std::vector<double>> layer_sum(n_layers, std::vector<double>(grid, 0.0));
  std::vector<std::vector<double>> head_sum(static_cast<size_t>(n_layers) * n_heads,
                                            std::vector<double>(grid, 0.0));
  double layer_seconds = 0.0, head_seconds = 0.0;
  for (size_t s = 0; s < calib->samples.size(); ++s) {
    const worker::CalibrationSample& sample = calib->samples[s];
    StatusOr<std::unique_ptr<worker::SampleCalibrator>> cal = worker::SampleCalibrator::Prepare(
        model, static_cast<int>(s), sample.context, sample.probe, worker::PerturbMode::kCache,
        worker::ObserverOptionsFor(trials));
    if (!cal.ok()) return Fail(cal.status());
    for (int l = 0; l < n_layers; ++l) {
      auto t0 = std::chrono::steady_clock::now();
      StatusOr<std::vector<double>> kl = (*cal)->RunLayer(l, trials);
      if (!kl.ok()) return Fail(kl.status());
      for (size_t t = 0; t < grid; ++t) layer_sum[l][t] += (*kl)[t];
      layer_seconds += Seconds(t0);
      t0 = std::chrono::steady_clock::now();
      for (int h = 0; h < n_heads; ++h) {
        StatusOr<std::vector<double>> head = (*cal)->RunHeadResponse(l, h, response);
        if (!head.ok()) return Fail(head.status());
        for (size_t t = 0; t < grid; ++t) head_sum[l * n_heads + h][t] += (*head)[t];
      }
      head_seconds += Seconds(t0);
    }
    std::fprintf(stderr, "calibration sample %zu/%zu (%.0f s)\n", s + 1, calib->samples.size(),
                 Seconds(start));
  }
  const double n_calib = static_cast<double>(calib->samples.size());
  std::vector<method::ResponseCurve> layer_curves, head_curves;
  for (const std::vector<double>& sum : layer_sum) {
    method::ResponseCurve curve{params.budgets, sum};
    for (double& kl : curve.kl) kl /= n_calib;
    layer_curves.push_back(std::move(curve));
  }
  for (const std::vector<double>& sum : head_sum) {
    method::ResponseCurve curve{params.budgets, sum};
    for (double& kl : curve.kl) kl /= n_calib;
    head_curves.push_back(std::move(curve));
  }

  // The optimal maps at each B, at equal memory.
  const method::ApportionBounds bounds{.min_tokens = method::MinResponseBudget(params.selector),
                                       .max_tokens = args.calib_context};
  StatusOr<method::ResponseAllocator> by_layer =
      method::ResponseAllocator::Create(layer_curves, bounds);
  if (!by_layer.ok()) return Fail(by_layer.status());
  StatusOr<method::ResponseAllocator> by_head =
      method::ResponseAllocator::Create(head_curves, bounds);
  if (!by_head.ok()) return Fail(by_head.status());
  struct Maps {
    method::ResponseAllocation layer, head;
    double layer_in_heads = 0.0;  // the head curves summed at the layer map's budgets
    std::vector<std::vector<int>> layer_map, head_map;  // [L][H]
  };
  std::vector<Maps> maps;
  for (int b : args.averages) {
    Maps m;
    StatusOr<method::ResponseAllocation> layer = by_layer->Allocate(int64_t{n_layers} * b);
    if (!layer.ok()) return Fail(layer.status());
    StatusOr<method::ResponseAllocation> head = by_head->Allocate(int64_t{n_layers} * n_heads * b);
    if (!head.ok()) return Fail(head.status());
    m.layer = *std::move(layer);
    m.head = *std::move(head);
    for (int l = 0; l < n_layers; ++l) {
      m.layer_map.emplace_back(n_heads, static_cast<int>(m.layer.tokens[l]));
      m.head_map.emplace_back();
      for (int h = 0; h < n_heads; ++h) {
        m.layer_in_heads += method::InterpolateResponse(head_curves[l * n_heads + h],
                                                        static_cast<double>(m.layer.tokens[l]));
        m.head_map.back().push_back(static_cast<int>(m.head.tokens[l * n_heads + h]));
      }
    }
    maps.push_back(std::move(m));
  }

  // The joint KL of both maps on held-out samples.
  method::CalibrationParams eval_params = params;
  eval_params.samples = args.eval_samples;
  eval_params.context_len = args.eval_context;
  eval_params.probe_len = args.eval_probe;
  StatusOr<worker::CalibrationSet> eval = LoadSamples(args.eval_data, **engine, eval_params);
  if (!eval.ok()) return Fail(eval.status());
  const auto eval_start = std::chrono::steady_clock::now();
  std::vector<std::vector<double>> joint_layer(maps.size()), joint_head(maps.size()),
      naive_layer(maps.size());
  for (size_t s = 0; s < eval->samples.size(); ++s) {
    const worker::CalibrationSample& sample = eval->samples[s];
    StatusOr<std::unique_ptr<worker::SampleCalibrator>> cal = worker::SampleCalibrator::Prepare(
        model, static_cast<int>(s), sample.context, sample.probe, worker::PerturbMode::kCache,
        worker::ObserverOptionsFor(trials));
    if (!cal.ok()) return Fail(cal.status());
    for (size_t m = 0; m < maps.size(); ++m) {
      StatusOr<double> layer = (*cal)->RunHeadMap(maps[m].layer_map, response);
      if (!layer.ok()) return Fail(layer.status());
      StatusOr<double> head = (*cal)->RunHeadMap(maps[m].head_map, response);
      if (!head.ok()) return Fail(head.status());
      std::vector<int> layer_budgets(maps[m].layer.tokens.begin(), maps[m].layer.tokens.end());
      StatusOr<double> naive = (*cal)->RunCompressedMap(layer_budgets, response);
      if (!naive.ok()) return Fail(naive.status());
      joint_layer[m].push_back(*layer);
      joint_head[m].push_back(*head);
      naive_layer[m].push_back(*naive);
    }
    std::fprintf(stderr, "eval sample %zu/%zu (%.0f s)\n", s + 1, eval->samples.size(),
                 Seconds(start));
  }
  const double eval_seconds = Seconds(eval_start);

  nlohmann::ordered_json out = {
      {"model", args.model},
      {"selector", std::string(method::ResponseSelectorName(params.selector))},
      {"calibration", calib->description},
      {"evaluation", eval->description},
      {"grid", params.budgets},
      {"bounds", {bounds.min_tokens, *bounds.max_tokens}},
      {"layer_curves", nlohmann::json::array()},
      {"head_curves", nlohmann::json::array()},
      {"rows", nlohmann::json::array()}};
  for (const method::ResponseCurve& c : layer_curves) out["layer_curves"].push_back(c.kl);
  for (const method::ResponseCurve& c : head_curves) out["head_curves"].push_back(c.kl);

  // How far the heads of a layer are from additive: sum over heads / the layer, at each grid
  // budget below the context, over layers.
  std::printf("Calibration: %s; evaluation: %s; %s, grid", calib->description.c_str(),
              eval->description.c_str(), args.selector.c_str());
  for (int64_t b : params.budgets) std::printf(" %lld", static_cast<long long>(b));
  std::printf("\n\nSum of the head curves / the layer curve (all layers), per grid budget:");
  std::vector<double> head_over_layer;
  for (size_t t = 0; t + 1 < grid; ++t) {
    double heads = 0.0, layers = 0.0;
    for (int l = 0; l < n_layers; ++l) {
      layers += layer_curves[l].kl[t];
      for (int h = 0; h < n_heads; ++h) heads += head_curves[l * n_heads + h].kl[t];
    }
    head_over_layer.push_back(heads / layers);
    std::printf(" %lld: %.3f", static_cast<long long>(params.budgets[t]), heads / layers);
  }
  out["head_sum_over_layer"] = head_over_layer;
  std::printf("\n\n");
  std::printf(
      "| B | predicted, layer map | predicted, head map | layer map in head curves | "
      "joint, layer map | joint, head map | head - layer (95%% CI) | relative | head map wins "
      "| joint, layer map (naive) |\n");
  std::printf("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (size_t m = 0; m < maps.size(); ++m) {
    std::vector<double> diff(joint_layer[m].size());
    int wins = 0;
    for (size_t s = 0; s < diff.size(); ++s) {
      diff[s] = joint_head[m][s] - joint_layer[m][s];
      wins += diff[s] < 0.0;
    }
    const auto [lo, hi] = BootstrapMeanInterval(diff);
    const double jl = Mean(joint_layer[m]), jh = Mean(joint_head[m]), d = Mean(diff);
    std::printf(
        "| %d | %.4f | %.4f | %.4f | %.4f | %.4f | %+.4f [%+.4f, %+.4f] | %+.1f%% | %d/%zu | "
        "%.4f |\n",
        args.averages[m], maps[m].layer.predicted_kl, maps[m].head.predicted_kl,
        maps[m].layer_in_heads, jl, jh, d, lo, hi, 100.0 * d / jl, wins, diff.size(),
        Mean(naive_layer[m]));
    out["rows"].push_back({{"average", args.averages[m]},
                           {"layer_map", maps[m].layer.tokens},
                           {"head_map", maps[m].head_map},
                           {"predicted_layer_map", maps[m].layer.predicted_kl},
                           {"predicted_head_map", maps[m].head.predicted_kl},
                           {"hull_head_map", maps[m].head.hull_kl},
                           {"layer_map_in_head_curves", maps[m].layer_in_heads},
                           {"joint_layer_map", joint_layer[m]},
                           {"joint_head_map", joint_head[m]},
                           {"joint_layer_map_naive", naive_layer[m]},
                           {"difference_mean", d},
                           {"difference_ci95", {lo, hi}},
                           {"head_map_wins", wins}});
  }
  const double seconds = Seconds(start);
  out["seconds"] = {{"total", seconds},
                    {"layer_curves", layer_seconds},
                    {"head_curves", head_seconds},
                    {"evaluation", eval_seconds}};
  std::fprintf(stderr, "%.0f s (layer curves %.0f s, head curves %.0f s, evaluation %.0f s)\n",
               seconds, layer_seconds, head_seconds, eval_seconds);
  if (!args.json.empty()) {
    std::ofstream(args.json) << out.dump(1) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace ripplekv

int main(int argc, char** argv) {
  ripplekv::Args args;
  CLI::App app{"Per-layer against per-KV-head response allocation at equal memory"};
  app.add_option("--model", args.model, "GGUF model")->required();
  app.add_option("--selector", args.selector, "snapkv, h2o or streaming")->capture_default_str();
  app.add_option("--calib-data", args.calib_data, "Text file or built-in set of the calibration")
      ->capture_default_str();
  app.add_option("--calib-samples", args.calib_samples, "Calibration samples")
      ->capture_default_str();
  app.add_option("--calib-context", args.calib_context, "Calibration context tokens C")
      ->capture_default_str();
  app.add_option("--calib-probe", args.calib_probe, "Calibration probe tokens W")
      ->capture_default_str();
  app.add_option("--eval-data", args.eval_data, "Text file or built-in set of the evaluation")
      ->required();
  app.add_option("--eval-samples", args.eval_samples, "Evaluation samples")->capture_default_str();
  app.add_option("--eval-context", args.eval_context, "Evaluation context tokens")
      ->capture_default_str();
  app.add_option("--eval-probe", args.eval_probe, "Evaluation probe tokens")->capture_default_str();
  app.add_option("--averages", args.averages, "Average budgets B")->delimiter(',');
  app.add_option("--threads", args.threads, "CPU threads")->capture_default_str();
  app.add_option("--json", args.json, "Also write the curves, maps and every sample as JSON");
  CLI11_PARSE(app, argc, argv);
  return ripplekv::Run(args);
}
