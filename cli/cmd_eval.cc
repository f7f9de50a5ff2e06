// ripplekv eval --model M [--methods LIST] [--budgets 64,128,256] [--tasks LIST] [--profile P]
//   [--response-profile P ...] [--ratio R] [--shrink-z Z] [--normalization minmax|rank|log-minmax]
//   [--tuned F ...]
//   [--control-seeds K] [--h2o-recent N]
//   [--budget-map F] [--samples N] [--prompt-len T,...] [--context-len C]
//   [--continuation W] [--depth D,...] [--kv-pairs N] [--kv-format uuid|short] [--needles N]
//   [--corpus NAME|FILE] [--split test|validation] [--seed S] [--chat] [--longbench F]
//   [--templates F] [--max-prompt-tokens N] [--threads N] [--no-shared-prefill] [--json|--csv]
//   [--json-out F] [--records-out F]
//
// Evaluates KV-cache compression methods at matched memory (docs/EVAL.md): every example is
// prefilled once, then each method x budget compresses a copy of the cache and decodes from it.
// Methods: docs/COMPRESSION.md ("ripple+snapkv" needs --profile: its budget map per budget is
// computed from the profile as `ripplekv budgets` does; "map+..." takes --budget-map; the
// controls ripple-perm<k>+..., ripple-rev+..., spike<k>+... are maps from the same profile at the
// same ratio, eval/compress/control_maps.h, and ripple-perm+... / spike+... without k stand for
// k = 1..--control-seeds; "resp+S" takes the --response-profile measured with selector S and
// allocates to minimize its summed response). Tasks:
// fidelity, passkey, kv-retrieval, multi-needle, longbench (needs --longbench). Corpus text comes
// from a built-in book or a file (eval/corpus_file.h), from the region of --split only
// (eval/split.h; checked before anything runs). stdout: the results table (markdown,
// --json or --csv); stderr: progress and the throughput line.

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/file_io.h"
#include "cli/commands.h"
#include "cli/eval_setup.h"
#include "cli/exit_codes.h"
#include "cli/model_session.h"
#include "cli/tuned_settings.h"
#include "eval/compress/control_maps.h"
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
  std::vector<std::string> response_profiles;  // resp+S: response profiles, one per selector S
  double ratio = 2.0;
  double shrink_z = 0.0;
  std::string normalization = "minmax";  // of the maps from --profile: minmax, rank or log-minmax
  std::string budget_map;
  // Settings of `ripplekv tune` (a ratio and CAKE temperatures per budget); several files tune
  // several selections (TunedFor).
  std::vector<std::string> tuned;
  int control_seeds = 10;  // k of ripple-perm+S and spike+S given without one: 1..control_seeds
  ExampleFlags examples;
  int threads = DefaultThreads();
  int h2o_recent = 0;      // H2O: recent tokens kept; 0 = half the budget (heavy_ratio)
  ModelFlags model_flags;  // --weights, --device, --device-weights
  bool no_shared_prefill = false;
  bool json = false;
  bool csv = false;
  std::string json_out;     // also write the JSON table here
  std::string records_out;  // also write every per-example score here (JSONL)
};

// The method list with every control named without its k expanded (eval::ExpandMapControl).
std::string ExpandControls(const std::string& list, int seeds) {
  std::vector<std::string> out;
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    for (std::string& one :
         eval::ExpandMapControl(std::string_view(name.data(), name.size()), seeds)) {
      out.push_back(std::move(one));
    }
  }
  return absl::StrJoin(out, ",");
}

// The tuned file that sets method m's parameters: for a kMap method the file whose ratio was tuned
// with m's selection, for a CAKE allocation the file whose temperatures were tuned with m itself;
// failing that, the first file that tuned that part at all (one file then serves every selection,
// as before files named their method). nullptr when no file tuned it.
const TunedSettings* TunedFor(const std::vector<TunedSettings>& files, const eval::Method& m) {
  const bool ripple = m.needs_budget_map() && !m.from_response_profile();
  const TunedSettings* fallback = nullptr;
  for (const TunedSettings& t : files) {
    if (ripple ? t.ripple.empty() : t.cake.empty()) continue;
    const bool exact =
        ripple ? t.ripple_selector == eval::SelectionName(m.selection) : t.cake_method == m.name;
    if (exact) return &t;
    if (!fallback) fallback = &t;
  }
  return fallback;
}

