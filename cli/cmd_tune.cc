// ripplekv tune --model M --profile P --budgets LIST [--ratios LIST|none] [--selector S]
//   [--cake-taus LIST|none] [--cake-method cake|cake+S] [--objective TASK|average] [--shrink-z Z]
//   [--normalization minmax|rank|log-minmax] --out F [example flags; --split validation]
// Chooses, per average budget, RippleKV's ratio and CAKE's temperatures on the validation split
// (docs/EVAL.md, "Tuning without test data"): every candidate is one method variant evaluated from
// the same prefill of every example, scored by the objective, and the best is written with every
// candidate's validation score. `ripplekv eval --tuned F` then reports the test split at those
// settings. The test split is refused: choosing on it is what this command exists to prevent.
// stdout: the candidates' scores per budget, the choice marked; stderr: progress.

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/file_io.h"
#include "cli/commands.h"
#include "cli/eval_setup.h"
#include "cli/exit_codes.h"
#include "cli/model_session.h"
#include "cli/tuned_settings.h"
#include "eval/fidelity_task.h"
#include "method/budget_map.h"
#include "spdlog/spdlog.h"
#include "worker/model/model_hash.h"

namespace ripplekv::cli {
namespace {

struct TuneArgs {
  std::string model;
  std::string profile;
  std::string budgets = "64,128,256";
  std::string ratios = "1,1.5,2,4,8";
  std::string selector = "snapkv";
  std::string cake_taus = "0.6:0.6,0.6:1,0.6:1.6,1:0.6,1:1,1:1.6,1.6:0.6,1.6:1,1.6:1.6";
  std::string cake_method = "cake";  // the CAKE method the temperatures are tuned with
  std::string objective;  // empty: fidelity/kl with the fidelity task, else "average"
  double shrink_z = 0.0;
  std::string normalization = "minmax";  // of RippleKV's maps: minmax, rank or log-minmax
  std::string out;
  ExampleFlags examples;
  int threads = DefaultThreads();
  int h2o_recent = 0;  // H2O: recent tokens kept; 0 = half the budget (heavy_ratio)
  ModelFlags model_flags;
};

// The candidates as written ("1.5") and as numbers, in the order given.
StatusOr<std::vector<std::pair<std::string, double>>> ParseRatios(const std::string& text) {
  if (text == "none") return std::vector<std::pair<std::string, double>>{};
  ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitList(text, "--ratios"));
  std::vector<std::pair<std::string, double>> out;
  for (const std::string& p : parts) {
    double r = 0;
    if (!absl::SimpleAtod(p, &r) || !std::isfinite(r) || r < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--ratios: '", p, "' is not a ratio >= 1"));
    }
    out.emplace_back(p, r);
  }
  return out;
}

struct TauPair {
  std::string name;  // "tau1:tau2" as written
  double tau1 = 0, tau2 = 0;
};

StatusOr<std::vector<TauPair>> ParseTaus(const std::string& text) {
  if (text == "none") return std::vector<TauPair>{};
  ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitList(text, "--cake-taus"));
  std::vector<TauPair> out;
  for (const std::string& p : parts) {
    std::vector<std::string> two = absl::StrSplit(p, ':');
    TauPair t{.name = p};
    if (two.size() != 2 || !absl::SimpleAtod(two[0], &t.tau1) ||
        !absl::SimpleAtod(two[1], &t.tau2) || !(t.tau1 > 0) || !(t.tau2 > 0) ||
        !std::isfinite(t.tau1) || !std::isfinite(t.tau2)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cake-taus: '", p, "' is not TAU1:TAU2 with both > 0"));
    }
    out.push_back(t);
  }
  return out;
}

// The objective of every (label, budget): the mean score of task `objective`, or with "average"
// the mean over the non-fidelity tasks of each task's mean (the results table's average).
std::map<std::pair<std::string, int>, double> Objective(
    const std::vector<eval::ScoreRecord>& records, const std::string& objective) {
  std::map<std::pair<std::string, int>, std::map<std::string, std::pair<double, int>>> sums;
  for (const eval::ScoreRecord& r : records) {
    const bool counted =
        objective == "average" ? r.task.rfind("fidelity/", 0) != 0 : r.task == objective;
    if (!counted) continue;
    auto& [sum, n] = sums[{r.method, r.budget}][r.task];
    sum += r.score;
    ++n;
  }
  std::map<std::pair<std::string, int>, double> out;
  for (const auto& [key, tasks] : sums) {
    double total = 0;
    for (const auto& [task, sn] : tasks) total += sn.first / sn.second;
    out[key] = total / static_cast<double>(tasks.size());
  }
  return out;
}

using ScoreOf = std::function<StatusOr<double>(const std::string& label, int budget)>;

