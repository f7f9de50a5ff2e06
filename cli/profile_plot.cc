#include "cli/profile_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/strings.h"
#include "fmt/format.h"

namespace ripplekv::cli {

namespace {

constexpr double kWidth = 900, kHeight = 480;
constexpr double kLeft = 80, kRight = 80, kTop = 70, kBottom = 60;
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A "nice" axis maximum (1, 2, 2.5, 5 x 10^k) at or above v.
double NiceMax(double v) {
  if (!(v > 0)) return 1.0;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

// The document's opening: its size, a white background, the title and the subtitle.
std::string SvgBegin(const std::string& title, const std::string& subtitle) {
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kWidth, kHeight);
  s += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"16\" font-weight=\"bold\">{}</text>\n",
                   kLeft, Escape(title));
  s += fmt::format("<text x=\"{}\" y=\"44\" fill=\"#555\">{}</text>\n", kLeft, Escape(subtitle));
  return s;
}

// The plot area's frame and the document's end.
std::string SvgEnd() {
  return fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
      "stroke=\"#999\"/>\n</svg>\n",
      kLeft, kTop, kPlotWidth, kPlotHeight);
}

// The left axis of [0, y_max] in five steps with its grid lines, and its title.
std::string LeftAxis(double y_max, const std::function<double(double)>& y_of,
                     const std::string& title) {
  std::string s;
  for (int k = 0; k <= 5; ++k) {
    const double v = y_max * k / 5, y = y_of(v);
    s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#eee\"/>\n",
                     kLeft, y, kLeft + kPlotWidth, y);
    s += fmt::format(
        "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#1f77b4\">{:.3g}</text>\n",
        kLeft - 6, y + 4, v);
  }
  s += fmt::format(
      "<text transform=\"translate(20 {:.1f}) rotate(-90)\" text-anchor=\"middle\" "
      "fill=\"#1f77b4\">{}</text>\n",
      kTop + kPlotHeight / 2, title);
  return s;
}

// A polyline through `points` (x, y pairs in pixels).
std::string Polyline(const std::vector<std::pair<double, double>>& points, std::string_view style) {
  std::string coordinates;
  for (const auto& [x, y] : points) coordinates += fmt::format("{:.1f},{:.1f} ", x, y);
  return fmt::format("<polyline points=\"{}\" fill=\"none\" {}/>\n", coordinates, style);
}

// Writes `svg` to `path` atomically; errors name `flag` and the path.
Status WriteSvg(const std::string& svg, const std::string& path, std::string_view flag) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !out.write(svg.data(), static_cast<std::streamsize>(svg.size()))) {
      return absl::PermissionDeniedError(Cat("cannot write ", flag, " ", path));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    return absl::PermissionDeniedError(Cat("cannot write ", flag, " ", path, ": ", ec.message()));
  }
  return absl::OkStatus();
}

// Colours of a response profile's budget series, from the smallest budget (darkest) up.
constexpr std::string_view kSeriesColors[] = {"#00441b", "#006d2c", "#238b45",
                                              "#41ab5d", "#74c476", "#a1d99b"};

}  // namespace

