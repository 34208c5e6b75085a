// Server: `gantry serve`. Serves the models of a ModelRepository, loaded through the Runtime, over
// HTTP: KServe v2 / Open Inference Protocol (/v2/...), OpenAI (/v1/...), Prometheus (/metrics); and
// KServe v2 over gRPC (inference.GRPCInferenceService) on a port of its own.
//
// Requests never name paths, only models. ONNX models with a batch dimension go through a
// DynamicBatcher; text generation goes to the model's continuous-batching engine (llama.cpp). Every
// queue is bounded: a full one answers 429 with Retry-After before any parsing; a model that is
// loading, draining or evicted answers 503. drain() stops accepting, turns readiness to 503 and lets
// accepted requests finish.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gantry/backend/generation.h"
#include "gantry/core/status.h"
#include "gantry/runtime/dynamic_batcher.h"
#include "gantry/runtime/runtime.h"
#include "gantry/server/http_server.h"

namespace gantry::server {

inline constexpr int kDefaultGrpcPort = 8001;        // Triton's
inline constexpr int kKserveDefaultGrpcPort = 8081;  // KServe's (its runtimes' gRPC container port)
// --grpc-port same: cleartext gRPC (h2c) on the HTTP port, told apart by HTTP/2's connection preface
// (one port per container, as Knative allows).
inline constexpr int kGrpcSamePort = -2;

inline constexpr size_t kDefaultMaxModelCopies = 256;  // --max-model-copies

struct ServeOptions {
  std::vector<std::string> models;  // MODEL|PKG arguments
  std::string model_repository;     // a directory of models and packages (where /api/pull puts models)
  // Where Ollama's /api/pull fetches models: an http(s) registry base URL or a directory laid out like
  // ~/.ollama/models (src/server/ollama_pull.h). Empty: pulling is off (501).
  std::string pull_source;
  bool load_on_demand = false;     // load on first request instead of at start (then keep-alive applies)
  std::string host = "127.0.0.1";  // or several addresses as a comma list ("127.0.0.1,::1"), one port
  uint16_t port = 8080;            // 0: any free port
  // KServe v2 gRPC, on the same host. Unset: kDefaultGrpcPort, or no gRPC (with a warning) when that
  // port is taken; set: that port (a taken one fails start), 0 any free port, -1 no gRPC,
  // kGrpcSamePort the HTTP port.
  std::optional<int> grpc_port;
  int default_grpc_port = kDefaultGrpcPort;  // the port when grpc_port is unset (KServe's way: 8081)
  // Serve the one model under this name (KServe's --model-name {{.Name}}): start fails unless the
  // arguments and the repository hold exactly one model.
  std::string model_name;
  std::vector<std::filesystem::path> api_key_files;
  std::vector<std::string> api_keys;  // keys given on the command line (--api-key), besides the files'
  // A request's model name, whatever it is (or none), names the one model served, as with llama-server
  // (a llama-server command line, `-m FILE`, turns it on). With several models served, names match
  // exactly all the same. State::resolve is where it applies.
  bool any_model_name = false;
  bool dashboard = true;  // false: / and /dashboard/* are 404 (--no-dashboard; llama-server's --no-webui)
  // A text request's sampling where it sets none (llama-server's --temp, --seed, --top-k, ...); what a
  // request sets wins. The OpenAI and llama-server routes apply it (openai::parse_text_request).
  backend::SamplingParams sampling;
  bool insecure_no_auth = false;  // allow a non-loopback --host without a key
  size_t max_queue = 64;          // requests waiting per model before 429
  // Names Ollama's /api/copy may add to the repository (all at once; a deleted one frees its place).
  size_t max_model_copies = kDefaultMaxModelCopies;
  // Bodies of routes that take one (inference, repository); the others take a few KiB at most.
  uint64_t max_body_bytes = 64ull << 20;
  // Open HTTP connections; 0: from the open-file limit (default_max_connections() in http_server.h).
  size_t max_connections = 0;
  // How long a client has to send a request's header (also how long a keep-alive connection may
  // idle), and its body.
  std::chrono::milliseconds header_timeout = HttpLimits{}.header_timeout;
  std::chrono::milliseconds body_timeout = HttpLimits{}.body_timeout;
  std::chrono::milliseconds drain_timeout{30'000};
  std::vector<std::string> cors_origins;  // "*" or exact origins
  std::chrono::milliseconds max_generation_time{600'000};
  // Liveness fails once the control pool or the model manager (or a model's engine lock) has not
  // answered the watchdog's probe for this long (a deadlock, a stuck task); 0: no watchdog.
  std::chrono::milliseconds liveness_timeout{30'000};
  int max_tokens_default = 1024;  // when a request sets none (capped by the context)
  size_t responses_store = 1000;  // Responses API responses kept for previous_response_id (LRU; 0: none)
  int http_threads = 2;
  int workers = 0;  // request workers (parse, encode, unbatched inference); 0: max(4, 2 x cores)
  runtime::BatchingConfig batching;  // defaults for batchable models (a manifest may override)
  bool dynamic_batching = true;      // false: every ONNX request runs alone (benchmarks compare)
  runtime::LoadOptions load;         // provider, threads, ctx, parallel, kv type for every model
};

class Server {
 public:
  // Checks the options (non-loopback without a key is refused), loads the models (unless on demand)
  // and starts listening. `runtime` must outlive the server.
  static Result<std::unique_ptr<Server>> start(runtime::Runtime& runtime, ServeOptions options);
  ~Server();  // drain(0) + stop
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const;
  uint16_t grpc_port() const;  // 0 when gRPC is off; port() with kGrpcSamePort
  std::string url() const;     // "http://127.0.0.1:8080"
  // Stops accepting and turns readiness to 503; then waits (up to `timeout`) for every accepted
  // request to be answered. True when all were.
  bool drain(std::chrono::milliseconds timeout);
  // Readiness turns 503 (gRPC ServerReady false) while requests are still accepted and served: a load
  // balancer or Kubernetes that polls readiness stops sending before drain() starts refusing.
  void set_unready();
  // Reads --api-key-file again (SIGHUP): the new keys and tenants' limits apply to requests that arrive
  // from now on; requests in flight go on, a tenant's usage so far stays counted. A file that fails to
  // read or parse changes nothing (the error is logged and returned).
  Status reload_keys();
  void stop();  // closes every connection

  struct State;

 private:
  explicit Server(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

}  // namespace gantry::server