// The best of the candidates `labels` (written `names`) at budget `b`: its index, every score into
// `scores` by name, and a line "budget B  TITLE:  name=score ..." on stdout with the choice
// starred. Strictly better only: ties keep the earlier candidate (the gentler ratio, the first
// pair).
StatusOr<size_t> Choose(std::string_view title, const std::vector<std::string>& labels,
                        const std::vector<std::string>& names, int b, const ScoreOf& value,
                        bool lower, std::map<std::string, double>* scores) {
  size_t best = 0;
  std::vector<double> v(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    ASSIGN_OR_RETURN(v[i], value(labels[i], b));
    (*scores)[names[i]] = v[i];
    if (lower ? v[i] < v[best] : v[i] > v[best]) best = i;
  }
  std::printf("budget %d  %.*s:", b, static_cast<int>(title.size()), title.data());
  for (size_t i = 0; i < names.size(); ++i) {
    std::printf("  %s=%.4f%s", names[i].c_str(), v[i], i == best ? "*" : "");
  }
  std::printf("\n");
  return best;
}

Status Tune(const TuneArgs& args) {
  if (args.examples.split != "validation") {
    return absl::InvalidArgumentError(
        "--split test: tuning chooses on the validation split only, so that the test split stays "
        "unseen; evaluate the choice with `ripplekv eval --tuned`");
  }
  auto budgets = ParseBudgets(args.budgets);
  RETURN_IF_ERROR(budgets.status());
  auto ratios = ParseRatios(args.ratios);
  RETURN_IF_ERROR(ratios.status());
  auto taus = ParseTaus(args.cake_taus);
  RETURN_IF_ERROR(taus.status());
  auto ripple = eval::ParseMethod(absl::StrCat("ripple+", args.selector));
  RETURN_IF_ERROR(ripple.status());
  auto tasks = SplitList(args.examples.tasks, "--tasks");
  RETURN_IF_ERROR(tasks.status());
  const bool has_fidelity = std::find(tasks->begin(), tasks->end(), "fidelity") != tasks->end();
  const std::string objective =
      !args.objective.empty() ? args.objective
                              : (has_fidelity ? std::string(eval::kFidelityKlTask) : "average");
  const bool lower = eval::LowerIsBetter(objective);

  auto profile = ReadProfileOfModel(args.profile, args.model);
  RETURN_IF_ERROR(profile.status());
  auto session = OpenModel(args.model, args.threads, args.model_flags);
  RETURN_IF_ERROR(session.status());

  eval::EvalRunOptions run;
  run.compress.selection.recent_tokens = args.h2o_recent;
  run.budgets = *budgets;
  auto normalization = method::ParseNormalization(args.normalization);
  RETURN_IF_ERROR(normalization.status());
  RippleMapSettings settings{.shrink_z = args.shrink_z,
                             .normalization = *normalization,
                             .min_tokens = MapMinTokens({*ripple}, run.compress)};
  for (const auto& [name, ratio] : *ratios) {
    settings.ratio = ratio;
    auto maps = RippleMaps(*profile, *budgets, settings);
    RETURN_IF_ERROR(maps.status());
    run.variants.push_back({.label = absl::StrCat(ripple->name, "@r=", name),
                            .method = *ripple,
                            .budget_maps = *std::move(maps)});
  }
  auto cake = eval::ParseMethod(args.cake_method);
  RETURN_IF_ERROR(cake.status());
  if (cake->allocation != eval::AllocationKind::kCake) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cake-method: ", args.cake_method, " is not a CAKE allocation (cake or cake+...)"));
  }
  if (ratios->empty() && taus->empty()) {
    return absl::InvalidArgumentError("--ratios none and --cake-taus none: nothing to tune");
  }
  for (const TauPair& t : *taus) {
    eval::CompressOptions compress = run.compress;
    compress.cake_tau1 = t.tau1;
    compress.cake_tau2 = t.tau2;
    run.variants.push_back(
        {.label = absl::StrCat(cake->name, "@", t.name), .method = *cake, .compress = compress});
  }
  auto examples = MakeExamples(args.examples, *(*session)->tokenizer);
  RETURN_IF_ERROR(examples.status());
  auto scored = ScoreExamples(**session, *examples, run);
  RETURN_IF_ERROR(scored.status());
  const auto score = Objective(scored->records, objective);
  const ScoreOf value = [&](const std::string& label, int b) -> StatusOr<double> {
    auto it = score.find({label, b});
    if (it == score.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--objective ", objective,
                       ": no scores of that task (tasks: ", args.examples.tasks, ")"));
    }
    return it->second;
  };

  ASSIGN_OR_RETURN(std::string hash, worker::ModelHash(args.model));
  TunedSettings tuned{.model_hash = hash,
                      .split = args.examples.split,
                      .objective = objective,
                      .lower_is_better = lower,
                      .examples = {{"tasks", args.examples.tasks},
                                   {"samples", args.examples.samples},
                                   {"prompt_lens", args.examples.prompt_lens},
                                   {"context_len", args.examples.context_len},
                                   {"corpus", args.examples.corpus},
                                   {"seed", args.examples.seed},
                                   {"chat", args.examples.chat}},
                      .profile = {{"path", args.profile},
                                  {"created_at", profile->created_at},
                                  {"data_source", profile->params.data_source},
                                  {"shrink_z", args.shrink_z},
                                  {"normalization", args.normalization}},
                      .ripple_selector = args.selector,
                      .cake_method = cake->name};
  std::printf("tuned on the %s split, objective %s (%s is better)\n", args.examples.split.c_str(),
              objective.c_str(), lower ? "lower" : "higher");
  std::vector<std::string> ratio_labels, ratio_names, tau_labels, tau_names;
  for (const auto& [name, ratio] : *ratios) {
    ratio_labels.push_back(absl::StrCat(ripple->name, "@r=", name));
    ratio_names.push_back(name);
  }
  for (const TauPair& t : *taus) {
    tau_labels.push_back(absl::StrCat(cake->name, "@", t.name));
    tau_names.push_back(t.name);
  }
  for (int b : *budgets) {
    if (!ratios->empty()) {
      RippleChoice choice;
      ASSIGN_OR_RETURN(const size_t r, Choose(absl::StrCat(ripple->name, " ratio"), ratio_labels,
                                              ratio_names, b, value, lower, &choice.scores));
      choice.ratio = (*ratios)[r].second;
      tuned.ripple[b] = std::move(choice);
    }
    if (taus->empty()) continue;
    CakeChoice cake_choice;
    ASSIGN_OR_RETURN(const size_t t, Choose(absl::StrCat(cake->name, " tau1:tau2"), tau_labels,
                                            tau_names, b, value, lower, &cake_choice.scores));
    cake_choice.tau1 = (*taus)[t].tau1;
    cake_choice.tau2 = (*taus)[t].tau2;
    tuned.cake[b] = std::move(cake_choice);
  }
  RETURN_IF_ERROR(WriteFileAtomically(args.out, TunedSettingsToJson(tuned)));
  spdlog::info("wrote {}", args.out);
  return absl::OkStatus();
}