StatusOr<std::string> RenderProfileSvg(const ProfilePlotData& d) {
  const size_t n = d.layers.size();
  if (n == 0 || d.mean_kl.size() != n || d.stderr_kl.size() != n ||
      (!d.multipliers.empty() && d.multipliers.size() != n)) {
    return absl::InvalidArgumentError("profile plot: empty or mismatched series");
  }
  for (const ProfilePlotData::ResponseSeries& series : d.response) {
    if (series.kl.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("profile plot: response series \"",
                                                     series.label, "\" has ", series.kl.size(),
                                                     " values for ", n, " layers"));
    }
  }
  double kl_max = 0;
  for (size_t i = 0; i < n; ++i) kl_max = std::max(kl_max, d.mean_kl[i] + d.stderr_kl[i]);
  for (const ProfilePlotData::ResponseSeries& series : d.response) {
    for (double kl : series.kl) kl_max = std::max(kl_max, kl);
  }
  kl_max = NiceMax(kl_max);
  double m_max = 0;
  for (double m : d.multipliers) m_max = std::max(m_max, m);
  m_max = NiceMax(m_max);
  const double slot = kPlotWidth / n;
  auto x_of = [&](size_t i) { return kLeft + slot * (i + 0.5); };
  auto y_kl = [&](double v) { return kTop + kPlotHeight * (1.0 - v / kl_max); };
  auto y_m = [&](double v) { return kTop + kPlotHeight * (1.0 - v / m_max); };

  std::string s = SvgBegin(d.title, d.subtitle);
  s += LeftAxis(kl_max, y_kl, "mean KL (nats) &#177; s.e.");
  // Bars with error bars.
  for (size_t i = 0; i < n; ++i) {
    const double x = x_of(i), bw = slot * 0.6;
    const double y = y_kl(d.mean_kl[i]);
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#1f77b4\" "
        "fill-opacity=\"0.75\"><title>layer {}: {:.4g} &#177; {:.2g}</title></rect>\n",
        x - bw / 2, y, bw, kTop + kPlotHeight - y, d.layers[i], d.mean_kl[i], d.stderr_kl[i]);
    const double lo = y_kl(std::max(0.0, d.mean_kl[i] - d.stderr_kl[i]));
    const double hi = y_kl(d.mean_kl[i] + d.stderr_kl[i]);
    s += fmt::format(
        "<path d=\"M{0:.1f} {1:.1f}V{2:.1f}M{3:.1f} {1:.1f}H{4:.1f}M{3:.1f} {2:.1f}H{4:.1f}\" "
        "stroke=\"#333\" fill=\"none\"/>\n",
        x, lo, hi, x - bw / 4, x + bw / 4);
    if (n <= 40 || i % 2 == 0) {
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x,
                       kTop + kPlotHeight + 16, d.layers[i]);
    }
  }
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">layer</text>\n",
                   kLeft + kPlotWidth / 2, kHeight - 16);
  // A response profile's KL at each budget: one line over the layers per budget, with a legend
  // above the plot's right end.
  for (size_t k = 0; k < d.response.size(); ++k) {
    const ProfilePlotData::ResponseSeries& series = d.response[k];
    const std::string_view color = kSeriesColors[std::min(k, std::size(kSeriesColors) - 1)];
    std::vector<std::pair<double, double>> points;
    for (size_t i = 0; i < n; ++i) points.emplace_back(x_of(i), y_kl(series.kl[i]));
    s += Polyline(points, fmt::format("stroke=\"{}\" stroke-width=\"1.5\"", color));
    const double legend_x = kLeft + kPlotWidth - 70.0 * (d.response.size() - k);
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"58\" x2=\"{1:.1f}\" y2=\"58\" stroke=\"{2}\" "
        "stroke-width=\"2\"/><text x=\"{3:.1f}\" y=\"62\" fill=\"{2}\">{4}</text>\n",
        legend_x, legend_x + 14, color, legend_x + 18, Escape(series.label));
  }
  // Right axis: budget multipliers.
  if (!d.multipliers.empty()) {
    std::vector<std::pair<double, double>> points;
    for (size_t i = 0; i < n; ++i) points.emplace_back(x_of(i), y_m(d.multipliers[i]));
    s += Polyline(points, "stroke=\"#d62728\" stroke-width=\"2\"");
    for (const auto& [x, y] : points) {
      s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"#d62728\"/>\n", x, y);
    }
    for (int k = 0; k <= 5; ++k) {
      const double v = m_max * k / 5;
      s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"#d62728\">{:.3g}</text>\n",
                       kLeft + kPlotWidth + 6, y_m(v) + 4, v);
    }
    s += fmt::format(
        "<text transform=\"translate({:.1f} {:.1f}) rotate(90)\" text-anchor=\"middle\" "
        "fill=\"#d62728\">{}</text>\n",
        kWidth - 20, kTop + kPlotHeight / 2, Escape(d.multiplier_label));
  }
  s += SvgEnd();
  return s;
}

Status WriteProfileSvg(const ProfilePlotData& data, const std::string& path) {
  ASSIGN_OR_RETURN(std::string svg, RenderProfileSvg(data));
  return WriteSvg(svg, path, "--plot");
}

