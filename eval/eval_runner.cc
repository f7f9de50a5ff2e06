#include "eval/eval_runner.h"

#include <algorithm>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/compress/prefill_observer.h"
#include "eval/fidelity_task.h"
#include "eval/metrics.h"

namespace ripplekv::eval {
namespace {

bool IsFull(const Method& m) { return m.allocation == AllocationKind::kFull; }

// One method to run: a plain method with the run's settings, or a variant with its own.
struct Entry {
  std::string label;
  const Method* method;
  const CompressOptions* compress;
  const std::map<int, std::vector<int>>* budget_maps;
  const std::vector<int>* budgets;
};

std::vector<Entry> Entries(const EvalRunOptions& options) {
  std::vector<Entry> entries;
  for (const Method& m : options.methods) {
    entries.push_back({m.name, &m, &options.compress, &options.budget_maps, &options.budgets});
  }
  for (const MethodVariant& v : options.variants) {
    entries.push_back({v.label, &v.method, v.compress ? &*v.compress : &options.compress,
                       v.budget_maps.empty() ? &options.budget_maps : &v.budget_maps,
                       v.budgets.empty() ? &options.budgets : &v.budgets});
  }
  return entries;
}

// What the prefill must record so that every requested method can run from it.
ObserverOptions UnionOfNeeds(const std::vector<Entry>& entries, const CompressOptions& options) {
  ObserverOptions all{.window = options.window, .window_stats = false, .accumulated = false};
  for (const Entry& e : entries) {
    const ObserverOptions need = ObserverOptionsFor(*e.method, *e.compress);
    all.window_stats = all.window_stats || need.window_stats;
    all.accumulated = all.accumulated || need.accumulated;
  }
  return all;
}

struct Prefilled {
  worker::KvCache cache;
  ObservedPrefill observed;
};

// Prefill of the example's prompt into a cache with room for `extra` more tokens.
StatusOr<Prefilled> Prefill(const worker::Transformer& model, const EvalExample& example,
                            const ObserverOptions& observer, int extra) {
  const int n = static_cast<int>(example.prompt.size());
  worker::KvCache cache = model.NewCache(n + extra);
  ASSIGN_OR_RETURN(ObservedPrefill observed,
                   PrefillObserved(model, example.prompt, observer, cache));
  return Prefilled{std::move(cache), std::move(observed)};
}

// Lowest id among the maxima (the fidelity scorer's tie rule, so answers and scores agree).
int32_t Argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// Greedy decoding from a prefilled (possibly compressed) cache of an n-token prompt whose last
// logits are `first`. Stops before an end-of-generation token or after max_new tokens.
StatusOr<std::string> GreedyAnswer(const worker::Transformer& model,
                                   const worker::Tokenizer& tokenizer, std::span<const float> first,
                                   int n, int max_new, worker::KvCache& cache) {
  std::vector<int32_t> answer;
  int32_t token = Argmax(first);
  for (int i = 0; i < max_new && !tokenizer.IsEog(token); ++i) {
    answer.push_back(token);
    if (i + 1 == max_new) break;
    const int32_t position = n + i;
    worker::ForwardRequest request;
    request.tokens = std::span<const int32_t>(&token, 1);
    request.positions = std::span<const int32_t>(&position, 1);
    request.logits = worker::LogitRows::kLast;
    ASSIGN_OR_RETURN(worker::ForwardResult step, model.Forward(request, cache));
    token = Argmax(kernels::OnHost(std::move(step.logits)).span());
  }
  return tokenizer.Decode(answer, {.skip_special = true});
}

// [W, vocab] logits scoring each continuation token: row 0 is the prefill's last row, rows
// 1..W-1 come from teacher-forcing continuation[0..W-2] at positions n, n+1, ...
StatusOr<std::vector<float>> ContinuationLogits(const worker::Transformer& model,
                                                std::span<const float> first, int n,
                                                std::span<const int32_t> continuation,
                                                worker::KvCache& cache) {
  std::vector<float> logits(first.begin(), first.end());
  if (continuation.size() < 2) return logits;
  const std::span<const int32_t> forced = continuation.first(continuation.size() - 1);
  std::vector<int32_t> positions(forced.size());
  for (size_t i = 0; i < forced.size(); ++i) positions[i] = n + static_cast<int32_t>(i);
  worker::ForwardRequest request;
  request.tokens = forced;
  request.positions = positions;
  request.logits = worker::LogitRows::kAll;
  ASSIGN_OR_RETURN(worker::ForwardResult rows, model.Forward(request, cache));
  const kernels::Tensor host = kernels::OnHost(std::move(rows.logits));
  logits.insert(logits.end(), host.span().begin(), host.span().end());
  return logits;
}

// What one method × budget produced from its cache: an answer, or continuation logits.
struct Output {
  std::string answer;
  std::vector<float> logits;
};

StatusOr<Output> Run(const worker::Transformer& model, const worker::Tokenizer& tokenizer,
                     const EvalExample& example, std::span<const float> first,
                     worker::KvCache& cache) {
  const int n = static_cast<int>(example.prompt.size());
  Output out;
  if (example.metric == MetricKind::kFidelity) {
    ASSIGN_OR_RETURN(out.logits, ContinuationLogits(model, first, n, example.continuation, cache));
  } else {
    ASSIGN_OR_RETURN(out.answer,
                     GreedyAnswer(model, tokenizer, first, n, example.max_new_tokens, cache));
  }
  return out;
}

Status AddRecords(const EvalExample& example, const std::string& method, int budget,
                  const Output& out, const Output& full, int64_t vocab, ExampleRun& run) {
  if (example.metric != MetricKind::kFidelity) {
    run.records.push_back(
        {method, budget, example.task, example.id, ScoreAnswer(example, out.answer)});
    run.predictions[{method, budget}] = out.answer;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(FidelityScores s,
                   ScoreFidelity(full.logits, out.logits, vocab, example.continuation));
  run.records.push_back({method, budget, std::string(kFidelityKlTask), example.id, s.kl});
  run.records.push_back({method, budget, std::string(kFidelityTop1Task), example.id, s.top1});
  run.records.push_back(
      {method, budget, std::string(kFidelityDeltaNllTask), example.id, s.delta_nll()});
  return absl::OkStatus();
}

Status Validate(const worker::Transformer& model, const EvalExample& example,
                const EvalRunOptions& options) {
  if (options.methods.empty() && options.variants.empty()) {
    return absl::InvalidArgumentError("eval: no method given");
  }
  for (const MethodVariant& v : options.variants) {
    if (IsFull(v.method)) {
      return absl::InvalidArgumentError(absl::StrCat("eval: variant ", v.label, " of \"full\""));
    }
  }
  std::set<std::pair<std::string, int>> runs;  // (label, budget): each at most once
  for (const Entry& e : Entries(options)) {
    for (int b : *e.budgets) {
      if (!runs.insert({e.label, b}).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("eval: method \"", e.label, "\" at budget ", b, " given twice"));
      }
    }
    if (e.compress->window != options.compress.window) {
      return absl::InvalidArgumentError(absl::StrCat("eval: variant ", e.label, " has window ",
                                                     e.compress->window, ", the run ",
                                                     options.compress.window));
    }
    for (int b : *e.budgets) {
      if (b < 1) return absl::InvalidArgumentError(absl::StrCat("eval: budget ", b, " is < 1"));
      if (e.method->needs_budget_map() && !e.budget_maps->contains(b)) {
        return absl::InvalidArgumentError(
            absl::StrCat("eval: method ", e.label, " needs a budget map for budget ", b));
      }
    }
  }
  if (example.prompt.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("example ", example.id, ": empty prompt"));
  }
  const int64_t extra = example.metric == MetricKind::kFidelity
                            ? static_cast<int64_t>(example.continuation.size())
                            : example.max_new_tokens;
  const int64_t need = static_cast<int64_t>(example.prompt.size()) + extra;
  if (need > model.config().context_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("example ", example.id, ": ", example.prompt.size(), " prompt + ", extra,
                     " new tokens exceed the model's context of ", model.config().context_length));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<ExampleRun> EvaluateExample(const worker::Transformer& model,
                                     const worker::Tokenizer& tokenizer, const EvalExample& example,
                                     const EvalRunOptions& options) {
  RETURN_IF_ERROR(Validate(model, example, options));
  const bool fidelity = example.metric == MetricKind::kFidelity;
  const int extra = fidelity ? static_cast<int>(example.continuation.size())
                             : std::max(example.max_new_tokens, 1);
  const std::vector<Entry> entries = Entries(options);
  const ObserverOptions observer = UnionOfNeeds(entries, options.compress);
  const int64_t vocab = model.config().vocab_size;

  ExampleRun run;
  ASSIGN_OR_RETURN(Prefilled prefilled, Prefill(model, example, observer, extra));
  ++run.prefills;
  const kernels::Tensor first_logits = kernels::OnHost(std::move(prefilled.observed.logits));
  const std::vector<float> first(first_logits.span().begin(), first_logits.span().end());

  // The full cache: the reference of the fidelity scores, and the "full" method's answer.
  Output full;
  {
    worker::KvCache cache = prefilled.cache;
    ASSIGN_OR_RETURN(full, Run(model, tokenizer, example, first, cache));
  }
  const bool full_asked = std::any_of(options.methods.begin(), options.methods.end(), IsFull);
  if (full_asked) {
    RETURN_IF_ERROR(AddRecords(example, "full", kFullCacheBudget, full, full, vocab, run));
  }

  for (const Entry& e : entries) {
    const Method& method = *e.method;
    if (IsFull(method)) continue;
    for (int budget : *e.budgets) {
      std::optional<Prefilled> own;  // the per-method prefill of the baseline mode
      if (!options.shared_prefill) {
        // What a loop over methods would do: a prefill recording only this method's needs.
        ASSIGN_OR_RETURN(own,
                         Prefill(model, example, ObserverOptionsFor(method, *e.compress), extra));
        ++run.prefills;
      }
      const Prefilled& source = own ? *own : prefilled;
      std::span<const int> map;
      if (method.needs_budget_map()) map = e.budget_maps->at(budget);
      ASSIGN_OR_RETURN(std::vector<int> budgets,
                       PlanBudgets(method, budget, source.observed.layers, *e.compress, map));
      worker::KvCache cache =
          own ? std::move(own->cache) : prefilled.cache;  // a copy only if shared
      ASSIGN_OR_RETURN(CompressReport report,
                       CompressCache(method, budgets, source.observed.layers, *e.compress, cache));
      run.kept[{e.label, budget}] = std::move(report.kept);
      ASSIGN_OR_RETURN(Output out, Run(model, tokenizer, example, first, cache));
      RETURN_IF_ERROR(AddRecords(example, e.label, budget, out, full, vocab, run));
    }
  }
  return run;
}

}  // namespace ripplekv::eval
