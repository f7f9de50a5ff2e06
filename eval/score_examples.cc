#include "eval/score_examples.h"

#include "spdlog/spdlog.h"

namespace ripplekv::eval {

StatusOr<ScoredRun> ScoreExamples(const worker::Transformer& model,
                                  const worker::Tokenizer& tokenizer,
                                  const std::vector<EvalExample>& examples,
                                  const EvalRunOptions& run,
                                  const std::function<void(int64_t)>& on_example) {
  ScoredRun out;
  for (size_t i = 0; i < examples.size(); ++i) {
    const EvalExample& example = examples[i];
    ASSIGN_OR_RETURN(ExampleRun result, EvaluateExample(model, tokenizer, example, run));
    for (const auto& [key, answer] : result.predictions) {
      spdlog::debug("{} {}@{}: {:?}", example.id, key.first, key.second, answer);
    }
    for (const ScoreRecord& r : result.records) {
      const auto answer = result.predictions.find({r.method, r.budget});
      out.record_lines +=
          RecordLine(r, example, answer != result.predictions.end() ? &answer->second : nullptr);
    }
    out.records.insert(out.records.end(), result.records.begin(), result.records.end());
    out.prefills += result.prefills;
    if (on_example) on_example(static_cast<int64_t>(i + 1));
  }
  return out;
}

}  // namespace ripplekv::eval
