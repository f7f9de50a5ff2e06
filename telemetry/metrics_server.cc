#include "telemetry/metrics_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <charconv>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

namespace ripplekv::telemetry {
namespace {

struct HostPort {
  std::string host;
  int port = 0;
};

StatusOr<HostPort> ParseAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "' is not host:port"));
  }
  HostPort out;
  out.host = address.substr(0, colon);
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  const std::string port = address.substr(colon + 1);
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), out.port);
  if (ec != std::errc() || end != port.data() + port.size() || out.port < 0 || out.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "': bad port '", port, "'"));
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address,
                                                              const MetricsRegistry* registry) {
  ASSIGN_OR_RETURN(HostPort where, ParseAddress(address));
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->http_ = std::make_unique<httplib::Server>();
  server->http_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  // SO_REUSEADDR only: httplib's default SO_REUSEPORT would let a second process bind the same
  // port and answer half the scrapes.
  server->http_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server->http_->Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->Render(), std::string(kExpositionContentType));
  });
  if (where.port == 0) {
    server->port_ = server->http_->bind_to_any_port(where.host);
  } else if (server->http_->bind_to_port(where.host, where.port)) {
    server->port_ = where.port;
  } else {
    server->port_ = -1;
  }
  if (server->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address));
  }
  server->thread_ = std::thread([http = server->http_.get()] { http->listen_after_bind(); });
  // Running before returning: a stop() that came before the accept loop started would be lost.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!server->http_->is_running()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::UnavailableError(absl::StrCat("metrics server on ", address, " did not start"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return server;
}

void MetricsServer::Stop() {
  if (!http_) return;
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

MetricsServer::~MetricsServer() { Stop(); }

}  // namespace ripplekv::telemetry
