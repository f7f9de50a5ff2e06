#include "cli/eval_setup.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/strings.h"
#include "cli/model_session.h"
#include "cli/progress.h"
#include "eval/fidelity_task.h"
#include "eval/longbench.h"
#include "eval/split.h"
#include "eval/synthetic_tasks.h"
#include "method/budget_map.h"
#include "spdlog/spdlog.h"
#include "worker/model/model_hash.h"

namespace ripplekv::cli {

void AddExampleFlags(CLI::App* cmd, ExampleFlags& f) {
  cmd->add_option("--tasks", f.tasks, "fidelity, passkey, kv-retrieval, multi-needle, longbench")
      ->capture_default_str();
  cmd->add_option("--samples", f.samples, "Examples per task (LongBench: per dataset)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--prompt-len", f.prompt_lens,
                  "Synthetic tasks: prompt tokens, a list gives a column per length")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--context-len", f.context_len, "Fidelity: context tokens")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--continuation", f.continuation, "Fidelity: teacher-forced tokens scored")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--depth", f.depths,
                  "passkey / kv-retrieval: needle depths in [0, 1], pooled per length")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--by-depth", f.by_depth,
                "passkey / kv-retrieval: a result per length and depth (task "
                "passkey/L<len>/d<depth>) instead of pooling the depths of a length");
  cmd->add_option("--kv-pairs", f.kv_pairs,
                  "kv-retrieval: pairs in one block inside the prose (0: the body is all pairs)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-format", f.kv_format, "kv-retrieval keys and values: uuid or short")
      ->capture_default_str()
      ->check(CLI::IsMember({"uuid", "short"}));
  cmd->add_option("--needles", f.needles, "multi-needle: needles in the haystack")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--corpus", f.corpus,
                  "Haystack and fidelity text: tom-sawyer, sherlock-holmes, or a file (plain "
                  "text; JSONL with a \"text\" field per line when it ends in .jsonl, .ndjson "
                  "or .json)")
      ->capture_default_str();
  cmd->add_option("--split", f.split,
                  "Corpus split: test (first half of the corpus tokens) or validation (second "
                  "half, other seeds), for choosing parameters")
      ->capture_default_str()
      ->check(CLI::IsMember({"test", "validation"}));
  cmd->add_option("--seed", f.seed, "Seed of the generated examples")->capture_default_str();
  cmd->add_flag("--chat", f.chat, "Wrap prompts in the model's chat template");
  cmd->add_option("--longbench", f.longbench, "LongBench-format JSONL for --tasks longbench");
  cmd->add_option("--templates", f.templates, "LongBench prompt templates (JSON)");
  cmd->add_option("--max-prompt-tokens", f.max_prompt_tokens,
                  "LongBench: truncate prompts to this many tokens (middle cut)")
      ->capture_default_str();
}

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

StatusOr<std::vector<eval::Method>> ParseMethods(const std::string& list) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, SplitList(list, "--methods"));
  std::vector<eval::Method> methods;
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(eval::Method m, eval::ParseMethod(name));
    methods.push_back(std::move(m));
  }
  return methods;
}

