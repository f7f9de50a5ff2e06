// ripplekv eval --model M [--methods LIST] [--budgets 64,128,256] [--tasks LIST] [--profile P]
//   [--ratio R] [--budget-map F] [--samples N] [--prompt-len T,...] [--context-len C]
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
// from a built-in book or a file (worker/eval/corpus_file.h), from the region of --split only
// (worker/eval/split.h; checked before anything runs). stdout: the results table (markdown,
// --json or --csv); stderr: progress and the throughput line.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/model_session.h"
#include "cli/progress.h"
#include "kernels/base/file_io.h"
#include "kernels/base/strings.h"
#include "method/budget_format.h"
#include "method/budget_map.h"
#include "method/profile.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "worker/compress/method.h"
#include "worker/eval/eval_runner.h"
#include "worker/eval/fidelity_task.h"
#include "worker/eval/haystack.h"
#include "worker/eval/longbench.h"
#include "worker/eval/results_table.h"
#include "worker/eval/split.h"
#include "worker/eval/synthetic_tasks.h"
#include "worker/model/model_hash.h"

namespace ripplekv::cli {
namespace {

struct EvalArgs {
  std::string model;
  std::string methods = "full,snapkv,pyramidkv,cake,streaming,h2o";  // + ripple+snapkv w/ profile
  std::string budgets = "64,128,256";
  std::string tasks = "fidelity,passkey,kv-retrieval,multi-needle";
  std::string profile;
  double ratio = 2.0;
  std::string budget_map;
  int samples = 8;
  // Synthetic tasks: prompt lengths (tokens) and needle depths; every combination is generated.
  std::vector<int64_t> prompt_lens = {1024};
  int64_t context_len = 1024;  // fidelity: context tokens
  int64_t continuation = 64;   // fidelity: teacher-forced tokens
  std::vector<double> depths = {0.5};
  int kv_pairs = 0;                // kv-retrieval: 0 = the body is all pairs
  std::string kv_format = "uuid";  // kv-retrieval keys and values: uuid or short
  int needles = 4;                 // multi-needle
  std::string corpus = std::string(worker::kDefaultEvalCorpus);  // a built-in name or a file
  std::string split = "test";                                    // test or validation
  uint64_t seed = 0;
  bool chat = false;
  std::string longbench;
  std::string templates;
  int64_t max_prompt_tokens = 3500;
  int threads = DefaultThreads();
  ModelFlags model_flags;  // --weights, --device, --device-weights
  bool no_shared_prefill = false;
  bool json = false;
  bool csv = false;
  std::string json_out;     // also write the JSON table here
  std::string records_out;  // also write every per-example score here (JSONL)
};

StatusOr<std::vector<std::string>> SplitList(const std::string& text, std::string_view flag) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    out.emplace_back(part);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(Sv(flag), ": empty list"));
  return out;
}

StatusOr<std::vector<int>> ParseBudgets(const std::string& text) {
  ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitList(text, "--budgets"));
  std::vector<int> budgets;
  for (const std::string& p : parts) {
    int b = 0;
    if (!absl::SimpleAtoi(p, &b) || b < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--budgets: '", p, "' is not a positive token count"));
    }
    budgets.push_back(b);
  }
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  return budgets;
}

