#include "proto/budget_params.h"

namespace ripplekv::v1 {
namespace {

Normalization NormalizationToProto(method::Normalization normalization) {
  switch (normalization) {
    case method::Normalization::kRank:
      return NORMALIZATION_RANK;
    case method::Normalization::kLogMinMax:
      return NORMALIZATION_LOG_MIN_MAX;
    case method::Normalization::kMinMax:
      break;
  }
  return NORMALIZATION_MIN_MAX;
}

}  // namespace

BudgetParams BudgetParamsFromOptions(const method::BudgetOptions& options) {
  BudgetParams params;
  if (options.total_tokens) {
    params.set_total_tokens(*options.total_tokens);
  } else {
    params.set_average_tokens(options.average_tokens);
  }
  params.set_ratio(options.ratio);
  params.set_min_tokens(options.min_tokens);
  if (options.max_tokens) params.set_max_tokens(*options.max_tokens);
  if (options.max_context) params.set_context_len(*options.max_context);
  params.set_normalization(NormalizationToProto(options.normalization));
  if (options.shrink_z != 0.0) params.set_shrink_z(options.shrink_z);
  params.set_per_head(options.per_head);
  return params;
}

}  // namespace ripplekv::v1
