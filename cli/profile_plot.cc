#include "cli/profile_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "fmt/format.h"

namespace ripplekv::cli {

namespace {

constexpr double kWidth = 900, kHeight = 480;
constexpr double kLeft = 80, kRight = 80, kTop = 70, kBottom = 60;

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
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

}  // namespace

StatusOr<std::string> RenderProfileSvg(const ProfilePlotData& d) {
  const size_t n = d.layers.size();
  if (n == 0 || d.mean_kl.size() != n || d.stderr_kl.size() != n ||
      (!d.multipliers.empty() && d.multipliers.size() != n)) {
    return absl::InvalidArgumentError("profile plot: empty or mismatched series");
  }
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  double kl_max = 0;
  for (size_t i = 0; i < n; ++i) kl_max = std::max(kl_max, d.mean_kl[i] + d.stderr_kl[i]);
  kl_max = NiceMax(kl_max);
  double m_max = 0;
  for (double m : d.multipliers) m_max = std::max(m_max, m);
  m_max = NiceMax(m_max);
  const double slot = plot_w / n;
  auto x_of = [&](size_t i) { return kLeft + slot * (i + 0.5); };
  auto y_kl = [&](double v) { return kTop + plot_h * (1.0 - v / kl_max); };
  auto y_m = [&](double v) { return kTop + plot_h * (1.0 - v / m_max); };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kWidth, kHeight);
  s += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"16\" font-weight=\"bold\">{}</text>\n",
                   kLeft, Escape(d.title));
  s += fmt::format("<text x=\"{}\" y=\"44\" fill=\"#555\">{}</text>\n", kLeft, Escape(d.subtitle));
  // Grid and left axis (KL).
  for (int k = 0; k <= 5; ++k) {
    const double v = kl_max * k / 5, y = y_kl(v);
    s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#eee\"/>\n",
                     kLeft, y, kLeft + plot_w, y);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#1f77b4\">{:.3g}</text>\n",
                     kLeft - 6, y + 4, v);
  }
  s += fmt::format(
      "<text transform=\"translate(20 {:.1f}) rotate(-90)\" text-anchor=\"middle\" "
      "fill=\"#1f77b4\">mean KL (nats) &#177; s.e.</text>\n",
      kTop + plot_h / 2);
  // Bars with error bars.
  for (size_t i = 0; i < n; ++i) {
    const double x = x_of(i), bw = slot * 0.6;
    const double y = y_kl(d.mean_kl[i]);
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#1f77b4\" "
        "fill-opacity=\"0.75\"><title>layer {}: {:.4g} &#177; {:.2g}</title></rect>\n",
        x - bw / 2, y, bw, kTop + plot_h - y, d.layers[i], d.mean_kl[i], d.stderr_kl[i]);
    const double lo = y_kl(std::max(0.0, d.mean_kl[i] - d.stderr_kl[i]));
    const double hi = y_kl(d.mean_kl[i] + d.stderr_kl[i]);
    s += fmt::format(
        "<path d=\"M{0:.1f} {1:.1f}V{2:.1f}M{3:.1f} {1:.1f}H{4:.1f}M{3:.1f} {2:.1f}H{4:.1f}\" "
        "stroke=\"#333\" fill=\"none\"/>\n",
        x, lo, hi, x - bw / 4, x + bw / 4);
    if (n <= 40 || i % 2 == 0) {
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x,
                       kTop + plot_h + 16, d.layers[i]);
    }
  }
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">layer</text>\n",
                   kLeft + plot_w / 2, kHeight - 16);
  // Right axis: budget multipliers.
  if (!d.multipliers.empty()) {
    std::string points;
    for (size_t i = 0; i < n; ++i) {
      points += fmt::format("{:.1f},{:.1f} ", x_of(i), y_m(d.multipliers[i]));
    }
    s += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\"/>\n", points);
    for (size_t i = 0; i < n; ++i) {
      s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"#d62728\"/>\n", x_of(i),
                       y_m(d.multipliers[i]));
    }
    for (int k = 0; k <= 5; ++k) {
      const double v = m_max * k / 5;
      s += fmt::format(
          "<text x=\"{}\" y=\"{:.1f}\" fill=\"#d62728\">{:.3g}</text>\n", kLeft + plot_w + 6,
          y_m(v) + 4, v);
    }
    s += fmt::format(
        "<text transform=\"translate({:.1f} {:.1f}) rotate(90)\" text-anchor=\"middle\" "
        "fill=\"#d62728\">{}</text>\n",
        kWidth - 20, kTop + plot_h / 2, Escape(d.multiplier_label));
  }
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
                   "stroke=\"#999\"/>\n</svg>\n",
                   kLeft, kTop, plot_w, plot_h);
  return s;
}

Status WriteProfileSvg(const ProfilePlotData& data, const std::string& path) {
  ASSIGN_OR_RETURN(std::string svg, RenderProfileSvg(data));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !out.write(svg.data(), static_cast<std::streamsize>(svg.size()))) {
      return absl::PermissionDeniedError(absl::StrCat("cannot write --plot ", path));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot write --plot ", path, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace ripplekv::cli