// The examples of every requested task, in task order. Examples drawn from the corpus are
// checked to stay inside the region of --split (an Internal error otherwise: never report them).
StatusOr<std::vector<worker::EvalExample>> MakeExamples(const EvalArgs& args,
                                                        const worker::Tokenizer& tokenizer) {
  ASSIGN_OR_RETURN(std::vector<std::string> tasks, SplitList(args.tasks, "--tasks"));
  const std::optional<worker::EvalSplit> split = worker::ParseEvalSplit(args.split);
  if (!split) {
    return absl::InvalidArgumentError(
        absl::StrCat("--split: '", args.split, "' is not test or validation"));
  }
  std::vector<worker::EvalExample> all;
  std::optional<worker::HaystackCorpus> corpus;
  auto load_corpus = [&]() -> Status {
    if (!corpus) {
      spdlog::info("tokenizing the {} corpus", args.corpus);
      ASSIGN_OR_RETURN(corpus, worker::LoadHaystackCorpus(args.corpus, tokenizer));
      const worker::TokenRange test = worker::SplitRegion(corpus->size(), worker::EvalSplit::kTest);
      const worker::TokenRange validation =
          worker::SplitRegion(corpus->size(), worker::EvalSplit::kValidation);
      spdlog::info(
          "{}: {} tokens; test region [{}, {}), validation region [{}, {}); drawing from "
          "the {} split",
          corpus->Describe(), corpus->size(), test.begin, test.end, validation.begin,
          validation.end, worker::EvalSplitName(*split));
    }
    return absl::OkStatus();
  };
  for (const std::string& task : tasks) {
    std::vector<worker::EvalExample> examples;
    if (task == "fidelity") {
      RETURN_IF_ERROR(load_corpus());
      ASSIGN_OR_RETURN(examples, worker::GenerateFidelity(*corpus, tokenizer,
                                                          {.context_len = args.context_len,
                                                           .continuation_len = args.continuation,
                                                           .num_examples = args.samples,
                                                           .seed = args.seed,
                                                           .split = *split}));
    } else if (task == "longbench") {
      if (args.longbench.empty()) {
        return absl::InvalidArgumentError("--tasks longbench needs --longbench FILE.jsonl");
      }
      if (*split != worker::EvalSplit::kTest) {
        // The file is used whole: its examples would be the test examples too.
        return absl::InvalidArgumentError(
            "--tasks longbench has no validation split (the --longbench file is used whole); "
            "evaluate it with --split test, or tune on the other tasks");
      }
      ASSIGN_OR_RETURN(std::vector<worker::LongBenchRecord> records,
                       worker::ReadLongBenchJsonl(args.longbench));
      worker::LongBenchTemplates templates;
      if (!args.templates.empty()) {
        ASSIGN_OR_RETURN(templates, worker::ReadLongBenchTemplates(args.templates));
      }
      ASSIGN_OR_RETURN(examples,
                       worker::MakeLongBenchExamples(records, templates, tokenizer,
                                                     {.max_prompt_tokens = args.max_prompt_tokens,
                                                      .chat = args.chat,
                                                      .max_per_dataset = args.samples}));
    } else if (auto synthetic = worker::ParseSyntheticTask(task)) {
      RETURN_IF_ERROR(load_corpus());
      // multi-needle spreads its needles itself; the depths apply to the single-needle tasks.
      const std::vector<double> depths = *synthetic == worker::SyntheticTask::kMultiNeedle
                                             ? std::vector<double>{args.depths.front()}
                                             : args.depths;
      for (int64_t length : args.prompt_lens) {
        for (double depth : depths) {
          worker::SyntheticOptions options;
          options.prompt_len = length;
          options.num_examples = args.samples;
          options.seed = args.seed;
          options.chat = args.chat;
          options.depth = depth;
          options.kv_pairs = args.kv_pairs;
          options.kv_format =
              args.kv_format == "short" ? worker::KvFormat::kShort : worker::KvFormat::kUuid;
          options.num_needles = args.needles;
          options.split = *split;
          ASSIGN_OR_RETURN(std::vector<worker::EvalExample> some,
                           worker::GenerateSynthetic(*synthetic, *corpus, tokenizer, options));
          for (worker::EvalExample& e : some) {
            // One column per length when several are asked (RULER reports by length); depths
            // are pooled within a length.
            if (args.prompt_lens.size() > 1) e.task = absl::StrCat(e.task, "/L", length);
            examples.push_back(std::move(e));
          }
        }
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--tasks: unknown task '", task,
                       "' (fidelity, passkey, kv-retrieval, multi-needle, longbench)"));
    }
    all.insert(all.end(), std::make_move_iterator(examples.begin()),
               std::make_move_iterator(examples.end()));
  }
  if (corpus) RETURN_IF_ERROR(worker::CheckSplitConfinement(all, corpus->size()));
  return all;
}

