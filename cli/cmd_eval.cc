// ripplekv eval --model M [--methods LIST] [--budgets 64,128,256] [--tasks LIST] [--profile P]
//   [--ratio R] [--shrink-z Z] [--normalization minmax|rank|log-minmax] [--tuned F]
//   [--budget-map F] [--samples N] [--prompt-len T,...] [--context-len C]
//   [--continuation W] [--depth D,...] [--kv-pairs N] [--kv-format uuid|short] [--needles N]
//   [--corpus NAME|FILE] [--split test|validation] [--seed S] [--chat] [--longbench F]
//   [--templates F] [--max-prompt-tokens N] [--threads N] [--no-shared-prefill] [--json|--csv]
//   [--json-out F] [--records-out F]
//
// Evaluates KV-cache compression methods at matched memory (docs/EVAL.md): every example is
// prefilled once, then each method x budget compresses a copy of the cache and decodes from it.
// Methods: docs/COMPRESSION.md ("ripple+snapkv" needs --profile: its budget map per budget is
// computed from the profile as `ripplekv budgets` does; "map+..." takes --budget-map). Tasks:
// fidelity, passkey, kv-retrieval, multi-needle, longbench (needs --longbench). Corpus text comes
// from a built-in book or a file (eval/corpus_file.h), from the region of --split only
// (eval/split.h; checked before anything runs). stdout: the results table (markdown,
// --json or --csv); stderr: progress and the throughput line.

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "cli/commands.h"
#include "cli/eval_setup.h"
#include "cli/exit_codes.h"
#include "cli/model_session.h"
#include "cli/tuned_settings.h"
#include "eval/compress/method.h"
#include "eval/eval_runner.h"
#include "eval/results_table.h"
#include "method/budget_format.h"
#include "method/budget_map.h"
#include "method/profile.h"
#include "spdlog/spdlog.h"
#include "worker/model/model_hash.h"

