#pragma once
// The budget-map parameters of method/budget_map.h as the API's BudgetParams message: one
// conversion for every edge that states them (the scheduler's adapters and the CLI). `format` is
// left unset (it is a request's choice, not a parameter of the map); context_len comes from
// max_context.
//
// Thread-safe (pure functions).

#include "method/budget_map.h"
#include "ripplekv/v1/calibration.pb.h"

namespace ripplekv::v1 {

BudgetParams BudgetParamsFromOptions(const method::BudgetOptions& options);

}  // namespace ripplekv::v1