int RunTune(const TuneArgs& args) {
  const Status status = Tune(args);
  return status.ok() ? kExitOk : ReportError(status);
}

}  // namespace

void AddTuneCommand(CLI::App& app, Action& run) {
  auto a = std::make_shared<TuneArgs>();
  a->examples.split = "validation";
  CLI::App* cmd = app.add_subcommand(
      "tune", "Choose RippleKV's ratio and CAKE's temperatures per budget on the validation split");
  cmd->add_option("-m,--model", a->model, "GGUF file or Hugging Face model directory")->required();
  cmd->add_option("--profile", a->profile, "Profile JSON (ripplekv calibrate --out)")->required();
  cmd->add_option("--budgets", a->budgets, "Average tokens kept per layer and KV head")
      ->capture_default_str();
  cmd->add_option("--ratios", a->ratios,
                  "Candidate ratios (1 = the uniform allocation), or none")
      ->capture_default_str();
  cmd->add_option("--selector", a->selector, "Selection RippleKV's maps are tuned with")
      ->capture_default_str()
      ->check(CLI::IsMember({"snapkv", "h2o", "streaming", "cake"}));
  cmd->add_option("--cake-taus", a->cake_taus,
                  "Candidate CAKE temperatures TAU1:TAU2 of --cake-method, or none")
      ->capture_default_str();
  cmd->add_option("--cake-method", a->cake_method,
                  "The CAKE method the temperatures are tuned with: cake (CAKE's own selection) "
                  "or cake+S for the allocation under selection S")
      ->capture_default_str();
  cmd->add_option("--objective", a->objective,
                  "Task whose mean score decides (e.g. fidelity/kl, passkey), or average (the "
                  "mean over the retrieval tasks); default fidelity/kl with --tasks fidelity");
  cmd->add_option("--shrink-z", a->shrink_z, "RippleKV maps use mean KL - Z x stderr")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--normalization", a->normalization,
                  "Normalization of RippleKV's maps (docs/BUDGETS.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"minmax", "rank", "log-minmax"}));
  cmd->add_option("-o,--out", a->out, "Write the chosen settings (JSON) here")->required();
  cmd->add_option("--h2o-recent", a->h2o_recent,
                  "H2O: most recent tokens kept, the rest of the budget to heavy hitters (0: the "
                  "paper's half; KVCache-Factory keeps 8)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  AddExampleFlags(cmd, a->examples);
  AddModelFlags(cmd, a->model_flags);
  cmd->add_option("--threads", a->threads, "CPU threads")->check(CLI::Range(1, 1024));
  cmd->callback([a, &run] { run = [a] { return RunTune(*a); }; });
}

}  // namespace ripplekv::cli
