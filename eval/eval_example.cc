#include "eval/eval_example.h"

#include <array>
#include <utility>

namespace ripplekv::eval {
namespace {

constexpr std::array<std::pair<MetricKind, std::string_view>, 12> kMetricNames = {{
    {MetricKind::kStringMatchAll, "string_match_all"},
    {MetricKind::kStringMatchPart, "string_match_part"},
    {MetricKind::kQaF1, "qa_f1"},
    {MetricKind::kQaF1Zh, "qa_f1_zh"},
    {MetricKind::kRougeL, "rouge_l"},
    {MetricKind::kRougeLZh, "rouge_l_zh"},
    {MetricKind::kClassification, "classification"},
    {MetricKind::kRetrieval, "retrieval"},
    {MetricKind::kRetrievalZh, "retrieval_zh"},
    {MetricKind::kCount, "count"},
    {MetricKind::kCodeSim, "code_sim"},
    {MetricKind::kFidelity, "fidelity"},
}};

}  // namespace

std::string_view MetricKindName(MetricKind kind) {
  for (const auto& [k, name] : kMetricNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::optional<MetricKind> ParseMetricKind(std::string_view name) {
  for (const auto& [k, n] : kMetricNames) {
    if (n == name) return k;
  }
  return std::nullopt;
}

}  // namespace ripplekv::eval
