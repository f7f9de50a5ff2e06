// The metrics endpoint over real HTTP on loopback.
#include "telemetry/metrics_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

namespace ripplekv::telemetry {
namespace {

TEST(MetricsServerTest, ServesTheRegistryOnMetricsOnly) {
  MetricsRegistry registry;
  Counter& c = registry.GetCounter("ripplekv_requests_total", "Requests.");
  auto server = MetricsServer::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  c.Add(4);
  httplib::Result res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), kExpositionContentType);
  EXPECT_NE(res->body.find("ripplekv_requests_total 4\n"), std::string::npos) << res->body;
  httplib::Result other = client.Get("/");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  (*server)->Stop();
  (*server)->Stop();  // idempotent
  EXPECT_FALSE(client.Get("/metrics"));
}

TEST(MetricsServerTest, RejectsMalformedAndTakenAddresses) {
  MetricsRegistry registry;
  for (const char* bad : {"", "no-port", ":9090", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:70000"}) {
    EXPECT_EQ(MetricsServer::Start(bad, &registry).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  auto first = MetricsServer::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(first.ok());
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  EXPECT_EQ(MetricsServer::Start(taken, &registry).status().code(), absl::StatusCode::kUnavailable);
}

TEST(MetricsServerTest, ServesIpv6Loopback) {
  MetricsRegistry registry;
  auto server = MetricsServer::Start("[::1]:0", &registry);
  if (!server.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << server.status();
  httplib::Client client("::1", (*server)->port());
  httplib::Result res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

}  // namespace
}  // namespace ripplekv::telemetry