StatusOr<std::vector<eval::EvalExample>> MakeExamples(const ExampleFlags& args,
                                                      const worker::Tokenizer& tokenizer) {
  ASSIGN_OR_RETURN(std::vector<std::string> tasks, SplitList(args.tasks, "--tasks"));
  const std::optional<eval::EvalSplit> split = eval::ParseEvalSplit(args.split);
  if (!split) {
    return absl::InvalidArgumentError(
        absl::StrCat("--split: '", args.split, "' is not test or validation"));
  }
  std::vector<eval::EvalExample> all;
  std::optional<eval::HaystackCorpus> corpus;
  auto load_corpus = [&]() -> Status {
    if (!corpus) {
      spdlog::info("tokenizing the {} corpus", args.corpus);
      ASSIGN_OR_RETURN(corpus, eval::LoadHaystackCorpus(args.corpus, tokenizer));
      const eval::TokenRange test = eval::SplitRegion(corpus->size(), eval::EvalSplit::kTest);
      const eval::TokenRange validation =
          eval::SplitRegion(corpus->size(), eval::EvalSplit::kValidation);
      spdlog::info(
          "{}: {} tokens; test region [{}, {}), validation region [{}, {}); drawing from "
          "the {} split",
          corpus->Describe(), corpus->size(), test.begin, test.end, validation.begin,
          validation.end, eval::EvalSplitName(*split));
    }
    return absl::OkStatus();
  };
  for (const std::string& task : tasks) {
    std::vector<eval::EvalExample> examples;
    if (task == "fidelity") {
      RETURN_IF_ERROR(load_corpus());
      ASSIGN_OR_RETURN(examples, eval::GenerateFidelity(*corpus, tokenizer,
                                                        {.context_len = args.context_len,
                                                         .continuation_len = args.continuation,
                                                         .num_examples = args.samples,
                                                         .seed = args.seed,
                                                         .split = *split}));
    } else if (task == "longbench") {
      if (args.longbench.empty()) {
        return absl::InvalidArgumentError("--tasks longbench needs --longbench FILE.jsonl");
      }
      if (*split != eval::EvalSplit::kTest) {
        // The file is used whole: its examples would be the test examples too.
        return absl::InvalidArgumentError(
            "--tasks longbench has no validation split (the --longbench file is used whole); "
            "evaluate it with --split test, or tune on the other tasks");
      }
      ASSIGN_OR_RETURN(std::vector<eval::LongBenchRecord> records,
                       eval::ReadLongBenchJsonl(args.longbench));
      eval::LongBenchTemplates templates;
      if (!args.templates.empty()) {
        ASSIGN_OR_RETURN(templates, eval::ReadLongBenchTemplates(args.templates));
      }
      ASSIGN_OR_RETURN(examples,
                       eval::MakeLongBenchExamples(records, templates, tokenizer,
                                                   {.max_prompt_tokens = args.max_prompt_tokens,
                                                    .chat = args.chat,
                                                    .max_per_dataset = args.samples}));
    } else if (auto synthetic = eval::ParseSyntheticTask(task)) {
      RETURN_IF_ERROR(load_corpus());
      // multi-needle spreads its needles itself; the depths apply to the single-needle tasks.
      const std::vector<double> depths = *synthetic == eval::SyntheticTask::kMultiNeedle
                                             ? std::vector<double>{args.depths.front()}
                                             : args.depths;
      for (int64_t length : args.prompt_lens) {
        for (double depth : depths) {
          eval::SyntheticOptions options;
          options.prompt_len = length;
          options.num_examples = args.samples;
          options.seed = args.seed;
          options.chat = args.chat;
          options.depth = depth;
          options.kv_pairs = args.kv_pairs;
          options.kv_format =
              args.kv_format == "short" ? eval::KvFormat::kShort : eval::KvFormat::kUuid;
          options.num_needles = args.needles;
          options.split = *split;
          ASSIGN_OR_RETURN(std::vector<eval::EvalExample> some,
                           eval::GenerateSynthetic(*synthetic, *corpus, tokenizer, options));
          for (eval::EvalExample& e : some) {
            // One column per length when several are asked (RULER reports by length); depths
            // are pooled within a length unless --by-depth asks for a column per length and
            // depth.
            if (args.by_depth || args.prompt_lens.size() > 1) {
              e.task = absl::StrCat(e.task, "/L", length);
            }
            if (args.by_depth && *synthetic != eval::SyntheticTask::kMultiNeedle) {
              e.task = absl::StrCat(e.task, "/d", depth);
            }
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
  if (corpus) RETURN_IF_ERROR(eval::CheckSplitConfinement(all, corpus->size()));
  return all;
}

int64_t MapMinTokens(const std::vector<eval::Method>& methods,
                     const eval::CompressOptions& compress) {
  int64_t min_tokens = 1;
  for (const eval::Method& m : methods) {
    if (!m.needs_budget_map()) continue;
    min_tokens = std::max<int64_t>(min_tokens,
                                   eval::MinBudget(m.selection, compress.selection, compress.window,
                                                   std::numeric_limits<int>::max()));
  }
  return min_tokens;
}

StatusOr<std::map<int, std::vector<int>>> RippleMaps(const method::SensitivityProfile& profile,
                                                     const std::vector<int>& budgets,
                                                     const RippleMapSettings& settings) {
  ASSIGN_OR_RETURN(const std::vector<double> sensitivities,
                   method::LayerSensitivities(profile, settings.shrink_z));
  std::map<int, std::vector<int>> maps;
  for (int b : budgets) {
    method::BudgetOptions options;
    const auto tuned = settings.tuned_ratios.find(b);
    options.ratio = tuned != settings.tuned_ratios.end() ? tuned->second : settings.ratio;
    options.average_tokens = b;
    options.min_tokens = std::min<int64_t>(settings.min_tokens, b);
    options.normalization = settings.normalization;
    ASSIGN_OR_RETURN(const std::vector<int64_t> tokens,
                     eval::ControlMap(sensitivities, options, settings.control));
    maps[b].assign(tokens.begin(), tokens.end());
  }
  return maps;
}

StatusOr<std::map<int, std::vector<int>>> ResponseMaps(const method::SensitivityProfile& profile,
                                                       const std::vector<int>& budgets,
                                                       int64_t min_tokens) {
  if (profile.params.objective != method::Objective::kResponse) {
    return absl::FailedPreconditionError(
        "resp+... needs a response profile (ripplekv calibrate --objective response)");
  }
  std::map<int, std::vector<int>> maps;
  for (int b : budgets) {
    method::BudgetOptions options;
    options.average_tokens = b;
    options.min_tokens = std::min<int64_t>(min_tokens, b);
    ASSIGN_OR_RETURN(const method::BudgetMap map, method::ComputeBudgetMap(profile, options));
    maps[b].assign(map.tokens.begin(), map.tokens.end());
  }
  return maps;
}

StatusOr<method::SensitivityProfile> ReadProfileOfModel(const std::string& path,
                                                        const std::string& model_path) {
  ASSIGN_OR_RETURN(method::SensitivityProfile profile, method::ReadProfileFile(path));
  ASSIGN_OR_RETURN(std::string hash, worker::ModelHash(model_path));
  if (profile.model.hash != hash) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": profile of model ",
                                                   profile.model.hash.substr(0, 12), ", not of ",
                                                   hash.substr(0, 12), " (", model_path, ")"));
  }
  return profile;
}

StatusOr<eval::ScoredRun> ScoreExamples(const worker::Engine& session,
                                        const std::vector<eval::EvalExample>& examples,
                                        const eval::EvalRunOptions& run) {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<eval::ScoredRun> out;
  {
    Progress progress("eval", static_cast<int64_t>(examples.size()), "examples");
    out = eval::ScoreExamples(*session.transformer, *session.tokenizer, examples, run,
                              [&progress](int64_t done) { progress.Update(done); });
  }
  if (!out.ok()) return out.status();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info(
      "{} examples, {} prefills, {:.1f} s: {:.2f} examples/min ({} methods and {} "
      "variants x {} budgets)",
      examples.size(), out->prefills, seconds,
      seconds > 0 ? 60.0 * static_cast<double>(examples.size()) / seconds : 0.0, run.methods.size(),
      run.variants.size(), run.budgets.size());
  return out;
}

}  // namespace ripplekv::cli
