#pragma once
// SVG charts readable without the JSON:
//   - a profile: per-layer mean KL with standard-error bars (left axis), a response profile's KL
//     at each budget of its grid as one line per budget (left axis), and the budget multipliers
//     of a budget map (right axis);
//   - a response profile's frontier (`ripplekv budgets --frontier-svg`): the predicted KL of the
//     optimal map against the average budget, on a log-scaled budget axis.
// Both are written atomically (temp file + rename).

#include <cstdint>
#include <optional>
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
  // A response profile's points: one series per budget of its grid (empty: none drawn).
  struct ResponseSeries {
    std::string label;       // e.g. "b = 64"
    std::vector<double> kl;  // each layer's KL at that budget, nats; one per entry of `layers`
  };
  std::vector<ResponseSeries> response;
};

// The SVG document. InvalidArgument when the series lengths differ or are empty.
StatusOr<std::string> RenderProfileSvg(const ProfilePlotData& data);

// Renders and writes atomically (temp file + rename); errors name the path.
Status WriteProfileSvg(const ProfilePlotData& data, const std::string& path);

// A response profile's frontier: quality predicted from memory.
struct FrontierPlotData {
  std::string title;                    // e.g. model name and hash prefix
  std::string subtitle;                 // selector, layers, bounds
  std::vector<int64_t> average_tokens;  // x, tokens, >= 1, strictly ascending
  std::vector<double> predicted_kl;     // the optimal map's predicted KL at each, nats
  // The hulls' lower bound at each, nats (drawn dashed where it is below predicted_kl; empty: not
  // drawn).
  std::vector<double> hull_kl;
  std::optional<double> max_kl;  // a target, nats, drawn as a horizontal line (`--max-kl`)
  // The map chosen (`--max-kl` or `--avg-budget`): its average budget and predicted KL, marked.
  struct Chosen {
    int64_t average_tokens = 0;
    double predicted_kl = 0.0;
  };
  std::optional<Chosen> chosen;
};

// The SVG document. InvalidArgument when the series are empty or their lengths differ, an
// average is < 1 or not ascending, or a KL is negative or not finite.
StatusOr<std::string> RenderFrontierSvg(const FrontierPlotData& data);

// Renders and writes atomically (temp file + rename); errors name the path.
Status WriteFrontierSvg(const FrontierPlotData& data, const std::string& path);

}  // namespace ripplekv::cli
