// RpcLink: Gantry's guard between ggml's RPC client and one RPC server, so that a lost host fails the
// models using it instead of the process.
//
// Why: at the pinned commit ggml's RPC client ends the process when a server goes away. Every request goes
// through one dispatcher thread per endpoint (ggml-rpc.cpp, rpc_dispatcher::work), which checks each
// exchange with RPC_STATUS_ASSERT -> GGML_ABORT("Remote RPC server crashed or returned malformed response")
// -> abort(); connecting (rpc_dispatcher::start) aborts the same way on a refused connection
// ("Failed to connect to ...") or a failed hello ("RPC handshake failed for ..."), and the thread that
// waits for the dispatcher cannot be unblocked from outside. ggml_set_abort_callback only runs before
// abort(). So ggml never talks to a server directly: it talks to this link's relay on 127.0.0.1 (an
// ephemeral port), which forwards each request and response to the server. The protocol is lockstep (one
// request, then its response when it has one: gantry/hw/rpc_wire.h), so the relay always knows what ggml
// waits for. When the server closes or resets the connection, stops answering (TCP keepalive: ~25 s of
// silence), answers out of protocol, or speaks another protocol version, the link counts a loss and from
// then on answers ggml itself — well-formed responses of the sizes ggml expects (remembered answers to
// the idempotent queries: device count, alignment, maximum size, memory; a non-null buffer base, which
// ggml asserts; zeros otherwise) — until ggml
// closes that connection. Callers check losses() after loading and after each decode (LlamaWeights and
// LlamaContext do) and fail what used the server; nothing computed after a loss is used.
//
// A link lives for the rest of the process (ggml caches buffer types and devices by endpoint string, so
// the relay's address must stay the same); a later connection (a reload) reaches the server afresh.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "gantry/core/status.h"
#include "gantry/hw/rpc.h"

namespace gantry::llama {

class RpcLink {
 public:
  // The process's link to `endpoint`, created on first use. Unavailable when no local port can be opened.
  static Result<std::shared_ptr<RpcLink>> get(const hw::RpcEndpoint& endpoint);

  const hw::RpcEndpoint& endpoint() const { return endpoint_; }
  // "127.0.0.1:<port>": what ggml is given as the endpoint.
  const std::string& relay_endpoint() const { return relay_; }
  // Connections to the server lost so far, and why the last one was.
  uint64_t losses() const { return losses_.load(); }
  std::string last_loss() const;
  // Ok while no connection was lost since losses() was `losses_before`; else Unavailable naming the server.
  Status check(uint64_t losses_before) const;
  // Client connections open through the relay now (ggml keeps one per endpoint while anything uses it).
  int connections() const { return connections_.load(); }

  // Internal: the relay's threads.
  struct Impl;

 private:
  RpcLink() = default;
  void lose(const std::string& why);

  hw::RpcEndpoint endpoint_;
  std::string relay_;
  std::atomic<uint64_t> losses_{0};
  std::atomic<int> connections_{0};
  mutable std::mutex mu_;
  std::string last_loss_;
  friend struct Impl;
};

}  // namespace gantry::llama
