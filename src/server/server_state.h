// The server's shared state and the pieces every route uses (private to src/server/).
#pragma once

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "gantry/core/log.h"
#include "gantry/model/model_repository.h"
#include "gantry/protocol/openai_codec.h"
#include "gantry/runtime/api_keys.h"
#include "gantry/runtime/runtime.h"
#include "gantry/server/http_server.h"
#include "gantry/server/metrics.h"
#include "gantry/server/response_store.h"
#include "gantry/server/server.h"
#include "gguf_header_cache.h"
#include "grpc_service.h"
#include "protocols.h"
#include "watchdog.h"

namespace gantry::server {

enum class Protocol { kKserve, kOpenai, kHttp, kOllama, kGrpc, kAnthropic };
// "kserve", "openai", "http", "ollama", "grpc", "anthropic"
std::string_view protocol_name(Protocol p);

// Runs `fn` as a task on `pool`. Nothing it throws leaves the task: it is logged under `what` (a string
// literal) and the thread serves on; a Reply the task held is answered 500 when it is dropped.
template <typename Fn>
void post_task(boost::asio::thread_pool& pool, std::string_view what, Fn&& fn) {
  boost::asio::post(pool, [what, fn = std::forward<Fn>(fn)]() mutable {
    try {
      fn();
    } catch (const std::exception& e) {
      GANTRY_LOG_ERROR("{}: {}", what, e.what());
    } catch (...) {
      GANTRY_LOG_ERROR("{}: an exception of unknown type", what);
    }
  });
}

class Reply;
// For synchronous work done for `reply` (embeddings, rerank, tokenizing): true once its client has gone
// or the server is stopping, so abandoned work stops instead of holding a worker and the model.
// `reply` must outlive the work (the route's own).
backend::CancelCheck work_cancel(Server::State& s, Reply& reply);

// The answer to one accepted request: answers once, records the request's metrics and releases its
// in-flight count when it does (or, if dropped unanswered, the Exchange sends a 500).
class Reply {
 public:
  Reply(Server::State& state, std::shared_ptr<Exchange> exchange, Protocol protocol,
        std::chrono::steady_clock::time_point received);
  ~Reply();
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;

  void set_model(std::string model) { model_ = std::move(model); }
  // Whose the request is and its deadline (set from its key and headers before it is routed): every
  // call into a ModelQueue passes it; a refusal's Retry-After and the tenant's x-ratelimit-* headers
  // come back from it into the answer.
  void set_admission(runtime::Admission a) { admission_ = std::move(a); }
  const runtime::Admission& admission() const { return admission_; }
  // Headers every answer carries (CORS).
  void add_headers(HttpHeaders h) { extra_.insert(extra_.end(), h.begin(), h.end()); }
  const std::string& model() const { return model_; }
  Exchange& exchange() { return *exchange_; }
  std::chrono::steady_clock::time_point received() const { return received_; }

  void send(HttpResponse response);
  void json(int status, std::string body);
  // The protocol's error shape: KServe and Ollama {"error": m}; OpenAI {"error": {"message", "type", ...}};
  // Anthropic {"type": "error", "error": {"type", "message"}}.
  void error(int status, std::string_view message, std::string_view param = {}, std::string_view code = {});
  void error(const Status& status);  // HTTP status from the Status code
  // Streaming (SSE, or NDJSON for Ollama): begin, events, end. end() records the metrics.
  void begin_stream(std::string content_type = "text/event-stream");
  bool event(std::string data);
  void end_stream(int status_for_metrics = 200);

