#pragma once
// An SVG chart of a sensitivity profile: per-layer mean KL with standard-error bars (left axis)
// and the budget multipliers of a budget map (right axis), readable without the JSON.

#include <string>
#include <vector>

#include "base/status.h"

namespace ripplekv::cli {

struct ProfilePlotData {
  std::string title;                // e.g. model name and hash prefix
  std::string subtitle;             // parameters (alpha, trials, samples, ...)
  std::vector<int> layers;          // x axis
  std::vector<double> mean_kl;      // nats
  std::vector<double> stderr_kl;    // same length
  std::vector<double> multipliers;  // budget multipliers m_l (empty: not drawn)
  std::string multiplier_label;     // e.g. "budget multiplier (r = 4)"
};

// The SVG document. InvalidArgument when the series lengths differ or are empty.
StatusOr<std::string> RenderProfileSvg(const ProfilePlotData& data);

// Renders and writes atomically (temp file + rename); errors name the path.
Status WriteProfileSvg(const ProfilePlotData& data, const std::string& path);

}  // namespace ripplekv::cli