// Where the kMap methods' budget maps come from, read once per run: --budget-map (a map file,
// usable at its own average only) or --profile (RippleKV's mapping, as `ripplekv budgets`).
struct MapSource {
  std::optional<method::BudgetMap> file;
  std::optional<method::SensitivityProfile> profile;
};

// The control of a map method's name; none (Internal) for another method.
StatusOr<eval::MapControl> ControlOf(const eval::Method& method) {
  const std::optional<eval::MapControl> control =
      eval::ParseMapControl(method.name.substr(0, method.name.find('+')));
  if (!control) return absl::InternalError(absl::StrCat(method.name, " is not a map method"));
  return *control;
}

StatusOr<MapSource> ReadMapSource(const EvalArgs& args, const std::vector<eval::Method>& methods,
                                  const std::vector<TunedSettings>& tuned, int64_t n_layers) {
  if (args.profile.empty() == args.budget_map.empty()) {
    return absl::InvalidArgumentError(
        "methods ripple+... / map+... need exactly one of --profile P.json and --budget-map F");
  }
  MapSource source;
  if (!args.profile.empty()) {
    ASSIGN_OR_RETURN(source.profile, ReadProfileOfModel(args.profile, args.model));
    return source;
  }
  if (!tuned.empty()) {
    return absl::InvalidArgumentError(
        "--tuned sets the ratio of maps made from --profile, not of a --budget-map file");
  }
  for (const eval::Method& m : methods) {
    if (!m.needs_budget_map() || m.from_response_profile()) continue;
    ASSIGN_OR_RETURN(const eval::MapControl control, ControlOf(m));
    if (control.kind != eval::MapControlKind::kNone) {
      return absl::InvalidArgumentError(absl::StrCat(
          m.name, " is a control of the profile's map: it needs --profile, not --budget-map"));
    }
  }
  ASSIGN_OR_RETURN(source.file, method::ReadBudgetMapFile(args.budget_map));
  if (static_cast<int64_t>(source.file->tokens.size()) != n_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.budget_map, ": ", source.file->tokens.size(), " layers, the model has ", n_layers));
  }
  return source;
}

// Budget maps of one kMap method per average budget: the map file's, or from the profile at the
// method's tuned ratio per budget (a control's map from the same sensitivities and ratio).
StatusOr<std::map<int, std::vector<int>>> MakeBudgetMaps(const EvalArgs& args,
                                                         const MapSource& source,
                                                         const eval::Method& method,
                                                         const std::vector<int>& budgets,
                                                         int64_t min_tokens, int64_t n_layers,
                                                         const TunedSettings* tuned) {
  if (source.file) {  // ReadMapSource refused controls
    std::map<int, std::vector<int>> maps;
    for (int b : budgets) {
      if (source.file->total_tokens != n_layers * b) {
        return absl::InvalidArgumentError(absl::StrCat(
            args.budget_map, ": total ", source.file->total_tokens, " tokens is not ", n_layers,
            " x ", b, " (a map file serves only its own average; pass --budgets ",
            source.file->total_tokens / n_layers, ")"));
      }
      maps[b].assign(source.file->tokens.begin(), source.file->tokens.end());
    }
    return maps;
  }
  ASSIGN_OR_RETURN(const eval::MapControl control, ControlOf(method));
  ASSIGN_OR_RETURN(method::Normalization normalization,
                   method::ParseNormalization(args.normalization));
  RippleMapSettings settings{.ratio = args.ratio,
                             .shrink_z = args.shrink_z,
                             .normalization = normalization,
                             .min_tokens = min_tokens,
                             .control = control};
  if (tuned) {
    for (int b : budgets) settings.tuned_ratios[b] = tuned->ripple.at(b).ratio;
  }
  return RippleMaps(*source.profile, budgets, settings);
}

