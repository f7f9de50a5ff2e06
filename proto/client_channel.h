#pragma once
// The one way RippleKV clients (the CLI, workers) open a channel to the scheduler: keepalive,
// reconnect backoff and message-size limits as docs/API.md recommends.

#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"

namespace ripplekv::v1 {

struct ClientChannelOptions {
  bool keepalive_without_calls = false;  // ping an idle channel (long-lived worker streams)
  int max_receive_bytes = 64 << 20;      // largest message accepted, bytes (inline data <= 32 MiB)
};

// Insecure channel to `address` ("host:port"). Keepalive every 20 s (10 s timeout); reconnect
// backoff from 100 ms up to 5 s.
std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& address,
                                                 const ClientChannelOptions& options = {});

}  // namespace ripplekv::v1