StatusOr<std::string> RenderFrontierSvg(const FrontierPlotData& d) {
  const size_t n = d.average_tokens.size();
  if (n == 0 || d.predicted_kl.size() != n || (!d.hull_kl.empty() && d.hull_kl.size() != n)) {
    return absl::InvalidArgumentError("frontier plot: empty or mismatched series");
  }
  auto bad_kl = [](double kl) { return !std::isfinite(kl) || kl < 0; };
  for (size_t i = 0; i < n; ++i) {
    if (d.average_tokens[i] < 1 || (i > 0 && d.average_tokens[i] <= d.average_tokens[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat("frontier plot: average budget ",
                                                     d.average_tokens[i], " at ", i,
                                                     " is < 1 or does not rise"));
    }
    if (bad_kl(d.predicted_kl[i]) || (!d.hull_kl.empty() && bad_kl(d.hull_kl[i]))) {
      return absl::InvalidArgumentError(absl::StrCat("frontier plot: the KL at average budget ",
                                                     d.average_tokens[i],
                                                     " is not a finite value >= 0"));
    }
  }
  if ((d.max_kl && bad_kl(*d.max_kl)) ||
      (d.chosen && (d.chosen->average_tokens < 1 || bad_kl(d.chosen->predicted_kl)))) {
    return absl::InvalidArgumentError("frontier plot: a bad target or chosen point");
  }
  // x: ln(average budget) over the range of every point drawn, the chosen one included.
  double lo = static_cast<double>(d.average_tokens.front());
  double hi = static_cast<double>(d.average_tokens.back());
  double kl_max = *std::max_element(d.predicted_kl.begin(), d.predicted_kl.end());
  if (d.chosen) {
    lo = std::min(lo, static_cast<double>(d.chosen->average_tokens));
    hi = std::max(hi, static_cast<double>(d.chosen->average_tokens));
    kl_max = std::max(kl_max, d.chosen->predicted_kl);
  }
  if (d.max_kl) kl_max = std::max(kl_max, *d.max_kl);
  kl_max = NiceMax(kl_max);
  const double log_lo = std::log(lo), log_span = std::log(hi) - log_lo;
  // A margin of 4% of the width on each side, so the end points are not on the frame.
  auto x_of = [&](double average) {
    const double t = log_span > 0 ? (std::log(average) - log_lo) / log_span : 0.5;
    return kLeft + kPlotWidth * (0.04 + 0.92 * t);
  };
  auto y_of = [&](double kl) { return kTop + kPlotHeight * (1.0 - kl / kl_max); };

  std::string s = SvgBegin(d.title, d.subtitle);
  s += LeftAxis(kl_max, y_of, "predicted KL (nats, sum over layers)");
  // x ticks: the powers of two in range, or each point when fewer than two of them are.
  std::vector<double> ticks;
  for (int64_t p = 1; static_cast<double>(p) <= hi; p *= 2) {
    if (static_cast<double>(p) >= lo) ticks.push_back(static_cast<double>(p));
  }
  if (ticks.size() < 2) {
    ticks.assign(d.average_tokens.begin(), d.average_tokens.end());
  }
  for (double t : ticks) {
    const double x = x_of(t);
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#eee\"/>\n"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        x, kTop, kTop + kPlotHeight, kTop + kPlotHeight + 16, t);
  }
  s += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">average budget per layer "
      "(tokens, log scale)</text>\n",
      kLeft + kPlotWidth / 2, kHeight - 16);
  // The hull's lower bound, where it differs from the prediction (non-convex curves).
  bool hull_differs = false;
  for (size_t i = 0; i < d.hull_kl.size(); ++i) {
    hull_differs |= d.hull_kl[i] < d.predicted_kl[i] * (1 - 1e-9);
  }
  if (hull_differs) {
    std::vector<std::pair<double, double>> points;
    for (size_t i = 0; i < n; ++i) {
      points.emplace_back(x_of(static_cast<double>(d.average_tokens[i])), y_of(d.hull_kl[i]));
    }
    s += Polyline(points, "stroke=\"#7f7f7f\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"");
  }
  std::vector<std::pair<double, double>> points;
  for (size_t i = 0; i < n; ++i) {
    points.emplace_back(x_of(static_cast<double>(d.average_tokens[i])), y_of(d.predicted_kl[i]));
  }
  s += Polyline(points, "stroke=\"#1f77b4\" stroke-width=\"2\"");
  for (size_t i = 0; i < n; ++i) {
    s += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"#1f77b4\"><title>average {}: "
        "predicted KL {:.4g}{}</title></circle>\n",
        points[i].first, points[i].second, d.average_tokens[i], d.predicted_kl[i],
        d.hull_kl.empty() ? std::string() : fmt::format(", hull bound {:.4g}", d.hull_kl[i]));
  }
  if (d.max_kl) {
    const double y = y_of(*d.max_kl);
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#d62728\" "
        "stroke-dasharray=\"3 3\"/><text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\" "
        "fill=\"#d62728\">max KL {5:.4g}</text>\n",
        kLeft, y, kLeft + kPlotWidth, kLeft + kPlotWidth - 4, y - 4, *d.max_kl);
  }
  if (d.chosen) {
    const double x = x_of(static_cast<double>(d.chosen->average_tokens));
    const double y = y_of(d.chosen->predicted_kl);
    s += fmt::format(
        "<circle cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"7\" fill=\"none\" stroke=\"#d62728\" "
        "stroke-width=\"2\"/><text x=\"{2:.1f}\" y=\"{3:.1f}\" fill=\"#d62728\">chosen: average "
        "{4}, {5:.4g} nats</text>\n",
        x, y, x + 10, y - 10, d.chosen->average_tokens, d.chosen->predicted_kl);
  }
  // Legend.
  s += fmt::format(
      "<line x1=\"{0}\" y1=\"58\" x2=\"{1}\" y2=\"58\" stroke=\"#1f77b4\" stroke-width=\"2\"/>"
      "<text x=\"{2}\" y=\"62\">optimal map, predicted</text>\n",
      kLeft + kPlotWidth - 300, kLeft + kPlotWidth - 286, kLeft + kPlotWidth - 282);
  if (hull_differs) {
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"58\" x2=\"{1}\" y2=\"58\" stroke=\"#7f7f7f\" "
        "stroke-dasharray=\"6 4\"/><text x=\"{2}\" y=\"62\">hull lower bound</text>\n",
        kLeft + kPlotWidth - 130, kLeft + kPlotWidth - 116, kLeft + kPlotWidth - 112);
  }
  s += SvgEnd();
  return s;
}

Status WriteFrontierSvg(const FrontierPlotData& data, const std::string& path) {
  ASSIGN_OR_RETURN(std::string svg, RenderFrontierSvg(data));
  return WriteSvg(svg, path, "--frontier-svg");
}

}  // namespace ripplekv::cli
