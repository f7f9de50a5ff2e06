#pragma once
// How stable a sensitivity profile is under resampling of its calibration samples
// (docs/CALIBRATION.md, "Stability"): a seeded bootstrap over samples gives, per layer, an interval
// of the sensitivity and of the layer's budget share at a ratio, the rank correlation of the
// replicates with the profile and how often the most sensitive layer stays on top. Every profile
// method::AssembleProfile() builds carries one (with the defaults below); `ripplekv calibrate
// --until-stable` adds samples until it says `stable`.
//
// Replicate k draws n = params.samples sample indices with replacement (BootstrapDraw, one draw
// shared by every layer, so the layers' correlation is kept) and sets s*_l = mean of the layer's
// per_sample_mean over the drawn samples (with equal trials per sample this is the layer's mean
// KL over the resampled samples). A layer's share at ratio r is its budget over the average budget
// before bounds and rounding (method/budget_map.h, min-max normalization):
//   n_l = (s_l - min s) / (max s - min s),  m_l = r ^ n_l,  share_l = L * m_l / sum(m)
// (1 for every layer of a flat profile). Intervals are the replicates' (1 - level) / 2 and
// (1 + level) / 2 quantiles (method/resampling.h, type 7).
//
// Pure and deterministic: the same profile and options give the same bits. Thread-safe.

#include <cstdint>

#include "base/status.h"
#include "method/profile.h"

namespace ripplekv::method {

struct StabilityOptions {
  uint64_t seed = 0;
  int64_t resamples = 1000;  // replicates, >= 1
  double level = 0.90;       // interval coverage, in (0, 1)
  double ratio = 2.0;        // r of the shares (the `ripplekv budgets` default), >= 1
  double tolerance = 0.05;   // stable: every share interval within +-5% of the share
};

// The bootstrap of `profile` (which must pass ValidateProfile(); any stability block it carries is
// ignored). Errors: InvalidArgument for options out of range or a profile of one sample (nothing
// to resample); those of ValidateProfile().
[[nodiscard]] StatusOr<ProfileStability> ComputeStability(const SensitivityProfile& profile,
                                                          const StabilityOptions& options = {});

}  // namespace ripplekv::method
