#include "eval/example_lines.h"

#include "eval/split.h"
#include "nlohmann/json.hpp"

namespace ripplekv::eval {

void AddSplitAudit(const EvalExample& example, nlohmann::json& line) {
  if (!example.split) return;
  line["split"] = std::string(EvalSplitName(*example.split));
  line["region"] = {example.split_region.begin, example.split_region.end};
  if (!example.corpus_tokens.empty()) {
    line["corpus_tokens"] = {example.corpus_tokens.begin, example.corpus_tokens.end};
  }
}

std::string ExampleLine(const EvalExample& example) {
  using Json = nlohmann::json;
  Json line = {{"id", example.id},         {"task", example.task},
               {"source", example.source}, {"metric", std::string(MetricKindName(example.metric))},
               {"prompt", example.prompt}, {"max_new_tokens", example.max_new_tokens}};
  if (example.metric == MetricKind::kFidelity) {
    line["continuation"] = example.continuation;
  } else {
    line["answers"] = example.answers;
  }
  AddSplitAudit(example, line);
  std::string text = line.dump(-1, ' ', false, Json::error_handler_t::replace);
  text += '\n';
  return text;
}

}  // namespace ripplekv::eval
