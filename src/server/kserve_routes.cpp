// KServe v2 / Open Inference Protocol routes: model metadata and readiness, infer (JSON and binary
// tensors, dynamically batched where the model allows), and the model repository extension.
#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "gantry/build_info.h"
#include "gantry/protocol/kserve_codec.h"
#include "gantry/runtime/model_queue.h"
#include "route_table.h"
#include "server_state.h"

namespace gantry::server {
namespace {
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kVersions = {"1"};

// Sends the encoded outputs (binary ones after the JSON header, with its length in a header).
void send_outputs(Reply& reply, std::string_view model, const kserve::InferRequest& request,
                  const Result<std::vector<NamedTensor>>& outputs) {
  if (!outputs.ok()) {
    reply.error(outputs.status());
    return;
  }
  auto encoded = kserve::encode_infer_response(model, "", request, *outputs);
  if (!encoded.ok()) {
    reply.error(500, encoded.status().message());
    return;
  }
  HttpResponse r;
  r.body = std::move(encoded->body);
  if (encoded->json_length) {
    r.content_type = "application/octet-stream";
    r.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*encoded->json_length));
  }
  reply.send(std::move(r));
}

// Triton's repository states.
std::string_view repository_state(runtime::ModelState s) {
  switch (s) {
    case runtime::ModelState::kReady:
      return "READY";
    case runtime::ModelState::kLoading:
      return "LOADING";
    case runtime::ModelState::kDraining:
      return "UNLOADING";
    default:
      return "UNAVAILABLE";
  }
}
}  // namespace

void kserve_infer(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest request, std::string name) {
  std::optional<size_t> json_length;
  if (auto v = request.header("inference-header-content-length")) {
    size_t n = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || end != v->data() + v->size()) {
      reply->error(400, "Inference-Header-Content-Length '" + std::string(*v) + "' is not a byte count");
      return;
    }
    json_length = n;
  }
  auto handle = s.model(name);
  if (!handle.ok()) {
    reply->error(handle.status());
    return;
  }
  const backend::ModelMetadata& md = handle->model().metadata();
  // Binary tensor data beyond what the model accepts at its largest shapes: 413 before parsing it.
  if (json_length && md.max_input_bytes > 0 && *json_length <= request.body.size() &&
      request.body.size() - *json_length > md.max_input_bytes) {
    reply->error(413, "model '" + name + "': the request carries " +
                          std::to_string(request.body.size() - *json_length) +
                          " bytes of binary tensor data, more than the " +
                          std::to_string(md.max_input_bytes) +
                          " bytes its inputs take at their largest shapes (max_input_bytes)");
    return;
  }
  // Aligned binary inputs point into the body and share its ownership: it lives as long as they do.
  auto body = std::make_shared<const std::string>(std::move(request.body));
  auto parsed = kserve::parse_infer_request(*body, json_length, md, body);
  if (!parsed.ok()) {
    reply->error(400, parsed.status().message());
    return;
  }
  // Too large for the model (413), or in memory it cannot bind (400): before any queue.
  if (Status a = backend::check_admission(md, parsed->inputs); !a.ok()) {
    reply->error(a.code() == StatusCode::kResourceExhausted ? 413 : 400, a.message());
    return;
  }
  auto infer = std::make_shared<kserve::InferRequest>(std::move(*parsed));
  // JSON data is copied into the tensors, so unless a binary input points into the body, the body (up to
  // --max-body-size) is freed here, before inference, rather than held through it.
  body.reset();
  run_inference(
      s, name, std::move(*handle), std::move(infer->inputs), nullptr, reply->received(),
      [reply, infer, name](Result<std::vector<NamedTensor>> out) {
        send_outputs(*reply, name, *infer, out);  // a full queue: 429
      },
      work_cancel(s, *reply));
}

void run_inference(Server::State& s, const std::string& name, runtime::ModelHandle handle,
                   std::vector<NamedTensor> inputs, std::shared_ptr<const void> keep_alive,
                   Clock::time_point received, InferenceDone done, const backend::CancelCheck& cancelled) {
  runtime::ModelQueue& queue = handle.queue();
  const bool batched = queue.batched();
  if (batched) s.batched.add();
  queue.infer(
      std::move(handle), std::move(inputs), std::move(keep_alive),
      [&s, name, received, batched, done = std::move(done)](Result<std::vector<NamedTensor>> out,
                                                            const runtime::BatchTiming& timing,
                                                            runtime::ModelHandle used) mutable {
        if (!batched) {  // ran alone, on this (a worker) thread
          s.metrics.queue_time(name, Clock::now() - received);
          return done(std::move(out));
        }
        s.metrics.queue_time(name, timing.batch_requests > 0 ? timing.queued : Clock::now() - received);
        if (timing.batch_requests > 0) s.metrics.batch(name, timing.batch_requests);
        // Maybe on the batcher's thread: the answer is encoded, and the model's use ends, on a
        // worker, so the batcher goes straight on to its next batch.
        auto result = std::make_shared<Result<std::vector<NamedTensor>>>(std::move(out));
        auto held = std::make_shared<runtime::ModelHandle>(std::move(used));
        post_task(s.workers, "kserve infer answer",
                  [done = std::move(done), result, held]() mutable { done(std::move(*result)); });
        s.batched.done();  // the last use of `s` on this thread
      },
      cancelled);
}