namespace ripplekv::cli {
namespace {

struct EvalArgs {
  std::string model;
  std::string methods = "full,snapkv,pyramidkv,cake,streaming,h2o";  // + ripple+snapkv w/ profile
  std::string budgets = "64,128,256";
  std::string profile;
  double ratio = 2.0;
  double shrink_z = 0.0;
  std::string normalization = "minmax";  // of the maps from --profile: minmax, rank or log-minmax
  std::string budget_map;
  std::string tuned;  // settings of `ripplekv tune`: a ratio and CAKE temperatures per budget
  ExampleFlags examples;
  int threads = DefaultThreads();
  ModelFlags model_flags;  // --weights, --device, --device-weights
  bool no_shared_prefill = false;
  bool json = false;
  bool csv = false;
  std::string json_out;     // also write the JSON table here
  std::string records_out;  // also write every per-example score here (JSONL)
};

// Budget maps of the kMap methods per average budget: from --profile (RippleKV's mapping, as
// `ripplekv budgets`), or --budget-map (a map file, usable at its own average only).
StatusOr<std::map<int, std::vector<int>>> MakeBudgetMaps(
    const EvalArgs& args, const std::vector<eval::Method>& methods, const std::vector<int>& budgets,
    const eval::CompressOptions& compress, const worker::Engine& session,
    const std::optional<TunedSettings>& tuned) {
  std::map<int, std::vector<int>> maps;
  const bool needed = std::any_of(methods.begin(), methods.end(),
                                  [](const auto& m) { return m.needs_budget_map(); });
  if (!needed) return maps;
  const int64_t n_layers = session.model.config.n_layers;
  if (!args.profile.empty() == !args.budget_map.empty()) {
    return absl::InvalidArgumentError(
        "methods ripple+... / map+... need exactly one of --profile P.json and --budget-map F");
  }
  if (!args.budget_map.empty()) {
    if (tuned) {
      return absl::InvalidArgumentError(
          "--tuned sets the ratio of maps made from --profile, not of a --budget-map file");
    }
    ASSIGN_OR_RETURN(method::BudgetMap map, method::ReadBudgetMapFile(args.budget_map));
    if (static_cast<int64_t>(map.tokens.size()) != n_layers) {
      return absl::InvalidArgumentError(absl::StrCat(args.budget_map, ": ", map.tokens.size(),
                                                     " layers, the model has ", n_layers));
    }
    for (int b : budgets) {
      if (map.total_tokens != n_layers * b) {
        return absl::InvalidArgumentError(
            absl::StrCat(args.budget_map, ": total ", map.total_tokens, " tokens is not ", n_layers,
                         " x ", b, " (a map file serves only its own average; pass --budgets ",
                         map.total_tokens / n_layers, ")"));
      }
      maps[b].assign(map.tokens.begin(), map.tokens.end());
    }
    return maps;
  }
  ASSIGN_OR_RETURN(method::SensitivityProfile profile,
                   ReadProfileOfModel(args.profile, args.model));
  ASSIGN_OR_RETURN(method::Normalization normalization,
                   method::ParseNormalization(args.normalization));
  RippleMapSettings settings{.ratio = args.ratio,
                             .shrink_z = args.shrink_z,
                             .normalization = normalization,
                             .min_tokens = MapMinTokens(methods, compress)};
  if (!tuned) return RippleMaps(profile, budgets, settings);
  for (int b : budgets) {  // each budget at its tuned ratio
    settings.ratio = tuned->ripple.at(b).ratio;
    ASSIGN_OR_RETURN(auto one, RippleMaps(profile, {b}, settings));
    maps[b] = std::move(one[b]);
  }
  return maps;
}

// --tuned: settings chosen by `ripplekv tune` on the validation split of this model, applied to
// the test split, with a setting for every budget asked. InvalidArgument naming what differs.
Status CheckTuned(const TunedSettings& tuned, const EvalArgs& args,
                  const std::vector<eval::Method>& methods, const std::vector<int>& budgets) {
  ASSIGN_OR_RETURN(std::string hash, worker::ModelHash(args.model));
  if (tuned.model_hash != hash) {
    return absl::InvalidArgumentError(absl::StrCat(args.tuned, ": tuned for model ",
                                                   tuned.model_hash.substr(0, 12), ", not ",
                                                   hash.substr(0, 12)));
  }
  if (tuned.split != "validation" || args.examples.split != "test") {
    return absl::InvalidArgumentError(absl::StrCat(
        args.tuned, ": settings tuned on the ", tuned.split, " split, evaluated on the ",
        args.examples.split, " split; tune on validation and evaluate on test"));
  }
  // The maps' other settings must be the ones the ratio was tuned with (files written before
  // normalization was recorded were tuned with min-max).
  const std::string tuned_normalization =
      tuned.profile.value("normalization", std::string("minmax"));
  const double tuned_shrink_z = tuned.profile.value("shrink_z", 0.0);
  if (tuned_normalization != args.normalization || tuned_shrink_z != args.shrink_z) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.tuned, ": tuned with --normalization ", tuned_normalization,
                     " --shrink-z ", tuned_shrink_z, ", evaluated with --normalization ",
                     args.normalization, " --shrink-z ", args.shrink_z));
  }
  for (const eval::Method& m : methods) {
    const bool ripple = m.needs_budget_map();
    const bool cake = m.allocation == eval::AllocationKind::kCake;
    if (!ripple && !cake) continue;
    for (int b : budgets) {
      if ((ripple && !tuned.ripple.contains(b)) || (cake && !tuned.cake.contains(b))) {
        return absl::InvalidArgumentError(absl::StrCat(args.tuned, ": no tuned ",
                                                       ripple ? "ratio" : "CAKE temperatures",
                                                       " for budget ", b, " (", m.name, ")"));
      }
    }
  }
  return absl::OkStatus();
}

// --tuned: every CAKE allocation runs at each budget with that budget's temperatures, as variants
// named like the method.
void TunedCakeVariants(const TunedSettings& tuned, const std::vector<int>& budgets,
                       eval::EvalRunOptions& run) {
  std::vector<eval::Method> kept;
  for (const eval::Method& m : run.methods) {
    if (m.allocation != eval::AllocationKind::kCake) {
      kept.push_back(m);
      continue;
    }
    for (int b : budgets) {
      eval::CompressOptions compress = run.compress;
      compress.cake_tau1 = tuned.cake.at(b).tau1;
      compress.cake_tau2 = tuned.cake.at(b).tau2;
      run.variants.push_back({.label = m.name, .method = m, .compress = compress, .budgets = {b}});
    }
  }
  run.methods = std::move(kept);
}