// --tuned: settings chosen by `ripplekv tune` on the validation split of this model, applied to
// the test split. InvalidArgument naming the file and what differs.
Status CheckTunedFile(const TunedSettings& tuned, const std::string& path, const EvalArgs& args,
                      const std::string& hash) {
  if (tuned.model_hash != hash) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": tuned for model ", tuned.model_hash.substr(0, 12), ", not ", hash.substr(0, 12)));
  }
  if (tuned.split != "validation" || args.examples.split != "test") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": settings tuned on the ", tuned.split, " split, evaluated on the ",
                     args.examples.split, " split; tune on validation and evaluate on test"));
  }
  // The maps' other settings must be the ones the ratio was tuned with (files written before
  // normalization was recorded were tuned with min-max).
  const std::string tuned_normalization =
      tuned.profile.value("normalization", std::string("minmax"));
  const double tuned_shrink_z = tuned.profile.value("shrink_z", 0.0);
  if (!tuned.ripple.empty() &&
      (tuned_normalization != args.normalization || tuned_shrink_z != args.shrink_z)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": tuned with --normalization ", tuned_normalization, " --shrink-z ", tuned_shrink_z,
        ", evaluated with --normalization ", args.normalization, " --shrink-z ", args.shrink_z));
  }
  return absl::OkStatus();
}

// Every --tuned file, checked; and a setting for every budget of every method that takes one.
StatusOr<std::vector<TunedSettings>> ReadTuned(const EvalArgs& args,
                                               const std::vector<eval::Method>& methods,
                                               const std::vector<int>& budgets) {
  std::vector<TunedSettings> files;
  if (args.tuned.empty()) return files;
  ASSIGN_OR_RETURN(std::string hash, worker::ModelHash(args.model));
  for (const std::string& path : args.tuned) {
    ASSIGN_OR_RETURN(TunedSettings t, ReadTunedSettings(path));
    RETURN_IF_ERROR(CheckTunedFile(t, path, args, hash));
    files.push_back(std::move(t));
  }
  for (const eval::Method& m : methods) {
    const bool ripple = m.needs_budget_map() && !m.from_response_profile();
    if (!ripple && m.allocation != eval::AllocationKind::kCake) continue;
    const TunedSettings* t = TunedFor(files, m);
    for (int b : budgets) {
      if (t == nullptr || (ripple ? !t->ripple.contains(b) : !t->cake.contains(b))) {
        return absl::InvalidArgumentError(absl::StrCat(
            absl::StrJoin(args.tuned, ", "), ": no tuned ", ripple ? "ratio" : "CAKE temperatures",
            " for budget ", b, " (", m.name, ")"));
      }
    }
  }
  return files;
}

// The response profile of each selector among --response-profile files (each checked to be of the
// model and a response profile; one per selector).
StatusOr<std::map<std::string, method::SensitivityProfile>> ReadResponseProfiles(
    const EvalArgs& args) {
  std::map<std::string, method::SensitivityProfile> out;
  for (const std::string& path : args.response_profiles) {
    ASSIGN_OR_RETURN(method::SensitivityProfile profile, ReadProfileOfModel(path, args.model));
    if (profile.params.objective != method::Objective::kResponse) {
      return absl::InvalidArgumentError(
          absl::StrCat(path,
                       ": --response-profile needs a response profile (ripplekv calibrate "
                       "--objective response), this one measured ",
                       std::string(method::ObjectiveName(profile.params.objective))));
    }
    const std::string selector(method::ResponseSelectorName(profile.params.selector));
    if (!out.emplace(selector, std::move(profile)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": a second --response-profile measured with ", selector));
    }
  }
  return out;
}

// The maps of a resp+S method: from the response profile measured with S.
StatusOr<std::map<int, std::vector<int>>> ResponseMethodMaps(
    const std::map<std::string, method::SensitivityProfile>& profiles, const eval::Method& m,
    const std::vector<int>& budgets, int64_t min_tokens) {
  const auto found = profiles.find(std::string(eval::SelectionName(m.selection)));
  if (found == profiles.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(m.name, " needs --response-profile P.json measured with --selector ",
                     std::string(eval::SelectionName(m.selection))));
  }
  return ResponseMaps(found->second, budgets, min_tokens);
}

