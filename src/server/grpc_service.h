// The KServe v2 / Open Inference Protocol gRPC service of `gantry serve` (inference.GRPCInferenceService
// from proto/grpc_predict_v2.proto, with Triton's repository extension), on its own port. Private to
// src/server/: it lives inside Server and uses Server::State like the HTTP routes.
//
// Calls go the HTTP routes' ways: the same API keys (metadata `authorization: Bearer <key>`, `api-key`
// or `x-api-key`; ServerLive and ServerReady need none), the same model lookup and load on demand
// (State::model), the same DynamicBatcher and admission (run_inference), the same request metrics
// (protocol "grpc"), and the same in-flight count, so Server::drain waits for gRPC calls too.
// ServerReady is the HTTP readiness (State::ready); while draining every other call but ServerLive
// answers UNAVAILABLE.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>

#include "gantry/core/status.h"
#include "gantry/server/server.h"

namespace gantry::server {

// The bytes gRPC's transport may hold of requests being received, on all connections together (a
// grpc::ResourceQuota): twice the largest request message (--max-body-size), at least 64 MiB.
constexpr uint64_t grpc_memory_bound(uint64_t max_body_bytes) {
  constexpr uint64_t kFloor = 64ull << 20;
  if (max_body_bytes > std::numeric_limits<uint64_t>::max() / 2) return std::numeric_limits<uint64_t>::max();
  return std::max(2 * max_body_bytes, kFloor);
}

class GrpcServer {
 public:
  // Listens on state.options.host:`port` (0: any free port), or with kGrpcSamePort on no port of its
  // own: it then serves the connections adopt() hands it (the HTTP port's h2c ones). `global_limit` is
  // the number of requests in flight (both protocols) beyond which inference answers RESOURCE_EXHAUSTED.
  static Result<std::unique_ptr<GrpcServer>> start(Server::State& state, int port, size_t global_limit);
  ~GrpcServer();  // stop()
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  uint16_t port() const;  // 0 with kGrpcSamePort
  // Serves the connected socket `fd` (which opened with HTTP/2's preface, unread) as a gRPC client
  // connection; takes ownership of it (closed at once once stop() has begun). Thread-safe.
  void adopt(int fd);
  // Stops listening and waits for the calls in progress to be answered (they still need the workers
  // and batchers: stop this first), cancelling those still open after a short grace period.
  void stop();

  struct Impl;

 private:
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::server
