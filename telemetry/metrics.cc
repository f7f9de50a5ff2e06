#include "telemetry/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>

#include "base/version.h"

namespace ripplekv::telemetry {
namespace {

// Aborts with `why`: a metric defined against the conventions is a programming error.
[[noreturn]] void Misdefined(std::string_view name, std::string_view why) {
  std::fprintf(stderr, "metric %.*s: %.*s\n", static_cast<int>(name.size()), name.data(),
               static_cast<int>(why.size()), why.data());
  std::abort();
}

void CheckName(std::string_view name, MetricsRegistry::Type type,
               const std::vector<std::string>& label_names) {
  static const std::regex kName("ripplekv_[a-z0-9_]*[a-z0-9]");
  static const std::regex kLabel("[a-z][a-z0-9_]*");
  if (!std::regex_match(name.begin(), name.end(), kName)) {
    Misdefined(name, "not a snake_case name with the ripplekv_ prefix");
  }
  const bool total = name.ends_with("_total");
  if ((type == MetricsRegistry::Type::kCounter) != total) {
    Misdefined(name, "counters, and only counters, end in _total");
  }
  for (const std::string& label : label_names) {
    if (!std::regex_match(label, kLabel) || label == "le" || label.starts_with("__")) {
      Misdefined(name, "bad label name " + label);
    }
  }
}

// A sample value as Prometheus writes it: integers without a fraction, +Inf, -Inf, NaN.
std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
    return buf;
  }
  for (int precision = 15; precision <= 17; ++precision) {  // the shortest that reads back
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// Label values escape backslash, double quote and newline; HELP text backslash and newline.
std::string Escape(std::string_view s, bool quote) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="x",b="y"}` (with `extra`, e.g. le="0.5", last), or "" without labels.
std::string LabelSet(const std::vector<std::string>& names, const LabelValues& values,
                     std::string_view extra = {}) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += out.empty() ? "{" : ",";
    out += names[i] + "=\"" + Escape(values[i], true) + "\"";
  }
  if (!extra.empty()) {
    out += out.empty() ? "{" : ",";
    out += extra;
  }
  if (!out.empty()) out += "}";
  return out;
}

std::string_view TypeName(MetricsRegistry::Type type) {
  switch (type) {
    case MetricsRegistry::Type::kCounter:
      return "counter";
    case MetricsRegistry::Type::kGauge:
      return "gauge";
    case MetricsRegistry::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

void Counter::Add(double v) {
  if (v > 0) value_.fetch_add(v, std::memory_order_relaxed);
}

void Gauge::Add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && bounds_[i] <= bounds_[i - 1])) {
      Misdefined("histogram", "bucket bounds must be finite and strictly increasing");
    }
  }
}

void Histogram::Observe(double v) {
  // The first bucket whose upper bound is >= v (Prometheus buckets are "less or equal").
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  std::lock_guard lock(mu_);
  ++counts_[bucket];
  sum_ += v;
}

Histogram::Snapshot Histogram::Take() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard lock(mu_);
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = sum_;
  return s;
}

std::vector<double> LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250};
}

std::vector<double> StoreWriteBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
          0.01,    0.025,  0.05,    0.1,    0.25,  0.5,    1};
}

MetricsRegistry::Family& MetricsRegistry::FamilyFor(std::string_view name, std::string_view help,
                                                    Type type,
                                                    const std::vector<std::string>& label_names,
                                                    const LabelValues& labels) {
  if (labels.size() != label_names.size()) Misdefined(name, "label values do not match names");
  auto it = families_.find(name);
  if (it == families_.end()) {
    CheckName(name, type, label_names);
    it = families_.emplace(std::string(name), Family{}).first;
    it->second.type = type;
    it->second.help = std::string(help);
    it->second.label_names = label_names;
  } else if (it->second.type != type || it->second.label_names != label_names) {
    Misdefined(name, "defined again with another type or other label names");
  }
  return it->second;
}

Counter& MetricsRegistry::GetCounter(std::string_view name, std::string_view help,
                                     const std::vector<std::string>& label_names,
                                     const LabelValues& labels) {
  std::lock_guard lock(mu_);
  Family& f = FamilyFor(name, help, Type::kCounter, label_names, labels);
  if (f.collect) Misdefined(name, "is a collected family");
  std::unique_ptr<Counter>& c = f.counters[labels];
  if (!c) c = std::make_unique<Counter>();
  return *c;
}

Gauge& MetricsRegistry::GetGauge(std::string_view name, std::string_view help,
                                 const std::vector<std::string>& label_names,
                                 const LabelValues& labels) {
  std::lock_guard lock(mu_);
  Family& f = FamilyFor(name, help, Type::kGauge, label_names, labels);
  if (f.collect) Misdefined(name, "is a collected family");
  std::unique_ptr<Gauge>& g = f.gauges[labels];
  if (!g) g = std::make_unique<Gauge>();
  return *g;
}

Histogram& MetricsRegistry::GetHistogram(std::string_view name, std::string_view help,
                                         const std::vector<double>& bounds,
                                         const std::vector<std::string>& label_names,
                                         const LabelValues& labels) {
  std::lock_guard lock(mu_);
  Family& f = FamilyFor(name, help, Type::kHistogram, label_names, labels);
  if (f.bounds.empty()) {
    f.bounds = bounds;
  } else if (f.bounds != bounds) {
    Misdefined(name, "defined again with other buckets");
  }
  std::unique_ptr<Histogram>& h = f.histograms[labels];
  if (!h) h = std::make_unique<Histogram>(bounds);
  return *h;
}

void MetricsRegistry::AddCollected(std::string_view name, std::string_view help, Type type,
                                   const std::vector<std::string>& label_names, Collector collect) {
  if (type == Type::kHistogram) Misdefined(name, "collected families are gauges or counters");
  std::lock_guard lock(mu_);
  if (families_.contains(name)) Misdefined(name, "defined twice");
  Family& f = FamilyFor(name, help, type, label_names, LabelValues(label_names.size()));
  f.collect = std::move(collect);
}

std::string MetricsRegistry::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP " + name + " " + Escape(f.help, false) + "\n";
    out += "# TYPE " + name + " " + std::string(TypeName(f.type)) + "\n";
    auto line = [&](std::string_view series, const std::string& labels, double v) {
      out.append(series);
      out += labels + " " + FormatValue(v) + "\n";
    };
    if (f.collect) {
      std::vector<Sample> samples = f.collect();
      std::sort(samples.begin(), samples.end(),
                [](const Sample& a, const Sample& b) { return a.labels < b.labels; });
      for (const Sample& s : samples) {
        if (s.labels.size() != f.label_names.size()) continue;  // a collector's slip: skipped
        line(name, LabelSet(f.label_names, s.labels), s.value);
      }
    }
    for (const auto& [labels, c] : f.counters) {
      line(name, LabelSet(f.label_names, labels), c->value());
    }
    for (const auto& [labels, g] : f.gauges) {
      line(name, LabelSet(f.label_names, labels), g->value());
    }
    for (const auto& [labels, h] : f.histograms) {
      const Histogram::Snapshot s = h->Take();
      for (size_t i = 0; i <= s.bounds.size(); ++i) {
        const std::string le =
            "le=\"" + (i < s.bounds.size() ? FormatValue(s.bounds[i]) : "+Inf") + "\"";
        line(name + "_bucket", LabelSet(f.label_names, labels, le),
             static_cast<double>(s.cumulative[i]));
      }
      line(name + "_sum", LabelSet(f.label_names, labels), s.sum);
      line(name + "_count", LabelSet(f.label_names, labels), static_cast<double>(s.count));
    }
  }
  return out;
}

void AddBuildInfo(MetricsRegistry& registry, std::string_view service) {
  registry
      .GetGauge("ripplekv_build_info", "The build this process runs (always 1).",
                {"service", "version"}, {std::string(service), std::string(Version())})
      .Set(1);
}

}  // namespace ripplekv::telemetry
