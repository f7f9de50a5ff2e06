// ripplekv calibrate --model M [--data F | --builtin NAME] [--data-seed S] [--samples N]
//   [--context-len C] [--probe W] [--alpha A]
//   [--trials T] [--seed S] [--mode cache|prefill] [--layers LIST] [--threads N]
//   [--out PROFILE.json] [--plot FILE.svg] [--ratio R] [--naive] [--strict] [--json]
//   [--until-stable [--max-samples N]]
// Measures the per-layer value-cache sensitivity profile (docs/DESIGN.md §2) on this machine.
// stdout: the profile as a table (or the profile JSON with --json); stderr: progress and logs.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/method_flags.h"
#include "cli/model_session.h"
#include "cli/profile_view.h"
#include "cli/progress.h"
#include "method/budget_map.h"
#include "method/calibration_params.h"
#include "method/profile.h"
#include "method/profile_aggregate.h"
#include "spdlog/spdlog.h"
#include "worker/calibration/calibration_run.h"
#include "worker/calibration/until_stable.h"
#include "worker/data/calibration_data.h"
#include "worker/model/model_hash.h"

namespace ripplekv::cli {

namespace {

struct CalibrateArgs {
  std::string model;
  MethodFlags method;
  int threads = DefaultThreads();
  ModelFlags model_flags;  // --weights, --device, --device-weights
  std::string out;
  std::string plot;
  double ratio = 4.0;
  bool naive = false;
  bool json = false;
  bool until_stable = false;  // add --samples at a time until the budget shares are stable
  int max_samples = 64;       // the cap of --until-stable
};

// Writes --out and --plot, then prints the table (or the JSON with --json).
int WriteAndPrint(const CalibrateArgs& args, const method::SensitivityProfile& profile) {
  if (!args.out.empty()) {
    if (Status st = method::WriteProfileFile(args.out, profile); !st.ok()) return ReportError(st);
    spdlog::info("wrote profile {}", args.out);
  }
  if (!args.plot.empty()) {
    if (Status st = WriteProfilePlot(profile, args.ratio, args.plot); !st.ok()) {
      return ReportError(st);
    }
    spdlog::info("wrote plot {}", args.plot);
  }

  if (args.json) {
    auto json = method::ProfileToJson(profile);
    if (!json.ok()) return ReportError(json.status());
    std::fputs(json->c_str(), stdout);
    if (json->empty() || json->back() != '\n') std::fputc('\n', stdout);
    return kExitOk;
  }
  PrintProfileTable(profile, args.ratio);
  return kExitOk;
}

// The engine's options for the method's parameters (and --naive).
worker::CalibrationOptions CalibrationOptionsOf(const CalibrateArgs& args,
                                                const method::CalibrationParams& params) {
  worker::CalibrationOptions options;
  options.trials = worker::TrialOptionsOf(params);
  options.mode = params.mode;
  options.layers.assign(params.layers.begin(), params.layers.end());
  options.naive = args.naive;
  return options;
}

// The engine's inputs of a calibration set's samples.
std::vector<worker::CalibrationInput> InputsOf(const worker::CalibrationSet& set) {
  std::vector<worker::CalibrationInput> inputs;
  for (const auto& sample : set.samples) inputs.push_back({sample.context, sample.probe});
  return inputs;
}

// --until-stable: rounds of --samples samples (the first N of the data's nested order each time),
// until every layer's budget share at ratio 2 has a 90% bootstrap interval within +-5%, or
// --max-samples (worker/calibration/until_stable.h).
int CalibrateUntilStable(const CalibrateArgs& args, const method::CalibrationParams& params,
                         worker::Engine& s, const std::string& hash, const std::string& builtin,
                         worker::DataOptions data_options, worker::CalibrationSet first) {
  std::string description, domain;
  // Round 1's samples are the set already loaded; later rounds load the first n of the same order.
  worker::SampleSource samples = [&](int n) -> StatusOr<std::vector<worker::CalibrationInput>> {
    worker::CalibrationSet set;
    if (n == static_cast<int>(first.samples.size())) {
      set = std::move(first);
    } else {
      data_options.samples = n;
      ASSIGN_OR_RETURN(
          set, args.method.data.empty()
                   ? worker::BuiltinCalibrationData(builtin, *s.tokenizer, data_options)
                   : worker::LoadCalibrationData(args.method.data, *s.tokenizer, data_options));
    }
    description = set.description;
    domain = set.domain;
    return InputsOf(set);
  };
  const worker::CalibrationOptions options = CalibrationOptionsOf(args, params);
  const worker::ProfileContext context{
      .model = worker::ProfileModelOf(s.model.config, hash),
      .params = params,
      .created_at = method::FormatIso8601Utc(std::chrono::system_clock::now())};
  spdlog::info("calibrating until stable: rounds of {} samples, at most {}", args.method.samples,
               args.max_samples);
  std::unique_ptr<Progress> progress;
  worker::CalibrationProgress on_progress = [&](int64_t done, int64_t total) {
    if (!progress || done == 1) {
      progress = std::make_unique<Progress>("calibrate", total, "layer-samples");
    }
    progress->Update(done);
  };
  auto result =
      worker::CalibrateUntilStable(*s.transformer, samples, options, context, {}, on_progress);
  progress.reset();
  if (!result.ok()) return ReportError(result.status());
  result->profile.params.data_source = description;
  result->profile.params.data_domain = domain;
  const method::ProfileStability& st = *result->profile.stability;
  if (result->capped) {
    spdlog::warn(
        "not stable at the cap of {} samples: largest budget-share deviation {:.1f}% "
        "(target {:.0f}%); raise --max-samples or read the intervals",
        args.max_samples, 100 * st.max_share_deviation, 100 * st.tolerance);
  } else {
    spdlog::info("stable after {} samples: largest budget-share deviation {:.1f}%",
                 result->rounds.back(), 100 * st.max_share_deviation);
  }
  return WriteAndPrint(args, result->profile);
}

int RunCalibrate(const CalibrateArgs& args) {
  // Every rule of the method's parameters (method/calibration_params.h), before any model work;
  // the layer range once the model's layer count is known.
  auto method_params = CheckedCalibrationParams(args.method, args.until_stable, args.max_samples);
  if (!method_params.ok()) return ReportError(method_params.status());
  const worker::DataOptions data_options =
      worker::DataOptionsOf(*method_params, args.method.strict);
  auto builtin = BuiltinFromFlags(args.method);
  if (!builtin.ok()) return ReportError(builtin.status());

  auto session_or = OpenModel(args.model, args.threads, args.model_flags);
  if (!session_or.ok()) return ReportError(session_or.status());
  worker::Engine& s = **session_or;
  const worker::ModelConfig& cfg = s.model.config;
  method_params = WithModelKvHeads(args.method, *std::move(method_params), cfg.n_kv_heads);
  if (!method_params.ok()) return ReportError(method_params.status());
  if (Status st = method::ValidateCalibrationParams(*method_params, cfg.n_layers); !st.ok()) {
    return ReportError(st);
  }
  if (args.method.context_len + args.method.probe > cfg.context_length && cfg.context_length > 0) {
    return ReportError(absl::InvalidArgumentError(
        absl::StrCat("--context-len + --probe = ", args.method.context_len + args.method.probe,
                     " exceeds the model's context of ", cfg.context_length)));
  }
  auto data = args.method.data.empty()
                  ? worker::BuiltinCalibrationData(*builtin, *s.tokenizer, data_options)
                  : worker::LoadCalibrationData(args.method.data, *s.tokenizer, data_options);
  if (!data.ok()) return ReportError(data.status());
  for (const auto& skipped : data->skipped) {
    spdlog::warn("skipped sample {}: {}", skipped.source, skipped.reason);
  }
  auto hash = worker::ModelHash(args.model);
  if (!hash.ok()) return ReportError(hash.status());
  if (args.until_stable) {
    if (s.tp) {
      return ReportError(absl::InvalidArgumentError("--until-stable does not run with --tp yet"));
    }
    return CalibrateUntilStable(args, *method_params, s, *hash, *builtin, data_options,
                                *std::move(data));
  }

  const std::vector<worker::CalibrationInput> inputs = InputsOf(*data);
  const worker::CalibrationOptions options = CalibrationOptionsOf(args, *method_params);
  const method::CalibrationParams& p = *method_params;
  // What a trial is: noise at alpha, or the selector at one budget of the grid.
  const std::string trial =
      p.objective == method::Objective::kResponse
          ? absl::StrCat("response of ", std::string(method::ResponseSelectorName(p.selector)),
                         " at budgets ", absl::StrJoin(p.budgets, ","),
                         p.kv_heads > 0 ? absl::StrCat(", each of ", p.kv_heads, " KV heads alone")
                                        : std::string())
          : absl::StrCat("noise, alpha=", p.alpha);
  spdlog::info("calibrating {} samples x {} layers x {} trials ({} mode{}, C={}, W={}, {})",
               inputs.size(), p.layers.empty() ? cfg.n_layers : static_cast<int>(p.layers.size()),
               p.trials, method::PerturbModeName(p.mode), args.naive ? ", naive" : "",
               p.context_len, p.probe_len, trial);
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Progress> progress;
  worker::CalibrationProgress on_progress = [&](int64_t done, int64_t total) {
    if (!progress) progress = std::make_unique<Progress>("calibrate", total, "layer-samples");
    progress->Update(done);
  };
  auto results =
      worker::RunCalibration(*s.transformer, inputs, options, s.primary() ? on_progress : nullptr);
  progress.reset();
  if (!results.ok()) return ReportError(results.status());
  if (!s.primary()) return kExitOk;  // --tp: rank 0 reports
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("calibration took {:.1f} s", seconds);
  if (s.tp) {
    const kernels::CommunicatorStats comm = s.tp->model->stats();
    spdlog::info("collectives (rank 0): {} calls, {:.2f} s ({:.1f}% of the calibration)",
                 comm.calls, comm.seconds, 100.0 * comm.seconds / std::max(seconds, 1e-9));
  }

  const method::ProfileParams params = method::MeasuredParams(
      *method_params, static_cast<int64_t>(inputs.size()), data->description, data->domain);
  auto assembled =
      method::AssembleProfile(worker::ProfileModelOf(cfg, *hash), params, *results,
                              method::FormatIso8601Utc(std::chrono::system_clock::now()));
  if (!assembled.ok()) return ReportError(assembled.status());
  return WriteAndPrint(args, *assembled);
}

}  // namespace

void AddCalibrateCommand(CLI::App& app, Action& run) {
  auto a = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Measure per-layer value-cache sensitivity (KL under norm-adaptive noise)");
  cmd->add_option("-m,--model", a->model, "GGUF file or Hugging Face model directory")->required();
  AddMethodFlags(cmd, a->method,
                 "Calibration data: JSONL ({\"text\"} or {\"context\",\"continuation\"}) or plain "
                 "text; default: the built-in set of --builtin (docs/DATA.md)");
  AddModelFlags(cmd, a->model_flags, /*tensor_parallel=*/true);
  cmd->add_option("-t,--threads", a->threads, "CPU threads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("-o,--out", a->out, "Write the profile JSON here");
  cmd->add_option("--plot", a->plot, "Write an SVG plot of the profile and budget multipliers");
  cmd->add_option("--ratio", a->ratio, "Budget ratio r shown in the table and plot")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  cmd->add_flag("--naive", a->naive, "Reference path: a full forward pass per trial (slow)");
  cmd->add_flag("--until-stable", a->until_stable,
                "Add --samples samples at a time until every layer's budget share at ratio 2 has "
                "a 90% bootstrap interval within +-5% (or --max-samples is reached)");
  cmd->add_option("--max-samples", a->max_samples, "The cap of --until-stable")
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print the profile JSON instead of the table");
  cmd->callback([a, &run] { run = [a] { return RunCalibrate(*a); }; });
}

}  // namespace ripplekv::cli