// Every map method runs with budget maps of its own, and with --tuned every CAKE allocation runs
// at each budget with that budget's temperatures: both as variants named like the method.
Status MakeVariants(const EvalArgs& args, const std::vector<TunedSettings>& tuned,
                    const worker::Engine& session, eval::EvalRunOptions& run) {
  const int64_t min_tokens = MapMinTokens(run.methods, run.compress);
  const int64_t n_layers = session.model.config.n_layers;
  std::optional<MapSource> source;
  ASSIGN_OR_RETURN(const auto response_profiles, ReadResponseProfiles(args));
  std::vector<eval::Method> kept;
  for (const eval::Method& m : run.methods) {
    const TunedSettings* t = TunedFor(tuned, m);
    if (m.from_response_profile()) {
      ASSIGN_OR_RETURN(auto maps,
                       ResponseMethodMaps(response_profiles, m, run.budgets, min_tokens));
      run.variants.push_back({.label = m.name, .method = m, .budget_maps = std::move(maps)});
    } else if (m.needs_budget_map()) {
      if (!source) {
        ASSIGN_OR_RETURN(source, ReadMapSource(args, run.methods, tuned, n_layers));
      }
      ASSIGN_OR_RETURN(auto maps,
                       MakeBudgetMaps(args, *source, m, run.budgets, min_tokens, n_layers, t));
      run.variants.push_back({.label = m.name, .method = m, .budget_maps = std::move(maps)});
    } else if (m.allocation == eval::AllocationKind::kCake && t != nullptr) {
      for (int b : run.budgets) {
        eval::CompressOptions compress = run.compress;
        compress.cake_tau1 = t->cake.at(b).tau1;
        compress.cake_tau2 = t->cake.at(b).tau2;
        run.variants.push_back(
            {.label = m.name, .method = m, .compress = compress, .budgets = {b}});
      }
    } else {
      kept.push_back(m);
    }
  }
  run.methods = std::move(kept);
  return absl::OkStatus();
}

int RunEval(const EvalArgs& args) {
  if (args.json && args.csv) {
    return ReportError(absl::InvalidArgumentError("give at most one of --json and --csv"));
  }
  std::string method_list = args.methods;
  if (!args.profile.empty() && method_list == EvalArgs().methods) method_list += ",ripple+snapkv";
  auto methods = ParseMethods(ExpandControls(method_list, args.control_seeds));
  if (!methods.ok()) return ReportError(methods.status());
  auto budgets = ParseBudgets(args.budgets);
  if (!budgets.ok()) return ReportError(budgets.status());
  auto tuned = ReadTuned(args, *methods, *budgets);
  if (!tuned.ok()) return ReportError(tuned.status());

  auto session = OpenModel(args.model, args.threads, args.model_flags);
  if (!session.ok()) return ReportError(session.status());
  eval::EvalRunOptions run;
  run.compress.selection.recent_tokens = args.h2o_recent;
  run.methods = *methods;
  run.budgets = *budgets;
  run.shared_prefill = !args.no_shared_prefill;
  if (Status st = MakeVariants(args, *tuned, **session, run); !st.ok()) return ReportError(st);
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
  cmd->add_option("--response-profile", a->response_profiles,
                  "Response profile JSON for resp+S (ripplekv calibrate --objective response "
                  "--selector S); repeat it for several selectors");
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
                  "temperatures), chosen on the validation split; repeat it for settings tuned "
                  "per selection");
  cmd->add_option("--control-seeds", a->control_seeds,
                  "Maps of ripple-perm+S and spike+S given without k: k = 1..this")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--h2o-recent", a->h2o_recent,
                  "H2O: most recent tokens kept, the rest of the budget to heavy hitters (0: the "
                  "paper's half; KVCache-Factory keeps 8)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
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
