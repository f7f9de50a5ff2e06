#pragma once
// Shared pieces of the commands that take or show a profile (calibrate, submit, profile get).

#include <string>
#include <vector>

#include "base/status.h"
#include "method/profile.h"

namespace ripplekv::cli {

// "0-3,7,10-12" → {0,1,2,3,7,10,11,12}; "" → {} (all layers). InvalidArgument names the part.
StatusOr<std::vector<int>> ParseLayerList(const std::string& text);

// The profile table on stdout: layer, mean KL, standard error, count, budget multiplier r^n for
// `ratio` (min-max normalization), and a bar; for a profile with a stability block also each
// layer's bootstrap intervals of the mean KL and of its budget share, and a summary line (top
// layer frequency, rank correlation, largest share deviation, stable or not); for a profile with a
// verification block (jobs the scheduler verified) also a line of its counts and one line per
// disagreement.
void PrintProfileTable(const method::SensitivityProfile& profile, double ratio);

// The profile's SVG chart (cli/profile_plot.h) with the budget multipliers r^n for `ratio`
// (min-max normalization), titled from the profile's model and parameters; written atomically.
[[nodiscard]] Status WriteProfilePlot(const method::SensitivityProfile& profile, double ratio,
                                      const std::string& path);

}  // namespace ripplekv::cli