// Budget maps of the kMap methods per average budget: from --profile (RippleKV's mapping, as
// `ripplekv budgets`), or --budget-map (a map file, usable at its own average only).
StatusOr<std::map<int, std::vector<int>>> MakeBudgetMaps(const EvalArgs& args,
                                                         const std::vector<worker::Method>& methods,
                                                         const std::vector<int>& budgets,
                                                         const worker::CompressOptions& compress,
                                                         const ModelSession& session) {
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
  ASSIGN_OR_RETURN(method::SensitivityProfile profile, method::ReadProfileFile(args.profile));
  ASSIGN_OR_RETURN(std::string hash, worker::ModelHash(args.model));
  if (profile.model.hash != hash) {
    return absl::InvalidArgumentError(absl::StrCat(args.profile, ": profile of model ",
                                                   profile.model.hash.substr(0, 12), ", not of ",
                                                   hash.substr(0, 12), " (", args.model, ")"));
  }
  // Every layer keeps at least what the pickiest kMap selection needs (SnapKV: its window).
  int64_t min_tokens = 1;
  for (const worker::Method& m : methods) {
    if (!m.needs_budget_map()) continue;
    min_tokens = std::max<int64_t>(
        min_tokens, worker::MinBudget(m.selection, compress.selection, compress.window,
                                      std::numeric_limits<int>::max()));
  }
  for (int b : budgets) {
    method::BudgetOptions options;
    options.ratio = args.ratio;
    options.average_tokens = b;
    options.min_tokens = std::min<int64_t>(min_tokens, b);
    ASSIGN_OR_RETURN(method::BudgetMap map, method::ComputeBudgetMap(profile, options));
    maps[b].assign(map.tokens.begin(), map.tokens.end());
  }
  return maps;
}

