#pragma once
// Prometheus metrics (docs/OPERATIONS.md, "Metrics"): counters, gauges and histograms held in a
// registry that renders them in the Prometheus text exposition format (version 0.0.4), plus
// collectors that compute values at scrape time (jobs by state, database size, ...).
//
// Naming follows Prometheus' conventions, checked when a family is added: snake_case names with
// the `ripplekv_` prefix, base units (seconds, bytes), `_total` on counters and only on them.
// A family has a fixed set of label names; each distinct set of label values is one series.
//
// Thread-safety: every method of every class here may be called from any thread. Counter and
// Gauge updates are lock-free; a histogram observation takes the histogram's own mutex; Render
// takes the registry's mutex and then each collector, so a collector must not call the registry.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace ripplekv::telemetry {

// Label values of one series, in the order of the family's label names.
using LabelValues = std::vector<std::string>;

class Counter {
 public:
  // Adds `v` >= 0 (a negative `v` is ignored: counters only go up).
  void Add(double v = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds`: the buckets' upper bounds, strictly increasing, finite (+Inf is implied).
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, observations <= it; then +Inf (= count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Take() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), one more than bounds_
  double sum_ = 0;
};

// Buckets for durations in seconds from 1 ms to ~2 min, and for a store write from 50 us to 1 s.
std::vector<double> LatencyBuckets();
std::vector<double> StoreWriteBuckets();

// One series of a collected family: its label values and its value at this scrape.
struct Sample {
  LabelValues labels;
  double value = 0;
};
using Collector = std::function<std::vector<Sample>()>;

class MetricsRegistry {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // The series with these label values of the family `name` (added on first use with `help`
  // and `label_names`; later calls must give the same type and label names). Aborts on a name
  // that breaks the conventions above or a mismatch: those are programming errors. The returned
  // reference lives as long as the registry.
  Counter& GetCounter(std::string_view name, std::string_view help,
                      const std::vector<std::string>& label_names = {},
                      const LabelValues& labels = {});
  Gauge& GetGauge(std::string_view name, std::string_view help,
                  const std::vector<std::string>& label_names = {}, const LabelValues& labels = {});
  Histogram& GetHistogram(std::string_view name, std::string_view help,
                          const std::vector<double>& bounds,
                          const std::vector<std::string>& label_names = {},
                          const LabelValues& labels = {});

  // A family whose series `collect` returns at every scrape, label values in the order of
  // `label_names`; series it does not return that scrape are absent. `type` is kGauge or
  // kCounter. Called under the registry's mutex: it must not call the registry.
  void AddCollected(std::string_view name, std::string_view help, Type type,
                    const std::vector<std::string>& label_names, Collector collect);

  // Every family, sorted by name, in the text exposition format 0.0.4.
  std::string Render() const;

 private:
  struct Family {
    Type type = Type::kGauge;
    std::string help;
    std::vector<std::string> label_names;
    std::vector<double> bounds;  // histograms
    std::map<LabelValues, std::unique_ptr<Counter>> counters;
    std::map<LabelValues, std::unique_ptr<Gauge>> gauges;
    std::map<LabelValues, std::unique_ptr<Histogram>> histograms;
    Collector collect;  // collected families
  };
  Family& FamilyFor(std::string_view name, std::string_view help, Type type,
                    const std::vector<std::string>& label_names, const LabelValues& labels);

  mutable std::mutex mu_;
  std::map<std::string, Family, std::less<>> families_;
};

// `ripplekv_build_info{service, version}` = 1: which build a scraped process runs.
void AddBuildInfo(MetricsRegistry& registry, std::string_view service);

// Content type of Render()'s output for an HTTP response.
inline constexpr std::string_view kExpositionContentType =
    "text/plain; version=0.0.4; charset=utf-8";

}  // namespace ripplekv::telemetry
