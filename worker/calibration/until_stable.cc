#include "worker/calibration/until_stable.h"

#include <algorithm>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "method/calibration_params.h"
#include "method/profile_aggregate.h"
#include "spdlog/spdlog.h"

namespace ripplekv::worker {
namespace {

// The method's parameters of an until-stable calibration: the context's, in rounds.
method::CalibrationParams RoundsOf(const method::CalibrationParams& p) {
  method::CalibrationParams params = p;
  params.until_stable = true;
  return params;
}

}  // namespace

StatusOr<UntilStableResult> CalibrateUntilStable(const Transformer& model,
                                                 const SampleSource& samples,
                                                 const CalibrationOptions& options,
                                                 const ProfileContext& context,
                                                 const UntilStableOptions& until,
                                                 const CalibrationProgress& progress) {
  // The method's rules, the rounds' among them (method/calibration_params.h); the layers are
  // RunCalibration's to check against the model.
  const method::CalibrationParams rounds = RoundsOf(context.params);
  RETURN_IF_ERROR(method::ValidateCalibrationParams(rounds, /*n_layers=*/0));
  UntilStableResult out;
  std::vector<TrialKl> results;
  int done = 0;
  while (true) {
    const int target =
        static_cast<int>(method::NextRoundSamples(rounds.samples, rounds.max_samples, done));
    StatusOr<std::vector<CalibrationInput>> set = samples(target);
    if (!set.ok()) {
      return Status(set.status().code(),
                    absl::StrCat("--until-stable: ", set.status().message(), " (after ", done,
                                 " samples, not yet stable)"));
    }
    if (static_cast<int>(set->size()) != target) {
      return absl::InternalError(
          absl::StrCat("sample source returned ", set->size(), " samples, ", target, " asked"));
    }
    CalibrationOptions round = options;
    round.first_sample = done;
    ASSIGN_OR_RETURN(std::vector<TrialKl> more,
                     RunCalibration(model, std::span(*set).subspan(done), round, progress));
    results.insert(results.end(), more.begin(), more.end());
    done = target;
    out.rounds.push_back(done);

    ASSIGN_OR_RETURN(out.profile, method::AssembleProfile(
                                      context.model, method::MeasuredParams(rounds, done, "", ""),
                                      results, context.created_at));
    ASSIGN_OR_RETURN(out.profile.stability, method::ComputeStability(out.profile, until.stability));
    const method::ProfileStability& st = *out.profile.stability;
    spdlog::info(
        "--until-stable: {} samples, largest budget-share deviation {:.1f}% (target {:.1f}%)", done,
        100 * st.max_share_deviation, 100 * st.tolerance);
    if (st.stable) return out;
    if (done >= rounds.max_samples) {
      out.capped = true;
      return out;
    }
  }
}

}  // namespace ripplekv::worker
