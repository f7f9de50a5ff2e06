#pragma once
// The HTTP endpoint Prometheus scrapes (`--metrics-listen ADDR`, docs/OPERATIONS.md): GET
// /metrics answers the registry's Render() as text exposition 0.0.4; every other path is 404.
// Plain HTTP without authentication, as Prometheus scrapes by default: bind it to an address
// only the monitoring network reaches. Served by cpp-httplib on threads of its own.
//
// Thread-safety: Stop() may be called from any thread, once or more; the destructor stops.

#include <memory>
#include <string>
#include <thread>

#include "base/status.h"
#include "telemetry/metrics.h"

namespace httplib {
class Server;
}

namespace ripplekv::telemetry {

class MetricsServer {
 public:
  // Serves `registry` (which must outlive the server) on `address`, "host:port" or
  // "[v6]:port"; port 0 picks a free one (see port()). InvalidArgument: a malformed address;
  // Unavailable: it cannot be bound.
  [[nodiscard]] static StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address, const MetricsRegistry* registry);

  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }
  void Stop();

 private:
  MetricsServer() = default;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace ripplekv::telemetry
