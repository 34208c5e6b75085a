#include "gantry/server/server.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "gantry/build_info.h"
#include "gantry/core/log.h"
#include "gantry/core/utf8.h"
#include "gantry/protocol/anthropic_codec.h"
#include "gantry/protocol/kserve_codec.h"
#include "gantry/protocol/ollama_codec.h"
#include "gantry/protocol/openai_codec.h"
#include "gantry/runtime/model_queue.h"
#include "ollama_pull.h"
#include "route_table.h"
#include "server_state.h"

namespace gantry::server {
namespace {
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// Where a routed request runs (Route::Runs).
boost::asio::thread_pool& pool_for(Server::State& s, const Route& r) {
  switch (r.runs) {
    case Route::Runs::kControl:
      return s.control;
    case Route::Runs::kMetadata:
      return s.metadata_pool();
    case Route::Runs::kInline:
    case Route::Runs::kWorkers:
      break;
  }
  return s.workers;
}

// CORS headers for `origin` when it is allowed.
HttpHeaders cors_headers(const ServeOptions& o, const HttpRequest& req) {
  HttpHeaders h;
  auto origin = req.header("origin");
  if (!origin || o.cors_origins.empty()) return h;
  for (const auto& allowed : o.cors_origins) {
    if (allowed == "*" || allowed == *origin) {
      h.emplace_back("Access-Control-Allow-Origin", allowed == "*" ? "*" : std::string(*origin));
      h.emplace_back("Vary", "Origin");
      return h;
    }
  }
  return h;
}

// The answer a request gets from its header alone (CORS preflight, 401, 405, 503 while draining, 429
// when full), or nullopt to read its body and route it.
std::optional<HttpResponse> early_answer(Server::State& s, size_t global_limit, const RouteMatch& r,
                                         const HttpRequest& req) {
  if (req.method == "OPTIONS") {
    HttpResponse pre;
    pre.status = 204;
    pre.content_type.clear();
    pre.headers = cors_headers(s.options, req);
    if (!pre.headers.empty()) {
      pre.headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
      pre.headers.emplace_back(
          "Access-Control-Allow-Headers",
          "Authorization, Content-Type, api-key, x-api-key, Inference-Header-Content-Length, "
          "anthropic-version, anthropic-beta, anthropic-dangerous-direct-browser-access");
      pre.headers.emplace_back("Access-Control-Max-Age", "600");
    }
    return pre;
  }
  const Route* route = r.route;
  if (route && route->access == Route::Access::kProbe) return std::nullopt;  // probes need no key
  // The dashboard's page and assets hold no data (it asks for the key itself): no key, GET only.
  if (route && route->access == Route::Access::kPublicPage && (req.method == "GET" || req.method == "HEAD"))
    return std::nullopt;
  if (!s.allows(req)) {
    auto resp =
        error_response(r.protocol, 401,
                       "missing or wrong API key: send 'Authorization: Bearer <key>' (or an api-key / "
                       "x-api-key header)",
                       {}, "invalid_api_key");
    resp.headers.emplace_back("WWW-Authenticate", "Bearer");
    return resp;
  }
  if (!route) return std::nullopt;  // answered 404 with the body read
  // HEAD is GET without the body (HttpServer leaves the body out).
  if (req.method != route->method && !(req.method == "HEAD" && route->method == "GET")) {
    auto resp = error_response(
        r.protocol, 405,
        std::string(req.path) + " takes " + std::string(route->method) + ", not " + req.method);
    resp.headers.emplace_back("Allow", std::string(route->method));
    return resp;
  }
  if (s.draining.load() && !route->while_draining) {
    return error_response(r.protocol, 503, "the server is shutting down");
  }
  if (auto d = req.header("x-request-deadline-ms"); d && route->inference && !parse_deadline_ms(*d)) {
    return error_response(r.protocol, 400,
                          "x-request-deadline-ms must be a whole number of milliseconds > 0 (the time the "
                          "request may take from its arrival)",
                          "x-request-deadline-ms");
  }
  if (route->inference) {
    bool full = s.inflight.load() >= global_limit;
    if (!full && route->batched) full = s.model_full(r.params.model);
    if (full) {
      return error_response(
          r.protocol, 429,
          "the server is at capacity (--max-queue " + std::to_string(s.options.max_queue) + "); retry later");
    }
  }
  return std::nullopt;
}

// The body limit of a request the header let through: routes that take a body (POST to a route that
// is a POST: inference, repository, pin) keep --max-body-size; every other (health, metrics, `GET /`,
// the dashboard, any GET, unknown paths) takes none, and some need no key, so a stranger cannot make
// the server buffer more than kSmallBodyBytes for them.
constexpr uint64_t kSmallBodyBytes = 4096;
std::optional<uint64_t> body_limit(const RouteMatch& r, const HttpRequest& req) {
  if (r.route && r.route->method == "POST" && req.method == "POST") return std::nullopt;
  return kSmallBodyBytes;
}

}  // namespace

std::string_view protocol_name(Protocol p) {
  switch (p) {
    case Protocol::kKserve:
      return "kserve";
    case Protocol::kOpenai:
      return "openai";
    case Protocol::kHttp:
      return "http";
    case Protocol::kOllama:
      return "ollama";
    case Protocol::kGrpc:
      return "grpc";
    case Protocol::kAnthropic:
      return "anthropic";
  }
  return "http";
}

bool is_loopback_host(const std::string& host) {
  if (host.find(',') != std::string::npos) {  // a comma list: every address loopback
    for (size_t i = 0; i <= host.size();) {
      size_t j = host.find(',', i);
      if (j == std::string::npos) j = host.size();
      if (!is_loopback_host(host.substr(i, j - i))) return false;
      i = j + 1;
    }
    return true;
  }
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

HttpResponse error_answer(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  if (status == 429 || status == 503)
    r.headers.emplace_back("Retry-After", std::to_string(runtime::kRetryAfterSeconds));
  return r;
}

void send_api_error(Reply& reply, const openai::ApiError& e) {
  reply.send(error_answer(e.http_status, openai::error_body(e)));
}

HttpResponse error_response(Protocol protocol, int status, std::string_view message, std::string_view param,
                            std::string_view code) {
  std::string body;
  if (protocol == Protocol::kOpenai) {
    openai::ApiError e;
    e.http_status = status;
    e.message = std::string(message);
    e.param = std::string(param);
    e.code = std::string(code);
    if (status == 429) e.type = "rate_limit_error";
    if (status >= 500) e.type = "server_error";
    body = openai::error_body(e);
  } else if (protocol == Protocol::kAnthropic) {
    anthropic::ApiError e = anthropic::bad_request(std::string(param), message);
    e.http_status = status;
    e.type = std::string(anthropic::error_type(status));
    body = anthropic::error_body(e);
  } else if (protocol == Protocol::kOllama) {
    body = ollama::error_body(message);
  } else {
    body = kserve::error_body(message);
  }
  return error_answer(status, std::move(body));
}

int http_status_for(const Status& st) {
  switch (st.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kCorrupt:
    case StatusCode::kUnsupported:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
    case StatusCode::kFailedPrecondition:
      return 503;
    case StatusCode::kCancelled:
      return 499;
    default:
      return 500;
  }
}

// ------------------------------------------------------------------------------------------ Reply
Reply::Reply(Server::State& state, std::shared_ptr<Exchange> exchange, Protocol protocol,
             Clock::time_point received)
    : state_(state), exchange_(std::move(exchange)), protocol_(protocol), received_(received) {
  state_.inflight.fetch_add(1);
}

Reply::~Reply() {
  if (!done_) error(500, "internal error: the request ended without an answer");
  state_.inflight.fetch_sub(1);
}

void Reply::record(int status) {
  state_.metrics.request(model_, protocol_name(protocol_), status,
                         std::chrono::duration<double>(Clock::now() - received_));
}

void Reply::send(HttpResponse response) {
  if (done_) return;
  done_ = true;
  record(response.status);
  response.headers.insert(response.headers.end(), extra_.begin(), extra_.end());
  add_tenant_headers(response.headers, response.status);
  exchange_->respond(std::move(response));
}

namespace {
// A duration as OpenAI writes x-ratelimit-reset-*: "1s", "0.25s", "6m0s".
std::string reset_text(double seconds) {
  const auto ms = static_cast<int64_t>(std::ceil(std::max(0.0, seconds) * 1000));
  const int64_t m = ms / 60000;
  const double rest = static_cast<double>(ms % 60000) / 1000.0;
  std::string sec = fmt::format("{:.3f}", rest);
  while (sec.back() == '0') sec.pop_back();
  if (sec.back() == '.') sec.pop_back();
  return m > 0 ? fmt::format("{}m{}s", m, sec) : sec + "s";
}
}  // namespace

void Reply::add_tenant_headers(HttpHeaders& headers, int status) const {
  if ((status == 429 || status == 503) && admission_.retry_after && *admission_.retry_after > 0) {
    // The refusal said when it would pass: that, not the one-second default.
    for (auto& [name, value] : headers) {
      if (name == "Retry-After") value = std::to_string(*admission_.retry_after);
    }
  }
  if (!admission_.tenant) return;
  const runtime::RateState rs = admission_.tenant->rate_state();
  auto line = [&headers](const char* what, const runtime::RateState::Line& l) {
    headers.emplace_back(fmt::format("x-ratelimit-limit-{}", what), std::to_string(l.limit));
    headers.emplace_back(fmt::format("x-ratelimit-remaining-{}", what), std::to_string(l.remaining));
    headers.emplace_back(fmt::format("x-ratelimit-reset-{}", what), reset_text(l.reset_s));
  };
  if (rs.requests) line("requests", *rs.requests);
  if (rs.tokens) line("tokens", *rs.tokens);
}

void Reply::json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  send(std::move(r));
}

void Reply::error(int status, std::string_view message, std::string_view param, std::string_view code) {
  send(error_response(protocol_, status, message, param, code));
}

void Reply::error(const Status& st) {
  const int code = http_status_for(st);
  error(code, st.message(), {}, code == 404 ? "model_not_found" : "");
}

void Reply::begin_stream(std::string content_type) {
  HttpHeaders headers = extra_;
  add_tenant_headers(headers, 200);
  exchange_->start_stream(200, std::move(content_type), headers);
}

bool Reply::event(std::string data) { return exchange_->write(std::move(data)); }

void Reply::end_stream(int status_for_metrics) {
  if (done_) return;
  done_ = true;
  record(status_for_metrics);
  exchange_->finish();
}

backend::CancelCheck work_cancel(Server::State& s, Reply& reply) {
  return
      [&s, &reply] { return reply.exchange().client_gone() || s.stopping.load(std::memory_order_relaxed); };
}

// ------------------------------------------------------------------------------------------ State
runtime::LoadOptions Server::State::load_options(const model::RepositoryEntry& entry) const {
  runtime::LoadOptions o = options.load;
  o.name = entry.runtime_name;
  o.queue.max_queue = options.max_queue;
  o.queue.dynamic_batching = options.dynamic_batching;
  o.queue.batching = options.batching;
  o.queue.max_run_time = options.max_generation_time;  // a tensor inference's deadline too
  // Models loaded at start stay until evicted or unloaded; on-demand ones follow keep-alive.
  if (!options.load_on_demand && !o.keep_alive) o.keep_alive = std::chrono::milliseconds(-1);
  return o;
}

std::shared_ptr<const model::RepositoryEntry> Server::State::resolve(std::string_view name) const {
  auto entry = repository.find(name);
  if (entry || !options.any_model_name) return entry;
  auto all = repository.entries();
  if (all.size() != 1) return nullptr;
  return repository.find(all.front().name);
}

Result<runtime::ModelHandle> Server::State::model(std::string_view name) {
  auto entry = resolve(name);
  if (!entry) {
    // A name is echoed at most kShownNameBytes long: a 10 MB name is not sent back whole.
    constexpr size_t kShownNameBytes = 128;
    const std::string shown = name.size() <= kShownNameBytes
                                  ? std::string(name)
                                  : to_valid_utf8(name.substr(0, kShownNameBytes)) + "... (" +
                                        std::to_string(name.size()) + " bytes)";
    return NotFound("model '" + shown + "' is not served here (GET /v1/models or POST " +
                    "/v2/repository/index lists the models)");
  }
  auto h = runtime.get(entry->runtime_name);  // a copy's name shares its original's loaded model
  if (h.ok()) return h;
  auto info = runtime.manager().info(entry->runtime_name);
  if (!options.load_on_demand) {
    std::string state = info ? std::string(runtime::model_state_name(info->state)) : "not loaded";
    std::string why = info && !info->reason.empty() ? " (" + info->reason + ")" : "";
    if (auto f = failure(entry->runtime_name)) {
      return Unavailable("model '" + std::string(name) + "' failed to load when gantry serve started: " + *f +
                         "; replace its file and load it with POST /v2/repository/models/" +
                         std::string(name) + "/load");
    }
    return Unavailable("model '" + std::string(name) + "' is " + state + why +
                       "; load it with POST /v2/repository/models/" + std::string(name) +
                       "/load, or start gantry serve with --load-on-demand");
  }
  if (info &&
      (info->state == runtime::ModelState::kDraining || info->state == runtime::ModelState::kLoading)) {
    return Unavailable("model '" + std::string(name) + "' is " +
                       std::string(runtime::model_state_name(info->state)) + "; retry shortly");
  }
  auto loaded = runtime.load(entry->source.string(), load_options(*entry));
  if (!loaded.ok()) {
    if (loaded.status().code() == StatusCode::kResourceExhausted) {
      return Unavailable(loaded.status().message());  // memory, not a full queue: 503
    }
    return loaded.status();
  }
  return loaded;
}

// The loaded model serving `name`, without loading it (NotFound when there is none).
Result<runtime::ModelHandle> Server::State::loaded(std::string_view name) {
  auto entry = resolve(name);
  if (!entry) return NotFound("model '" + std::string(name) + "' is not served here");
  return runtime.get(entry->runtime_name);
}

namespace {
runtime::ApiKeys::HeaderLookup headers_of(const HttpRequest& request) {
  return [&request](std::string_view name) { return request.header(name); };
}
}  // namespace

bool Server::State::allows(const HttpRequest& request) const {
  return api_keys()->allows(headers_of(request));
}
size_t Server::State::owner(const HttpRequest& request) const {
  return api_keys()->owner(headers_of(request));
}

void Server::State::install_keys(std::shared_ptr<const runtime::ApiKeys> next) {
  std::vector<std::string> names;
  for (const auto& t : next->tenants()) {
    tenants.update(t.name, t.limits);
    names.push_back(t.name);
  }
  tenants.retain(names);
  std::lock_guard lock(keys_mu);
  keys = std::move(next);
}

std::optional<int64_t> parse_deadline_ms(std::string_view value) {
  int64_t ms = 0;
  const auto* end = value.data() + value.size();
  auto [p, ec] = std::from_chars(value.data(), end, ms);
  if (ec != std::errc() || p != end || ms <= 0) return std::nullopt;
  return ms;
}

runtime::Admission Server::State::admission(const runtime::ApiKeys::HeaderLookup& header,
                                            Clock::time_point received) {
  runtime::Admission a;
  const auto current = api_keys();
  if (!current->empty()) {
    const std::string name = current->tenant(header);
    if (!name.empty()) a.tenant = tenants.find(name);
  }
  if (auto d = header("x-request-deadline-ms")) {
    if (auto ms = parse_deadline_ms(*d)) a.deadline = received + std::chrono::milliseconds(*ms);
  }
  if (!a.deadline && a.tenant) {
    if (auto d = a.tenant->limits().deadline) a.deadline = received + *d;
  }
  return a;
}

bool Server::State::model_full(std::string_view name) {
  auto h = loaded(name);
  return h.ok() && h->queue().full();
}

bool Server::State::model_batched(std::string_view name) {
  auto h = loaded(name);
  return h.ok() && h->queue().batched();
}

bool Server::State::ready(std::string* why) const {
  if (draining.load() || unready.load()) {
    if (why) *why = "the server is shutting down";
    return false;
  }
  std::vector<std::string> missing;
  for (const auto& name : required_models) {
    if (!repository.in_use(name)) continue;  // deleted since: no longer asked for
    auto info = runtime.manager().info(name);
    const bool is_ready = info && info->state == runtime::ModelState::kReady;
    if (!is_ready && failure(name)) continue;  // failed at start: reported, never waited for
    if (!is_ready)
      missing.push_back(name + " (" +
                        (info ? std::string(runtime::model_state_name(info->state)) : "not loaded") + ")");
  }
  if (missing.empty()) return true;
  if (why) {
    *why = "not every model is loaded:";
    for (const auto& m : missing) *why += " " + m;
  }
  return false;
}

void Server::State::record_failure(const std::string& runtime_name, std::string reason) {
  std::lock_guard lock(failures_mu);
  load_failures[runtime_name] = std::move(reason);
}

void Server::State::clear_failure(std::string_view runtime_name) {
  std::lock_guard lock(failures_mu);
  if (auto it = load_failures.find(runtime_name); it != load_failures.end()) load_failures.erase(it);
}

std::optional<std::string> Server::State::failure(std::string_view runtime_name) const {
  std::lock_guard lock(failures_mu);
  auto it = load_failures.find(runtime_name);
  if (it == load_failures.end()) return std::nullopt;
  return it->second;
}

std::vector<Server::State::Failure> Server::State::failures() const {
  std::vector<Failure> out;
  {
    std::lock_guard lock(failures_mu);
    for (const auto& [name, reason] : load_failures) {
      if (repository.in_use(name)) out.push_back({name, reason});
    }
  }
  for (const auto& p : unlisted) out.push_back({p.name, p.reason});
  return out;
}

boost::asio::thread_pool& Server::State::metadata_pool() {
  return options.load_on_demand ? workers : control;
}

ServerGauges Server::State::gauges(size_t own_requests) {
  ServerGauges g;
  for (const auto& m : runtime.manager().list()) {
    if (m.state == runtime::ModelState::kReady) g.queue_depth[m.name] = m.requests;
  }
  const HttpServer* serving = serving_http.load(std::memory_order_acquire);
  g.open_connections = serving ? serving->open_connections() : 0;
  const size_t n = inflight.load();
  g.inflight_requests = n > own_requests ? n - own_requests : 0;
  g.ready = ready();
  g.header_reads = headers.reads();
  for (const auto& t : tenants.list()) g.tenants.push_back({t->name(), t->counters()});
  return g;
}

// ------------------------------------------------------------------------------------------ Server
Server::Server(std::unique_ptr<State> state) : state_(std::move(state)) {}

Server::~Server() {
  if (state_->http) {
    drain(std::chrono::milliseconds(0));
    stop();
  }
}

uint16_t Server::port() const { return state_->http->port(); }

uint16_t Server::grpc_port() const {
  if (!state_->grpc) return 0;
  return state_->options.grpc_port == kGrpcSamePort ? port() : state_->grpc->port();
}

std::string Server::url() const {
  std::string host = state_->options.host.substr(0, state_->options.host.find(','));  // the first
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(port());
}

Status Server::reload_keys() {
  auto next = runtime::ApiKeys::from_files(state_->options.api_key_files, state_->options.api_keys,
                                           state_->api_keys().get());
  if (!next.ok()) {
    GANTRY_LOG_ERROR("reloading the API keys: {}; the keys in use stay", next.status().message());
    return next.status();
  }
  const size_t n_keys = next->size(), n_tenants = next->tenants().size();
  state_->install_keys(std::make_shared<const runtime::ApiKeys>(std::move(*next)));
  GANTRY_LOG_INFO("reloaded the API keys: {} keys of {} tenants", n_keys, n_tenants);
  return Status::Ok();
}

void Server::set_unready() {
  if (!state_->unready.exchange(true)) GANTRY_LOG_INFO("readiness is 503; requests are still served");
}

bool Server::drain(std::chrono::milliseconds timeout) {
  if (!state_->draining.exchange(true)) GANTRY_LOG_INFO("draining: readiness is 503, no new requests");
  if (state_->http) state_->http->stop_accepting();
  const auto deadline = Clock::now() + timeout;
  // Answered (inflight 0) is not yet delivered: also wait until every started answer is fully written.
  while (state_->inflight.load() > 0 || (state_->http && state_->http->answers_in_progress() > 0)) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void Server::stop() {
  if (!state_->http) return;
  state_->stopping.store(true);
  if (state_->grpc) state_->grpc->stop();  // first: its calls in progress need the workers
  state_->http->stop();
  state_->watchdog.reset();  // after the front ends (they read it), before the control pool its probe needs
  // After a drain that timed out, work may still be queued (a long generation's answer): abandon it
  // rather than wait; its clients are already disconnected.
  // Batched inferences queued in the runtime call back into this state: wait until each has (a batch
  // runs in milliseconds; the bound only guards against a model that never returns).
  if (!state_->batched.wait_idle(std::chrono::seconds(30)))
    GANTRY_LOG_ERROR("a model's batches did not finish within 30 s of stopping");
  state_->workers.stop();
  state_->control.stop();
  state_->workers.join();
  state_->control.join();
  state_->serving_http.store(nullptr, std::memory_order_release);
  state_->http.reset();
}

Result<std::unique_ptr<Server>> Server::start(runtime::Runtime& runtime, ServeOptions options) {
  if (!is_loopback_host(options.host) && options.api_key_files.empty() && options.api_keys.empty() &&
      !options.insecure_no_auth) {
    return InvalidArgument("refusing to serve on " + options.host +
                           " without an API key: anyone who can reach it could use the models. Create a key "
                           "file (e.g. `openssl rand -hex 32 > key.txt`) and pass --api-key-file key.txt, or "
                           "pass --insecure-no-auth if the network is trusted");
  }
  if (options.max_queue == 0) return InvalidArgument("--max-queue must be at least 1");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t workers =
      options.workers > 0 ? static_cast<size_t>(options.workers) : std::max<size_t>(4, 2 * cores);
  auto state = std::make_unique<State>(runtime, std::move(options), workers);
  const ServeOptions& o = state->options;
  {
    GANTRY_ASSIGN_OR_RETURN(runtime::ApiKeys keys, runtime::ApiKeys::from_files(o.api_key_files, o.api_keys));
    state->install_keys(std::make_shared<const runtime::ApiKeys>(std::move(keys)));
  }
  for (const auto& m : o.models) GANTRY_RETURN_IF_ERROR(state->repository.add(m));
  // The models named on the command line must load; those of --model-repository may fail one by one.
  std::set<std::string, std::less<>> named;
  for (const auto& e : state->repository.entries()) named.insert(e.name);
  if (!o.model_repository.empty()) {
    // Downloads a killed server left behind (never a live server's: ollama_pull.h says how it tells).
    for (const auto& p : remove_stale_partials(o.model_repository))
      GANTRY_LOG_WARN("removed {}: an unfinished download of a server that is gone", p.string());
    GANTRY_RETURN_IF_ERROR(state->repository.add_directory(o.model_repository, &state->unlisted));
    for (const auto& p : state->unlisted)
      GANTRY_LOG_ERROR("--model-repository: {} is not served: {}", p.source.string(), p.reason);
  }
  if (state->repository.empty()) {
    std::string why = state->unlisted.empty() ? "" : " (" + state->unlisted.front().reason + ")";
    return InvalidArgument("no models to serve: name model files or packages, or --model-repository DIR" +
                           why);
  }
  if (!o.model_name.empty()) {
    const auto entries = state->repository.entries();
    if (entries.size() != 1) {
      std::string names;
      for (const auto& e : entries) names += (names.empty() ? "" : ", ") + e.name;
      return InvalidArgument("--model-name " + o.model_name + " names one model, but there are " +
                             std::to_string(entries.size()) + ": " + names +
                             " (give one model file, package or a repository holding one)");
    }
    GANTRY_RETURN_IF_ERROR(state->repository.rename(entries.front().name, o.model_name));
  }
  if (!o.load_on_demand) {
    for (const auto& e : state->repository.entries()) state->required_models.push_back(e.runtime_name);
  }
  {
    std::vector<std::string> names;
    for (const auto& e : state->repository.entries()) names.push_back(e.name);
    state->metrics.set_model_names(std::move(names));
  }
  if (!o.load_on_demand) {
    size_t loaded = 0;
    Status first_failure;
    for (const auto& e : state->repository.entries()) {
      const auto t0 = Clock::now();
      auto h = runtime.load(e.source.string(), state->load_options(e));
      if (!h.ok()) {
        Status st = h.status().with_context("loading '" + e.name + "' from " + e.source.string());
        if (named.contains(e.name)) return st;
        // A bad file in the repository keeps only itself from serving: reported, the others serve.
        GANTRY_LOG_ERROR(
            "{}; serving the other models without it (readiness and the repository index "
            "report it)",
            st.message());
        state->record_failure(e.runtime_name, h.status().message());
        if (first_failure.ok()) first_failure = st;
        continue;
      }
      ++loaded;
      GANTRY_LOG_INFO("loaded '{}' ({}, {}) in {:.0f} ms", e.name, h->model().metadata().backend,
                      h->model().metadata().provider,
                      std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    if (loaded == 0 && !first_failure.ok()) return first_failure.with_context("no model could be loaded");
  }

  State* s = state.get();
  HttpHooks hooks;
  const size_t global_limit = o.max_queue * (state->repository.entries().size() + 1) + workers;
  hooks.on_header = [s, global_limit](const HttpRequest& req) -> HeaderDecision {
    const RouteMatch r = find_route(req.path, req.method);
    auto early = early_answer(*s, global_limit, r, req);
    if (early) {
      if (req.method != "OPTIONS") {
        auto cors = cors_headers(s->options, req);
        early->headers.insert(early->headers.end(), cors.begin(), cors.end());
      }
      s->metrics.request(r.params.model.empty() ? "-" : r.params.model, protocol_name(r.protocol),
                         early->status, std::chrono::duration<double>(Clock::now() - req.received));
      return {std::move(early), std::nullopt};
    }
    return {std::nullopt, body_limit(r, req)};
  };

  hooks.on_request = [s](HttpRequest&& req, std::shared_ptr<Exchange> ex) {
    const RouteMatch r = find_route(req.path, req.method);
    auto reply = std::make_shared<Reply>(*s, std::move(ex), r.protocol, req.received);
    if (!r.params.model.empty()) reply->set_model(r.params.model);
    reply->add_headers(cors_headers(s->options, req));
    reply->set_admission(s->admission(headers_of(req), req.received));
    if (!r.route) {
      if (r.protocol == Protocol::kOllama) {
        reply->error(404,
                     "no route for " + req.method + " " + req.path +
                         " (the Ollama API here: /api/tags, ps, show, generate, chat, embed, embeddings, "
                         "version, copy, delete, pull; models are not created or pushed over it)");
        return;
      }
      reply->error(404, "no route for " + req.method + " " + req.path +
                            " (KServe v2 under /v2, OpenAI under /v1, metrics at /metrics)");
      return;
    }
    if (r.route->versioned && !r.params.version.empty() && r.params.version != "1") {
      reply->error(
          404, "model '" + r.params.model + "' has no version '" + r.params.version + "' (its versions: 1)");
      return;
    }
    // A small request for a loaded model that batches is parsed and queued right here: both are cheap,
    // and the batch's answer goes to a worker anyway (run_inference), so a hop to a worker and back
    // is saved on every request (as the gRPC front end does).
    constexpr size_t kInlineBodyBytes = 64 << 10;
    if (r.route->runs == Route::Runs::kInline ||
        (r.route->batched && req.body.size() <= kInlineBodyBytes && s->model_batched(r.params.model))) {
      r.route->handle(*s, reply, req, r.params);
      return;
    }
    auto req_ptr = std::make_shared<HttpRequest>(std::move(req));
    post_task(pool_for(*s, *r.route), "request",
              [s, r, reply, req_ptr]() mutable { r.route->handle(*s, reply, *req_ptr, r.params); });
  };

  HttpServerOptions http;
  http.host = o.host;
  for (size_t at = 0; (at = http.host.find("localhost", at)) != std::string::npos;)
    http.host.replace(at, 9, "127.0.0.1");
  http.port = o.port;
  http.io_threads = o.http_threads;
  http.max_connections = o.max_connections;
  http.limits.max_body_bytes = o.max_body_bytes;
  http.limits.header_timeout = o.header_timeout;
  http.limits.body_timeout = o.body_timeout;
  // Before any front end starts: their liveness routes read it from their own threads.
  state->watchdog = std::make_unique<Watchdog>(
      o.liveness_timeout, [s](std::function<void()> done) { boost::asio::post(s->control, std::move(done)); },
      [s, loops = std::make_shared<LoopMonitor>(o.liveness_timeout)] {
        Status verdict;
        for (const auto& m : s->runtime.manager().list()) {
          Status st = loops->observe(m.name, m.stats.loop_work, m.stats.loop_steps, Clock::now());
          if (verdict.ok()) verdict = st;
        }
        return verdict;
      });
  if (o.grpc_port == kGrpcSamePort) {
    // gRPC first: the HTTP port hands it the connections that open with HTTP/2's preface.
    GANTRY_ASSIGN_OR_RETURN(state->grpc, GrpcServer::start(*state, kGrpcSamePort, global_limit));
    hooks.on_http2 = [s](int fd) { s->grpc->adopt(fd); };
  }
  GANTRY_ASSIGN_OR_RETURN(state->http, HttpServer::start(http, std::move(hooks)));
  state->serving_http.store(state->http.get(), std::memory_order_release);
  if (o.grpc_port == kGrpcSamePort) {
    GANTRY_LOG_INFO("KServe v2 gRPC (h2c) on the HTTP port {}", state->http->port());
  } else if (const int grpc_port = o.grpc_port.value_or(o.default_grpc_port); grpc_port >= 0) {
    auto grpc = GrpcServer::start(*state, grpc_port, global_limit);
    if (grpc.ok())
      state->grpc = std::move(*grpc);
    else if (o.grpc_port)  // asked for: a failure
      return grpc.status();
    else  // the default port, taken (e.g. by another server on this machine)
      GANTRY_LOG_WARN("{}; serving without gRPC", grpc.status().message());
  }
  return std::unique_ptr<Server>(new Server(std::move(state)));
}

}  // namespace gantry::server