void kserve_model_metadata(Server::State& s, std::shared_ptr<Reply> reply, std::string name) {
  auto handle = s.model(name);
  if (!handle.ok()) {
    reply->error(handle.status());
    return;
  }
  reply->json(200, kserve::model_metadata(name, kVersions, handle->model().metadata())
                       .dump(-1, ' ', false, json::error_handler_t::replace));
}

void kserve_model_ready(Server::State& s, std::shared_ptr<Reply> reply, std::string name) {
  auto entry = s.repository.find(name);
  if (!entry) {
    reply->error(404, "model '" + name + "' is not served here");
    return;
  }
  auto info = s.runtime.manager().info(entry->runtime_name);
  const bool ready = info && info->state == runtime::ModelState::kReady;
  if (ready) {
    reply->json(200,
                json{{"name", name}, {"ready", true}}.dump(-1, ' ', false, json::error_handler_t::replace));
  } else if (auto failed = s.failure(entry->runtime_name)) {
    reply->error(503, "model '" + name + "' failed to load when gantry serve started: " + *failed);
  } else {
    std::string state = info ? std::string(runtime::model_state_name(info->state)) : "not loaded";
    reply->error(503, "model '" + name + "' is " + state);
  }
}

std::vector<RepositoryModel> repository_index(Server::State& s) {
  std::vector<RepositoryModel> out;
  for (const auto& e : s.repository.entries()) {
    auto info = s.runtime.manager().info(e.runtime_name);
    RepositoryModel m{e.name, kVersions[0], std::string(info ? repository_state(info->state) : "UNAVAILABLE"),
                      info ? info->reason : "not loaded"};
    if (!info || info->state != runtime::ModelState::kReady) {
      if (auto failed = s.failure(e.runtime_name)) m.reason = "failed to load: " + *failed;
    }
    out.push_back(std::move(m));
  }
  // Entries of --model-repository that could not even be listed (no readable manifest, a taken name).
  for (const auto& p : s.unlisted) out.push_back({p.name, kVersions[0], "UNAVAILABLE", p.reason});
  return out;
}

Status repository_load(Server::State& s, const std::string& name, bool load) {
  auto entry = s.repository.find(name);
  if (!entry) return NotFound("model '" + name + "' is not in the model repository (the index lists it)");
  if (load) {
    auto h = s.runtime.load(entry->source.string(), s.load_options(*entry));
    if (!h.ok() && h.status().code() == StatusCode::kResourceExhausted)
      return Unavailable(h.status().message());  // memory, not a full queue
    if (h.ok()) s.clear_failure(entry->runtime_name);
    return h.ok() ? Status::Ok() : h.status();
  }
  Status st = s.runtime.unload(entry->runtime_name);
  if (st.code() == StatusCode::kNotFound) return InvalidArgument(st.message());  // known, not loaded
  return st;
}

void kserve_repository_index(Server::State& s, std::shared_ptr<Reply> reply) {
  json out = json::array();
  for (const RepositoryModel& m : repository_index(s))
    out.push_back({{"name", m.name}, {"version", m.version}, {"state", m.state}, {"reason", m.reason}});
  reply->json(200, out.dump(-1, ' ', false, json::error_handler_t::replace));
}

void kserve_repository_load(Server::State& s, std::shared_ptr<Reply> reply, std::string name, bool load) {
  Status st = repository_load(s, name, load);
  if (!st.ok()) {
    reply->error(http_status_for(st), st.code() == StatusCode::kNotFound
                                          ? "model '" + name +
                                                "' is not in the model repository (POST /v2/repository/index "
                                                "lists it)"
                                          : st.message());
    return;
  }
  reply->json(200, "{}");
}