 private:
  void record(int status);
  void add_tenant_headers(HttpHeaders& headers, int status) const;
  Server::State& state_;
  runtime::Admission admission_;
  std::shared_ptr<Exchange> exchange_;
  Protocol protocol_;
  std::chrono::steady_clock::time_point received_;
  std::string model_ = "-";
  HttpHeaders extra_;
  bool done_ = false;
};

// An error answer whose body is already in the protocol's shape, with the one Retry-After rule: 429 (a
// model at capacity) and 503 (not ready, draining) say when to come back (runtime::kRetryAfterSeconds).
HttpResponse error_answer(int status, std::string body);
// OpenAI's error shape, for the OpenAI family of routes (chat, completions, embeddings, Responses, rerank).
void send_api_error(Reply& reply, const openai::ApiError& e);
// anthropic_routes.cpp: GET /v1/models (model "") or /v1/models/{model} in the shape of Anthropic's
// Models API, for a request with an anthropic-version header (404 in its error shape).
void anthropic_models(Server::State& s, std::shared_ptr<Reply> reply, const std::string& model);
// chat_store_routes.cpp: keeps a chat completion made with store: true (its body as GET
// /v1/chat/completions/{id} answers it, and the request's messages) for `owner` (runtime::ApiKeys::owner()).
void keep_chat_completion(Server::State& s, size_t owner, std::string id, std::string body,
                          const std::vector<backend::ChatMessage>& messages);

// An error in the protocol's shape (KServe and Ollama {"error": m}; OpenAI {"error": {message, type,
// param, code}}), with Retry-After on 429 and 503.
HttpResponse error_response(Protocol protocol, int status, std::string_view message,
                            std::string_view param = {}, std::string_view code = {});

// HTTP status for an error Status: InvalidArgument/Corrupt 400, NotFound 404, ResourceExhausted 429
// (queue full) or 400, Unavailable 503, Unsupported 400, Cancelled 499, otherwise 500.
int http_status_for(const Status& status);

// Requests of this server handed to a model's batcher whose callback has not run yet: stop() waits for
// them, since the callbacks use the State, and the runtime (and its batchers) outlive the server.
class PendingCallbacks {
 public:
  void add() {
    std::lock_guard lock(mu_);
    ++n_;
  }
  void done() {
    std::lock_guard lock(mu_);
    if (--n_ == 0) cv_.notify_all();
  }
  bool wait_idle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return n_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t n_ = 0;
};

struct Server::State {
  static constexpr size_t kControlThreads = 2;

  runtime::Runtime& runtime;
  ServeOptions options;
  // The keys now: a reload (SIGHUP, Server::reload_keys) swaps them whole; a request reads them once.
  std::shared_ptr<const runtime::ApiKeys> api_keys() const {
    std::lock_guard lock(keys_mu);
    return keys;
  }
  // The request's key checked against the keys now (runtime::ApiKeys::allows / owner, from its headers).
  bool allows(const HttpRequest& request) const;
  size_t owner(const HttpRequest& request) const;
  mutable std::mutex keys_mu;  // guards keys
  std::shared_ptr<const runtime::ApiKeys> keys = std::make_shared<runtime::ApiKeys>();
  runtime::TenantRegistry tenants;  // by the keys' tenant names
  // Makes `keys` the keys and their tenants the registry's (limits updated, usage kept).
  void install_keys(std::shared_ptr<const runtime::ApiKeys> next);
  // The Admission of a request: the tenant its key names (none without keys), its deadline from
  // x-request-deadline-ms (milliseconds from `received`) or the tenant's default.
  runtime::Admission admission(const runtime::ApiKeys::HeaderLookup& header,
                               std::chrono::steady_clock::time_point received);
  model::ModelRepository repository;
  Metrics metrics;
  ResponseStore responses{options.responses_store};  // the Responses API's kept responses
  // Chat completions made with store: true (body = the completion, input_items = its messages).
  ResponseStore chat_completions{options.responses_store};
  std::atomic<bool> draining{false};
  std::atomic<bool> stopping{false};  // stop(): synchronous work (embeddings, rerank) ends at its next check
  std::atomic<bool> unready{false};   // set_unready(): readiness 503, requests still served
  // The runtime names of the models asked for at start (unless loaded on demand): readiness waits for
  // each that the repository still lists.
  std::vector<std::string> required_models;
  // What /api/tags, /api/ps and /api/show read from GGUF headers, once per version of each file.
  GgufHeaderCache headers;
  std::atomic<size_t> inflight{0};
  std::chrono::system_clock::time_point started = std::chrono::system_clock::now();
  PendingCallbacks batched;        // run_inference's requests in a model's batcher
  mutable std::mutex failures_mu;  // guards load_failures
  std::map<std::string, std::string, std::less<>> load_failures;
  // Declared after everything a queued task touches: tasks abandoned at stop() are destroyed with them.
  // `workers` parse, run and encode inference (and load models); `control` answers what must never wait
  // behind inference: metadata, model lists, readiness of a model, /metrics, the dashboard's status.
  boost::asio::thread_pool workers;
  boost::asio::thread_pool control{kControlThreads};
  std::unique_ptr<HttpServer> http;
  // `http` for the workers (gauges): its I/O threads serve before start() has assigned `http`.
  std::atomic<const HttpServer*> serving_http{nullptr};
  std::unique_ptr<GrpcServer> grpc;    // null with --grpc-port -1
  std::unique_ptr<Watchdog> watchdog;  // liveness (--liveness-timeout); stopped first