int RunEval(const EvalArgs& args) {
  if (args.json && args.csv) {
    return ReportError(absl::InvalidArgumentError("give at most one of --json and --csv"));
  }
  std::string method_list = args.methods;
  if (!args.profile.empty() && method_list == EvalArgs().methods) method_list += ",ripple+snapkv";
  auto methods = ParseMethods(method_list);
  if (!methods.ok()) return ReportError(methods.status());
  auto budgets = ParseBudgets(args.budgets);
  if (!budgets.ok()) return ReportError(budgets.status());
  std::optional<TunedSettings> tuned;
  if (!args.tuned.empty()) {
    auto read = ReadTunedSettings(args.tuned);
    if (!read.ok()) return ReportError(read.status());
    if (Status st = CheckTuned(*read, args, *methods, *budgets); !st.ok()) return ReportError(st);
    tuned = *std::move(read);
  }

  auto session = OpenModel(args.model, args.threads, args.model_flags);
  if (!session.ok()) return ReportError(session.status());
  eval::EvalRunOptions run;
  run.methods = *methods;
  run.budgets = *budgets;
  run.shared_prefill = !args.no_shared_prefill;
  auto maps = MakeBudgetMaps(args, *methods, *budgets, run.compress, **session, tuned);
  if (!maps.ok()) return ReportError(maps.status());
  run.budget_maps = *std::move(maps);
  if (tuned) TunedCakeVariants(*tuned, *budgets, run);
  auto examples = MakeExamples(args.examples, *(*session)->tokenizer);
  if (!examples.ok()) return ReportError(examples.status());

  auto scored = ScoreExamples(**session, *examples, run);
  if (!scored.ok()) return ReportError(scored.status());
  const std::vector<eval::ScoreRecord>& records = scored->records;
  const std::string& record_lines = scored->record_lines;

  auto table = eval::BuildResultTable(records);
  if (!table.ok()) return ReportError(table.status());
  const eval::TableFormat format = args.json  ? eval::TableFormat::kJson
                                   : args.csv ? eval::TableFormat::kCsv
                                              : eval::TableFormat::kMarkdown;
  if (!args.records_out.empty()) {
    if (Status st = WriteFileAtomically(args.records_out, record_lines); !st.ok()) {
      return ReportError(st);
    }
    spdlog::info("wrote {}", args.records_out);
  }
  if (!args.json_out.empty()) {
    if (Status st = WriteFileAtomically(args.json_out, eval::RenderJson(*table)); !st.ok()) {
      return ReportError(st);
    }
    spdlog::info("wrote {}", args.json_out);
  }
  const std::string text = eval::RenderTable(*table, format);
  std::fputs(text.c_str(), stdout);
  if (text.empty() || text.back() != '\n') std::fputc('\n', stdout);
  return kExitOk;
}

}  // namespace

void AddEvalCommand(CLI::App& app, Action& run) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd =
      app.add_subcommand("eval", "Compare KV-cache compression methods at matched memory");
  cmd->add_option("-m,--model", a->model, "GGUF file or Hugging Face model directory")->required();
  cmd->add_option("--methods", a->methods,
                  "Comma-separated methods (docs/COMPRESSION.md); ripple+snapkv is added when "
                  "--profile is given and --methods is not")
      ->capture_default_str();
  cmd->add_option("--budgets", a->budgets, "Average tokens kept per layer and KV head")
      ->capture_default_str();
  cmd->add_option("--profile", a->profile,
                  "Profile JSON for ripple+... (ripplekv calibrate --out)");
  cmd->add_option("--ratio", a->ratio, "RippleKV ratio r of the budget maps from --profile")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  cmd->add_option("--budget-map", a->budget_map, "Budget map file for map+... methods");
  cmd->add_option("--shrink-z", a->shrink_z,
                  "RippleKV maps from --profile use mean KL - Z x stderr (0: plain means)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--normalization", a->normalization,
                  "Normalization of the budget maps from --profile (docs/BUDGETS.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"minmax", "rank", "log-minmax"}));
  cmd->add_option("--tuned", a->tuned,
                  "Settings from `ripplekv tune` (per budget: RippleKV's ratio, CAKE's "
                  "temperatures), chosen on the validation split");
  AddExampleFlags(cmd, a->examples);
  AddModelFlags(cmd, a->model_flags);
  cmd->add_option("--threads", a->threads, "CPU threads")->check(CLI::Range(1, 1024));
  cmd->add_flag("--no-shared-prefill", a->no_shared_prefill,
                "Prefill again for every method x budget (benchmark baseline)");
  cmd->add_flag("--json", a->json, "Print the table as JSON");
  cmd->add_flag("--csv", a->csv, "Print the table as CSV");
  cmd->add_option("--json-out", a->json_out, "Also write the table as JSON to this file");
  cmd->add_option("--records-out", a->records_out,
                  "Also write every example's score (and answer) as JSONL to this file");
  cmd->callback([a, &run] { run = [a] { return RunEval(*a); }; });
}

}  // namespace ripplekv::cli