// The KServe v2 / Open Inference Protocol routes (and the repository extension).
namespace {
using Runs = Route::Runs;

void live(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams&) {
  // Alive while the watchdog's probes come back: a server that deadlocked answers 503 here, so an
  // orchestrator restarts it (readiness alone would only take it out of rotation).
  if (Status st = s.watchdog ? s.watchdog->alive() : Status::Ok(); !st.ok()) {
    reply->error(503, st.message());
    return;
  }
  reply->json(200, R"({"live":true})");
}

void ready(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams&) {
  std::string why;
  if (!s.ready(&why)) return reply->error(503, why);
  // Ready: every model that could load serves; those of --model-repository that could not are named.
  const auto failed = s.failures();
  if (failed.empty()) return reply->json(200, R"({"ready":true})");
  json models = json::array();
  for (const auto& f : failed) models.push_back({{"name", f.name}, {"reason", f.reason}});
  reply->json(200, json{{"ready", true}, {"failed_models", std::move(models)}}.dump(
                       -1, ' ', false, json::error_handler_t::replace));
}

void server_metadata(Server::State&, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams&) {
  using json = nlohmann::json;
  reply->json(200, json{{"name", "gantry"},
                        {"version", GANTRY_VERSION_STRING},
                        {"extensions", {"binary_tensor_data", "model_repository"}}}
                       .dump(-1, ' ', false, json::error_handler_t::replace));
}

void model_metadata(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams& p) {
  kserve_model_metadata(s, std::move(reply), p.model);
}

void model_ready(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams& p) {
  kserve_model_ready(s, std::move(reply), p.model);
}

void infer(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams& p) {
  kserve_infer(s, std::move(reply), std::move(request), p.model);
}

void repository_index(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams&) {
  kserve_repository_index(s, std::move(reply));
}

void repository_load(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams& p) {
  kserve_repository_load(s, std::move(reply), p.model, true);
}

void repository_unload(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams& p) {
  kserve_repository_load(s, std::move(reply), p.model, false);
}

constexpr Protocol kKserve = Protocol::kKserve;
const Route kRoutes[] = {
    {.method = "GET",
     .pattern = "/v2/health/live",
     .protocol = kKserve,
     .runs = Runs::kInline,
     .handle = live,
     .access = Route::Access::kProbe},
    {.method = "GET",
     .pattern = "/v2/health/ready",
     .protocol = kKserve,
     .runs = Runs::kInline,
     .handle = ready,
     .access = Route::Access::kProbe},
    {.method = "GET",
     .pattern = "/v2",
     .protocol = kKserve,
     .runs = Runs::kInline,
     .handle = server_metadata},
    {.method = "POST",
     .pattern = "/v2/repository/index",
     .protocol = kKserve,
     .runs = Runs::kControl,
     .handle = repository_index},
    {.method = "POST",
     .pattern = "/v2/repository/models/{model}/load",
     .protocol = kKserve,
     .runs = Runs::kWorkers,
     .handle = repository_load},
    {.method = "POST",
     .pattern = "/v2/repository/models/{model}/unload",
     .protocol = kKserve,
     .runs = Runs::kWorkers,
     .handle = repository_unload},
    {.method = "GET",
     .pattern = "/v2/models/{model}",
     .protocol = kKserve,
     .runs = Runs::kMetadata,
     .handle = model_metadata,
     .versioned = true},
    {.method = "GET",
     .pattern = "/v2/models/{model}/versions/{version}",
     .protocol = kKserve,
     .runs = Runs::kMetadata,
     .handle = model_metadata,
     .versioned = true},
    {.method = "GET",
     .pattern = "/v2/models/{model}/ready",
     .protocol = kKserve,
     .runs = Runs::kControl,
     .handle = model_ready,
     .versioned = true},
    {.method = "GET",
     .pattern = "/v2/models/{model}/versions/{version}/ready",
     .protocol = kKserve,
     .runs = Runs::kControl,
     .handle = model_ready,
     .versioned = true},
    {.method = "POST",
     .pattern = "/v2/models/{model}/infer",
     .protocol = kKserve,
     .runs = Runs::kWorkers,
     .handle = infer,
     .inference = true,
     .batched = true,
     .versioned = true},
    {.method = "POST",
     .pattern = "/v2/models/{model}/versions/{version}/infer",
     .protocol = kKserve,
     .runs = Runs::kWorkers,
     .handle = infer,
     .inference = true,
     .batched = true,
     .versioned = true},
    // Any other path under a model: no route, but its 404 is counted under the model's name.
    {.method = "",
     .pattern = "/v2/models/{model}/**",
     .protocol = kKserve,
     .runs = Runs::kInline,
     .handle = nullptr},
};
}  // namespace

std::span<const Route> kserve_routes() { return kRoutes; }

}  // namespace gantry::server