int RunEval(const EvalArgs& args) {
  if (args.json && args.csv) {
    return ReportError(absl::InvalidArgumentError("give at most one of --json and --csv"));
  }
  std::string method_list = args.methods;
  if (!args.profile.empty() && method_list == EvalArgs().methods) method_list += ",ripple+snapkv";
  auto method_names = SplitList(method_list, "--methods");
  if (!method_names.ok()) return ReportError(method_names.status());
  std::vector<worker::Method> methods;
  for (const std::string& name : *method_names) {
    auto m = worker::ParseMethod(name);
    if (!m.ok()) return ReportError(m.status());
    methods.push_back(*std::move(m));
  }
  auto budgets = ParseBudgets(args.budgets);
  if (!budgets.ok()) return ReportError(budgets.status());

  auto session = OpenModel(args.model, args.threads, args.model_flags);
  if (!session.ok()) return ReportError(session.status());
  worker::EvalRunOptions run;
  run.methods = methods;
  run.budgets = *budgets;
  run.shared_prefill = !args.no_shared_prefill;
  auto maps = MakeBudgetMaps(args, methods, *budgets, run.compress, **session);
  if (!maps.ok()) return ReportError(maps.status());
  run.budget_maps = *std::move(maps);
  auto examples = MakeExamples(args, *(*session)->tokenizer);
  if (!examples.ok()) return ReportError(examples.status());

  std::vector<worker::ScoreRecord> records;
  std::string record_lines;  // --records-out: one JSON object per score
  int64_t prefills = 0;
  const auto start = std::chrono::steady_clock::now();
  {
    Progress progress("eval", static_cast<int64_t>(examples->size()), "examples");
    for (size_t i = 0; i < examples->size(); ++i) {
      const worker::EvalExample& example = (*examples)[i];
      auto result =
          worker::EvaluateExample(*(*session)->transformer, *(*session)->tokenizer, example, run);
      if (!result.ok()) return ReportError(result.status());
      for (const auto& [key, answer] : result->predictions) {
        spdlog::debug("{} {}@{}: {:?}", example.id, key.first, key.second, answer);
      }
      for (const worker::ScoreRecord& r : result->records) {
        nlohmann::json line = {{"method", r.method},
                               {"budget", r.budget},
                               {"task", r.task},
                               {"example", r.example_id},
                               {"score", r.score}};
        auto answer = result->predictions.find({r.method, r.budget});
        if (answer != result->predictions.end()) line["prediction"] = answer->second;
        if (example.split) {  // for an audit of the split: the region and the text's tokens
          line["split"] = std::string(worker::EvalSplitName(*example.split));
          line["region"] = {example.split_region.begin, example.split_region.end};
          if (!example.corpus_tokens.empty()) {
            line["corpus_tokens"] = {example.corpus_tokens.begin, example.corpus_tokens.end};
          }
        }
        record_lines += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        record_lines += '\n';
      }
      records.insert(records.end(), result->records.begin(), result->records.end());
      prefills += result->prefills;
      progress.Update(static_cast<int64_t>(i + 1));
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("{} examples, {} prefills, {:.1f} s: {:.2f} examples/min ({} methods x {} budgets)",
               examples->size(), prefills, seconds,
               seconds > 0 ? 60.0 * static_cast<double>(examples->size()) / seconds : 0.0,
               methods.size(), budgets->size());

  auto table = worker::BuildResultTable(records);
  if (!table.ok()) return ReportError(table.status());
  const worker::TableFormat format = args.json  ? worker::TableFormat::kJson
                                     : args.csv ? worker::TableFormat::kCsv
                                                : worker::TableFormat::kMarkdown;
  if (!args.records_out.empty()) {
    if (Status st = WriteFileAtomically(args.records_out, record_lines); !st.ok()) {
      return ReportError(st);
    }
    spdlog::info("wrote {}", args.records_out);
  }
  if (!args.json_out.empty()) {
    if (Status st = WriteFileAtomically(args.json_out, worker::RenderJson(*table)); !st.ok()) {
      return ReportError(st);
    }
    spdlog::info("wrote {}", args.json_out);
  }
  const std::string text = worker::RenderTable(*table, format);
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
  cmd->add_option("--tasks", a->tasks, "fidelity, passkey, kv-retrieval, multi-needle, longbench")
      ->capture_default_str();
  cmd->add_option("--profile", a->profile,
                  "Profile JSON for ripple+... (ripplekv calibrate --out)");
  cmd->add_option("--ratio", a->ratio, "RippleKV ratio r of the budget maps from --profile")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  cmd->add_option("--budget-map", a->budget_map, "Budget map file for map+... methods");
  cmd->add_option("--samples", a->samples, "Examples per task (LongBench: per dataset)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--prompt-len", a->prompt_lens,
                  "Synthetic tasks: prompt tokens, a list gives a column per length")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--context-len", a->context_len, "Fidelity: context tokens")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--continuation", a->continuation, "Fidelity: teacher-forced tokens scored")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--depth", a->depths,
                  "passkey / kv-retrieval: needle depths in [0, 1], pooled per length")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--kv-pairs", a->kv_pairs,
                  "kv-retrieval: pairs in one block inside the prose (0: the body is all pairs)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-format", a->kv_format, "kv-retrieval keys and values: uuid or short")
      ->capture_default_str()
      ->check(CLI::IsMember({"uuid", "short"}));
  cmd->add_option("--needles", a->needles, "multi-needle: needles in the haystack")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--corpus", a->corpus,
                  "Haystack and fidelity text: tom-sawyer, sherlock-holmes, or a file (plain "
                  "text; JSONL with a \"text\" field per line when it ends in .jsonl, .ndjson "
                  "or .json)")
      ->capture_default_str();
  cmd->add_option("--split", a->split,
                  "Corpus split: test (first half of the corpus tokens) or validation (second "
                  "half, other seeds), for choosing parameters")
      ->capture_default_str()
      ->check(CLI::IsMember({"test", "validation"}));
  cmd->add_option("--seed", a->seed, "Seed of the generated examples")->capture_default_str();
  cmd->add_flag("--chat", a->chat, "Wrap prompts in the model's chat template");
  cmd->add_option("--longbench", a->longbench, "LongBench-format JSONL for --tasks longbench");
  cmd->add_option("--templates", a->templates, "LongBench prompt templates (JSON)");
  cmd->add_option("--max-prompt-tokens", a->max_prompt_tokens,
                  "LongBench: truncate prompts to this many tokens (middle cut)")
      ->capture_default_str();
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