  State(runtime::Runtime& rt, ServeOptions o, size_t n_workers)
      : runtime(rt), options(std::move(o)), workers(n_workers) {}

  // The repository's entry serving the model name a request gives: the entry of that name; else, with
  // --any-model-name (llama-server's way) and exactly one model served, that one, whatever the name
  // (or none). model() and loaded() look names up through it only.
  std::shared_ptr<const model::RepositoryEntry> resolve(std::string_view name) const;
  // The model `name`, loading it when the repository has it and loading on demand is on. NotFound
  // for a name the repository does not know; Unavailable (503) for a known model that is not ready.
  Result<runtime::ModelHandle> model(std::string_view name);
  runtime::LoadOptions load_options(const model::RepositoryEntry& entry) const;

  // Readiness (/v2/health/ready, gRPC ServerReady, gantry_ready): not draining nor set unready, and
  // every required model loaded, except those of --model-repository that failed to load at start (they
  // are reported, the others serve). Otherwise false, with the reason in `why` when given.
  bool ready(std::string* why = nullptr) const;

  // Models of --model-repository that failed to load at start (by runtime name), and entries of it that
  // could not be listed at all: what readiness, the repository index and requests for them report. A
  // later successful load (repository load, a pull) clears the model's failure.
  struct Failure {
    std::string name, reason;
  };
  void record_failure(const std::string& runtime_name, std::string reason);
  void clear_failure(std::string_view runtime_name);
  std::optional<std::string> failure(std::string_view runtime_name) const;
  std::vector<Failure> failures() const;           // by name
  std::vector<model::RepositoryProblem> unlisted;  // set once at start, read-only afterwards

  // The pool for a request about one model's metadata: `control`, unless answering may load the model
  // (--load-on-demand), which is slow work for `workers`.
  boost::asio::thread_pool& metadata_pool();

  // The loaded model serving `name` (a copy's name: its original's), never loading it.
  Result<runtime::ModelHandle> loaded(std::string_view name);
  // Whether the loaded model serving `name` admits no more requests now (its ModelQueue is full): 429
  // before the body is read.
  bool model_full(std::string_view name);
  // Whether the loaded model serving `name` batches its tensor requests (its ModelQueue has a batcher).
  bool model_batched(std::string_view name);
  // Figures for /metrics and the dashboard; `own_requests` (the scrape itself) are not counted in flight.
  ServerGauges gauges(size_t own_requests);
};

// Inference shared by KServe over HTTP and gRPC: runs the validated `inputs` through the model's queue
// (runtime::ModelQueue::infer: admitted, batched or alone) and records its queue time and batch size.
// `done` is called exactly once, on a worker thread: ResourceExhausted when the model is at capacity,
// else the outputs. `keep_alive` holds whatever the inputs borrow from until then. `cancelled` goes to the
// queue (it stops a run alone midway: its client went away, the server stops).
using InferenceDone = std::function<void(Result<std::vector<NamedTensor>>)>;
void run_inference(Server::State& s, const std::string& name, runtime::ModelHandle handle,
                   std::vector<NamedTensor> inputs, std::shared_ptr<const void> keep_alive,
                   std::chrono::steady_clock::time_point received, InferenceDone done,
                   const runtime::Admission& who = {}, const backend::CancelCheck& cancelled = {});

// x-request-deadline-ms: a whole number of milliseconds > 0 (nullopt for anything else).
std::optional<int64_t> parse_deadline_ms(std::string_view value);

// The model repository extension, shared by HTTP and gRPC.
struct RepositoryModel {
  std::string name, version, state, reason;  // Triton's states: READY, LOADING, UNLOADING, UNAVAILABLE
};
std::vector<RepositoryModel> repository_index(Server::State& s);
// Loads (or unloads) a model of the repository. NotFound for a name the repository lacks, Unavailable
// when memory is short, InvalidArgument when unloading a model that is not loaded.
Status repository_load(Server::State& s, const std::string& name, bool load);

// The dashboard's embedded asset `name` with its security headers (304 when the request's If-None-Match
// holds its ETag; nullopt when there is no such asset): dashboard_routes.cpp, whose route table serves it.
std::optional<HttpResponse> dashboard_asset(std::string_view name, const HttpRequest& request);

}  // namespace gantry::server
