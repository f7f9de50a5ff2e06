// The registry's text exposition, checked against hand-written expected output.
#include "telemetry/metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace ripplekv::telemetry {
namespace {

TEST(MetricsTest, RendersCountersAndGaugesWithHelpTypeAndLabels) {
  MetricsRegistry registry;
  registry.GetCounter("ripplekv_things_total", "Things done.").Add(3);
  registry.GetGauge("ripplekv_level_bytes", "Bytes held.", {"device"}, {"cuda:0"}).Set(1.5);
  registry.GetGauge("ripplekv_level_bytes", "Bytes held.", {"device"}, {"cpu"}).Set(2);
  EXPECT_EQ(registry.Render(),
            "# HELP ripplekv_level_bytes Bytes held.\n"
            "# TYPE ripplekv_level_bytes gauge\n"
            "ripplekv_level_bytes{device=\"cpu\"} 2\n"
            "ripplekv_level_bytes{device=\"cuda:0\"} 1.5\n"
            "# HELP ripplekv_things_total Things done.\n"
            "# TYPE ripplekv_things_total counter\n"
            "ripplekv_things_total 3\n");
}

TEST(MetricsTest, SameSeriesIsReturnedAgain) {
  MetricsRegistry registry;
  Counter& a = registry.GetCounter("ripplekv_a_total", "A.", {"k"}, {"x"});
  Counter& b = registry.GetCounter("ripplekv_a_total", "A.", {"k"}, {"x"});
  EXPECT_EQ(&a, &b);
  a.Add(2);
  b.Add(-5);  // ignored: counters only go up
  EXPECT_EQ(a.value(), 2);
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  MetricsRegistry registry;
  Histogram& h = registry.GetHistogram("ripplekv_wait_seconds", "Waits.", {0.1, 1});
  h.Observe(0.05);
  h.Observe(0.1);  // on a bound: counted in that bucket (le)
  h.Observe(0.5);
  h.Observe(7);
  EXPECT_EQ(registry.Render(),
            "# HELP ripplekv_wait_seconds Waits.\n"
            "# TYPE ripplekv_wait_seconds histogram\n"
            "ripplekv_wait_seconds_bucket{le=\"0.1\"} 2\n"
            "ripplekv_wait_seconds_bucket{le=\"1\"} 3\n"
            "ripplekv_wait_seconds_bucket{le=\"+Inf\"} 4\n"
            "ripplekv_wait_seconds_sum 7.65\n"
            "ripplekv_wait_seconds_count 4\n");
}

TEST(MetricsTest, CollectedFamiliesAreComputedAtEveryScrape) {
  MetricsRegistry registry;
  int scrapes = 0;
  registry.AddCollected(
      "ripplekv_jobs", "Jobs by state.", MetricsRegistry::Type::kGauge, {"state"}, [&scrapes] {
        ++scrapes;
        return std::vector<Sample>{{{"running"}, double(scrapes)}, {{"failed"}, 0}};
      });
  registry.Render();
  EXPECT_EQ(registry.Render(),
            "# HELP ripplekv_jobs Jobs by state.\n"
            "# TYPE ripplekv_jobs gauge\n"
            "ripplekv_jobs{state=\"failed\"} 0\n"
            "ripplekv_jobs{state=\"running\"} 2\n");
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  MetricsRegistry registry;
  registry.GetGauge("ripplekv_x", "Line\\one\nline two.", {"v"}, {"a\"b\\c\nd"}).Set(1);
  EXPECT_EQ(registry.Render(),
            "# HELP ripplekv_x Line\\\\one\\nline two.\n"
            "# TYPE ripplekv_x gauge\n"
            "ripplekv_x{v=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(MetricsTest, ConcurrentUpdatesAreAllCounted) {
  MetricsRegistry registry;
  Counter& c = registry.GetCounter("ripplekv_n_total", "N.");
  Histogram& h = registry.GetHistogram("ripplekv_h_seconds", "H.", {1});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10'000; ++i) {
        c.Add();
        h.Observe(0.5);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(c.value(), 40'000);
  EXPECT_EQ(h.Take().count, 40'000u);
}

TEST(MetricsDeathTest, NamesBreakingTheConventionsAbort) {
  MetricsRegistry registry;
  EXPECT_DEATH(registry.GetCounter("ripplekv_things", "No _total."), "_total");
  EXPECT_DEATH(registry.GetGauge("ripplekv_things_total", "Gauge with _total."), "_total");
  EXPECT_DEATH(registry.GetGauge("things", "No prefix."), "prefix");
  EXPECT_DEATH(registry.GetGauge("ripplekv_CamelCase", "Case."), "snake_case");
  EXPECT_DEATH(registry.GetGauge("ripplekv_x", "Label.", {"le"}, {"1"}), "label");
  registry.GetGauge("ripplekv_y", "Y.");
  EXPECT_DEATH(registry.GetGauge("ripplekv_y", "Y.", {"a"}, {"b"}), "other label names");
  EXPECT_DEATH(registry.GetHistogram("ripplekv_z_seconds", "Z.", {1, 0.5}), "increasing");
}

}  // namespace
}  // namespace ripplekv::telemetry
