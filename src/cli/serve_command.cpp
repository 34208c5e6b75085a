// gantry serve [MODEL|PKG]... [--model-repository DIR] [--host H] [--port P] [--api-key-file F]...
//   Serves models over HTTP: KServe v2 (/v2), OpenAI (/v1), Prometheus (/metrics); and KServe v2 over
//   gRPC (--grpc-port, default 8001; `same`: h2c on the HTTP port). Runs until SIGINT or SIGTERM, then
//   drains: readiness turns 503 (still serving for --drain-delay, so balancers notice first), then
//   accepted requests finish (up to --drain-timeout), exit 0. A second signal exits at once.
//   KServe's way (--model-name NAME, or STORAGE_URI in the environment): the models come from
//   /mnt/models unless named, and gRPC's default port is 8081.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "cli/llama_flags.h"
#include "gantry/memory/budget.h"
#include "gantry/runtime/runtime.h"
#include "gantry/server/server.h"
#include "gantry/weights/fetch_model.h"

namespace gantry::cli {
namespace {

// The one piece of process-wide state a signal handler may touch.
std::atomic<int> g_signals{0};
std::atomic<int> g_last_signal{0};

void on_signal(int sig) {
  g_last_signal.store(sig);
  if (g_signals.fetch_add(1) >= 1) {
    static constexpr char kMsg[] = "gantry serve: second signal: exiting now\n";
    (void)!write(2, kMsg, sizeof kMsg - 1);
    _exit(130);
  }
}

struct ServeArgs {
  server::ServeOptions options;
  std::vector<std::string> api_key_files;
  std::string memory_budget;
  std::string grpc_port;  // PORT | same
  double drain_delay_s = 0;
  std::string max_body = "64MiB";
  double drain_timeout_s = 30;
  double header_timeout_s = 0;  // given only when the flag is (the defaults live in HttpLimits)
  double body_timeout_s = 0;
  bool header_timeout_given = false;
  bool body_timeout_given = false;
  std::string provider;
  std::string policy;
  LlamaFlags llama;  // the llama.cpp flags shared with the other commands (kServeLlamaFlags)
  int64_t max_batch_size = 32;
  int64_t max_queue_delay_us = 1000;
  bool no_dynamic_batching = false;
  double max_generation_s = 600;
  double liveness_timeout_s = 30;
};

// Where KServe's storage initializer put the model: STORAGE_URI names the remote copy, the files are at
// /mnt/models; a local STORAGE_URI (file:// or an absolute path) is used as it is.
std::string kserve_model_dir(std::string_view storage_uri) {
  if (storage_uri.starts_with("file://")) return std::string(storage_uri.substr(7));
  if (storage_uri.starts_with("/")) return std::string(storage_uri);
  return "/mnt/models";
}

int serve(ServeArgs& a) {
  server::ServeOptions& o = a.options;
  if (!a.grpc_port.empty()) {
    if (a.grpc_port == "same") {
      o.grpc_port = server::kGrpcSamePort;
    } else {
      int port = 0;
      const auto* end = a.grpc_port.data() + a.grpc_port.size();
      auto [p, ec] = std::from_chars(a.grpc_port.data(), end, port);
      if (ec != std::errc() || p != end || port < -1 || port > 65535) {
        std::cerr << "gantry serve: --grpc-port '" << a.grpc_port
                  << "': expected a port (0-65535; 0 any free one), -1 (no gRPC) or 'same' (the HTTP port)\n";
        return 2;
      }
      o.grpc_port = port;
    }
  }
  // KServe's way: the model's name from --model-name, its files where the storage initializer put them.
  const char* storage_uri = std::getenv("STORAGE_URI");
  const bool kserve = !o.model_name.empty() || (storage_uri != nullptr && *storage_uri != '\0');
  if (kserve) {
    o.default_grpc_port = server::kKserveDefaultGrpcPort;
    if (o.models.empty() && o.model_repository.empty()) {
      o.model_repository = storage_uri && *storage_uri ? kserve_model_dir(storage_uri) : "/mnt/models";
      std::cerr << "gantry serve: models from " << o.model_repository
                << (storage_uri && *storage_uri ? std::string(" (STORAGE_URI ") + storage_uri + ")"
                                                : std::string())
                << std::endl;
    }
  }
  for (const auto& f : a.api_key_files) o.api_key_files.emplace_back(f);
  auto body = memory::parse_byte_size(a.max_body);
  if (!body.ok()) {
    std::cerr << "gantry serve: --max-body-size: " << body.status().message() << "\n";
    return 2;
  }
  o.max_body_bytes = *body;
  if (a.drain_timeout_s < 0 || a.drain_delay_s < 0 || a.max_generation_s <= 0 || a.max_batch_size < 1 ||
      a.max_queue_delay_us < 0 || a.liveness_timeout_s < 0) {
    std::cerr << "gantry serve: --drain-timeout, --drain-delay and --liveness-timeout must be >= 0, "
                 "--max-generation-time > 0, "
                 "--max-batch-size >= 1 "
                 "and --max-queue-delay-us >= 0\n";
    return 2;
  }
  if ((a.header_timeout_given && a.header_timeout_s <= 0) ||
      (a.body_timeout_given && a.body_timeout_s <= 0)) {
    std::cerr << "gantry serve: --header-timeout and --body-timeout must be > 0 seconds\n";
    return 2;
  }
  if (a.header_timeout_given)
    o.header_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.header_timeout_s * 1000));
  if (a.body_timeout_given)
    o.body_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.body_timeout_s * 1000));
  o.drain_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.drain_timeout_s * 1000));
  o.max_generation_time = std::chrono::milliseconds(static_cast<int64_t>(a.max_generation_s * 1000));
  o.liveness_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.liveness_timeout_s * 1000));
  o.batching.max_batch_size = a.max_batch_size;
  o.batching.max_queue_delay = std::chrono::microseconds(a.max_queue_delay_us);
  o.dynamic_batching = !a.no_dynamic_batching;
  auto policy = backend::resolve_provider_policy(a.policy);
  if (!policy.ok()) {
    std::cerr << "gantry serve: " << policy.status().message() << "\n";
    return 2;
  }
  o.load.factory.policy = *policy;
  o.load.factory.provider = a.provider;
  o.load.factory.intra_op_threads = a.llama.threads;
  o.load.factory.llama_defaults.parallel = 4;
  if (a.llama.ctx == 0u) a.llama.ctx.reset();  // --ctx 0: the default, as no --ctx
  if (Status s = apply(a.llama, o.load.factory.llama, kServeLlamaFlags); !s.ok()) {
    std::cerr << "gantry serve: " << s.message() << "\n";
    return 2;
  }

  // SIGINT/SIGTERM: the first starts the drain, a second exits at once (from the handler: whichever
  // thread the signal lands on, nothing else needs to run).
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  runtime::RuntimeOptions ro;
  ro.memory_budget = a.memory_budget;
  // A model at an http(s) URL is fetched into memory, never to disk.
  ro.fetch_url = [](const std::string& url, uint64_t max_bytes) {
    return weights::fetch_model_source(url, max_bytes);
  };
  auto rt = runtime::Runtime::create(std::move(ro));
  if (!rt.ok()) {
    std::cerr << "gantry serve: " << rt.status().message() << "\n";
    return rt.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  auto srv = server::Server::start(**rt, o);
  if (!srv.ok()) {
    std::cerr << "gantry serve: error: " << srv.status().message() << "\n";
    return srv.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::cout << "gantry serve: listening on " << (*srv)->url()
            << "  (KServe v2 /v2, OpenAI /v1, metrics /metrics)" << std::endl;
  if ((*srv)->grpc_port() != 0)
    std::cout << "gantry serve: KServe v2 gRPC on port " << (*srv)->grpc_port()
              << (o.grpc_port == server::kGrpcSamePort ? " (h2c, the HTTP port)" : "") << std::endl;

  while (g_signals.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (a.drain_delay_s > 0) {
    // Readiness first: whoever polls it (Kubernetes, a load balancer) stops sending while this server
    // still answers what reaches it meanwhile. A second signal ends the process from its handler.
    std::cerr << "gantry serve: " << (g_last_signal.load() == SIGINT ? "SIGINT" : "SIGTERM")
              << ": readiness is 503; still serving for " << a.drain_delay_s << " s (--drain-delay)"
              << std::endl;
    (*srv)->set_unready();
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(a.drain_delay_s * 1000));
    while (std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::cerr << "gantry serve: " << (g_last_signal.load() == SIGINT ? "SIGINT" : "SIGTERM")
            << ": draining (up to " << a.drain_timeout_s << " s; a second signal exits at once)" << std::endl;
  const bool all = (*srv)->drain(o.drain_timeout);
  (*srv)->stop();
  std::cerr << "gantry serve: "
            << (all ? "drained, every accepted request answered" : "drain timeout reached") << std::endl;
  return 0;
}

}  // namespace

void register_serve_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("serve", "Serve models over HTTP: KServe v2, OpenAI, Prometheus metrics");
  auto a = std::make_shared<ServeArgs>();
  auto& o = a->options;
  cmd->add_option("models", o.models,
                  "Model files (.onnx, .gguf), packages (directory or .tar), or http(s) URLs of .onnx/.gguf "
                  "models (fetched into memory when loaded)");
  cmd->add_option("--model-repository", o.model_repository, "A directory of models and packages to serve");
  cmd->add_option(
      "--pull-source", o.pull_source,
      "Where Ollama's /api/pull fetches models (into --model-repository): an http(s) registry base "
      "URL or a directory laid out like ~/.ollama/models");
  cmd->add_flag("--load-on-demand", o.load_on_demand,
                "Load models on their first request (then idle ones unload after their keep-alive)");
  cmd->add_option("--host", o.host, "Address to listen on (default 127.0.0.1; others need an API key)");
  cmd->add_option("--port", o.port, "Port (default 8080; 0 picks a free one)");
  cmd->add_option("--grpc-port", a->grpc_port,
                  "KServe v2 gRPC port on --host (default 8001, 8081 KServe's way; skipped with a warning "
                  "when taken; 0 picks a free one; -1 turns gRPC off; 'same': cleartext gRPC (h2c) on the "
                  "HTTP port, for one-port platforms such as Knative)");
  cmd->add_option("--model-name", o.model_name,
                  "Serve the one model under this name (KServe's {{.Name}}); with it, or STORAGE_URI set, "
                  "models come from /mnt/models unless named and gRPC's default port is 8081");
  cmd->add_option("--api-key-file", a->api_key_files, "File with API keys, one per line; repeatable");
  cmd->add_flag("--insecure-no-auth", o.insecure_no_auth, "Allow a non-loopback --host without an API key");
  cmd->add_option("--memory-budget", a->memory_budget,
                  "Memory per device, e.g. cpu=4GiB,cuda:0=70GiB or 80% (default: 90% of free)");
  add_llama_flags(*cmd, a->llama, kServeLlamaFlags);
  note_default(*cmd, "--parallel", "the package's, else 4");
  note_default(*cmd, "--ctx", "the package's, else 2048 or the model's training context if smaller");
  note_default(*cmd, "--threads", "the backend's");
  cmd->add_option(
         "--instances", o.load.instances,
         "Copies of each ONNX model per device, so that many requests run at once, each with its own "
         "memory (default: the package's runtime.peak_concurrency, else 1); for a text model, its "
         "parallel sequences")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--provider", a->provider, "Use only this execution provider (cpu, cuda, ...)");
  cmd->add_option("--provider-policy", a->policy, "fastest|manifest|measured");
  cmd->add_option("--max-queue", o.max_queue, "Requests waiting per model before 429 (default 64)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-model-copies", o.max_model_copies,
                  "Names Ollama's /api/copy may add to the repository; one more is a 400 (default 256)")
      ->check(CLI::Range(static_cast<size_t>(0), static_cast<size_t>(1) << 20));
  cmd->add_option(
      "--max-body-size", a->max_body,
      "Largest request body of routes that take one (default 64MiB; larger: 413; other routes: 4KiB)");
  cmd->add_option(
         "--max-connections", o.max_connections,
         "Open HTTP connections at most; one more is answered 503 (default: the open-file limit less "
         "256, at most 16384)")
      ->check(CLI::Range(static_cast<size_t>(0), static_cast<size_t>(1) << 24));
  auto* header_timeout =
      cmd->add_option("--header-timeout", a->header_timeout_s,
                      "Seconds a client has to send a request header, and a keep-alive connection may idle "
                      "(default 30; then 408, or a close when idle)");
  auto* body_timeout = cmd->add_option("--body-timeout", a->body_timeout_s,
                                       "Seconds a client has to send a request body (default 60; then 408)");
  cmd->add_option("--drain-timeout", a->drain_timeout_s,
                  "Seconds to let requests finish on SIGTERM (default 30)");
  cmd->add_option("--drain-delay", a->drain_delay_s,
                  "Seconds to keep serving after SIGTERM with readiness already 503, so load balancers and "
                  "Kubernetes stop sending first (default 0; keep delay + timeout under the pod's "
                  "terminationGracePeriodSeconds)");
  cmd->add_option("--max-generation-time", a->max_generation_s,
                  "Seconds a generation, or a tensor inference run alone, may run (default 600)");
  cmd->add_option("--liveness-timeout", a->liveness_timeout_s,
                  "Seconds the control pool or the model manager may fail the watchdog's probe before "
                  "/v2/health/live answers 503 (default 30; 0: no watchdog)");
  cmd->add_option("--cors-origin", o.cors_origins,
                  "Allow browser requests from this origin (or *); repeatable");
  cmd->add_option("--max-batch-size", a->max_batch_size,
                  "Rows per dynamic batch of ONNX models (default 32)");
  cmd->add_option("--max-queue-delay-us", a->max_queue_delay_us,
                  "How long a request may wait for a batch to fill (default 1000 us)");
  cmd->add_flag("--no-dynamic-batching", a->no_dynamic_batching, "Run every ONNX request alone");
  cmd->add_option("--responses-store", o.responses_store,
                  "Responses API answers kept in memory for previous_response_id and GET /v1/responses/{id} "
                  "(also at most 256 MiB; least recently used dropped first; default 1000; 0: none)")
      ->check(CLI::Range(static_cast<size_t>(0), static_cast<size_t>(1) << 24));
  cmd->add_option("--http-threads", o.http_threads, "I/O threads (default 2)")->check(CLI::Range(1, 64));
  cmd->add_option("--workers", o.workers, "Request worker threads (default max(4, 2 x cores))")
      ->check(CLI::Range(0, 1024));
  cmd->callback([a, header_timeout, body_timeout, &exit_code] {
    a->header_timeout_given = header_timeout->count() > 0;
    a->body_timeout_given = body_timeout->count() > 0;
    exit_code = serve(*a);
  });
}

}  // namespace gantry::cli
