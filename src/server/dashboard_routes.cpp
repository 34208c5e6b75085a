// The dashboard's routes: its embedded page and assets (no key: they hold no data), and the JSON it
// polls (/gantry/status) and its pin buttons (/gantry/models/{name}/pin|unpin), which need the key like
// every other data route. Load and unload use the KServe repository routes.
#include <prometheus/metric_family.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gantry/build_info.h"
#include "gantry/hw/registry_json.h"
#include "gantry/model/package.h"
#include "route_table.h"
#include "server/dashboard_assets.h"
#include "server_state.h"

namespace gantry::server {
namespace {
using json = nlohmann::json;

// "gguf" / "onnx": the loaded model's, else what the file says (model::detect_model_format); "" when
// unknown (a package directory or .tar not loaded yet).
std::string format_of(const runtime::ModelInfo* info, const std::string& source) {
  if (info && !info->format.empty()) return info->format;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(source, ec)) return "";
  auto f = model::detect_model_format(source);
  return f.ok() ? std::string(model::model_format_name(*f)) : "";
}

json model_json(const runtime::ModelInfo* info, const std::string& name, const std::string& source,
                bool in_repository, const ServerGauges& gauges) {
  const auto now = runtime::Clock::now();
  json m{{"name", name}, {"source", source}, {"in_repository", in_repository}};
  m["state"] = info ? std::string(runtime::model_state_name(info->state)) : "unloaded";
  m["reason"] = info ? info->reason : "not loaded yet";
  m["backend"] = info ? info->backend : "";
  m["provider"] = info ? info->provider : "";
  m["format"] = format_of(info, source);
  json mem = json::object();
  if (info) {
    for (const auto& [device, bytes] : info->reserved_bytes) mem[device] = bytes;
  }
  m["memory"] = std::move(mem);
  m["memory_basis"] = info ? info->memory_basis : "";
  m["instances"] = info ? info->instances : 0;
  m["pinned"] = info && info->pinned;
  m["keep_alive_ms"] = info ? json(info->keep_alive.count()) : json(nullptr);  // negative: forever
  m["handles"] = info ? info->handles : 0;
  const bool used = info && info->last_used != runtime::Clock::time_point{};
  m["idle_ms"] =
      used ? json(std::chrono::duration_cast<std::chrono::milliseconds>(now - info->last_used).count())
           : json(nullptr);
  auto q = gauges.queue_depth.find(name);
  m["queue_depth"] = q == gauges.queue_depth.end() ? 0 : q->second;
  if (info) {
    m["stats"] = {{"calls", info->stats.calls},
                  {"failures", info->stats.failures},
                  {"in_flight", info->stats.in_flight},
                  {"prompt_tokens", info->stats.prompt_tokens},
                  {"generated_tokens", info->stats.generated_tokens}};
  }
  return m;
}

// Cumulative totals the page turns into rates and percentiles (deltas between two polls). Only
// requests addressed to a model count (KServe, OpenAI or Ollama, with a model label): the page's own polling
// and probes would otherwise be most of the traffic.
json totals_json(const std::vector<prometheus::MetricFamily>& families) {
  double requests = 0, errors = 0, prompt = 0, generated = 0, latency_count = 0, latency_sum = 0;
  std::vector<std::pair<double, double>> buckets;  // upper bound, cumulative count (summed over series)
  auto label = [](const prometheus::ClientMetric& m, std::string_view name) -> std::string_view {
    for (const auto& l : m.label) {
      if (l.name == name) return l.value;
    }
    return {};
  };
  auto counted = [&](const prometheus::ClientMetric& m) {
    return label(m, "protocol") != "http" && !label(m, "model").empty() && label(m, "model") != "-";
  };
  for (const auto& f : families) {
    for (const auto& m : f.metric) {
      if (f.name == "gantry_requests_total" && counted(m)) {
        requests += m.counter.value;
        std::string_view code = label(m, "code");
        if (!code.empty() && code[0] != '2') errors += m.counter.value;
      } else if (f.name == "gantry_prompt_tokens_total") {
        prompt += m.counter.value;
      } else if (f.name == "gantry_generated_tokens_total") {
        generated += m.counter.value;
      } else if (f.name == "gantry_request_duration_seconds" && counted(m)) {
        latency_count += static_cast<double>(m.histogram.sample_count);
        latency_sum += m.histogram.sample_sum;
        for (size_t i = 0; i < m.histogram.bucket.size(); ++i) {
          const auto& b = m.histogram.bucket[i];
          if (buckets.size() <= i) buckets.emplace_back(b.upper_bound, 0);
          buckets[i].second += static_cast<double>(b.cumulative_count);
        }
      }
    }
  }
  json le = json::array();
  for (const auto& [bound, count] : buckets) {
    le.push_back({{"le", std::isinf(bound) ? json("+Inf") : json(bound)}, {"count", count}});
  }
  return {{"requests", requests},
          {"errors", errors},
          {"prompt_tokens", prompt},
          {"generated_tokens", generated},
          {"latency_count", latency_count},
          {"latency_sum_s", latency_sum},
          {"latency_buckets", std::move(le)}};
}
}  // namespace

std::optional<HttpResponse> dashboard_asset(std::string_view name, const HttpRequest& request) {
  const EmbeddedAsset* a = find_dashboard_asset(name);
  if (!a) return std::nullopt;
  HttpResponse r;
  r.content_type = std::string(a->content_type);
  r.headers = {{"Content-Security-Policy", std::string(kDashboardCsp)},
               {"X-Content-Type-Options", "nosniff"},
               {"Referrer-Policy", "no-referrer"},
               {"ETag", std::string(a->etag)},
               // Revalidate every time (a 304 is cheap): an upgraded binary is never shown stale.
               {"Cache-Control", "no-cache"}};
  auto match = request.header("if-none-match");
  if (match && match->find(a->etag) != std::string_view::npos) {
    r.status = 304;
    r.content_type.clear();
    return r;
  }
  r.body = std::string(a->bytes);
  return r;
}

void dashboard_status(Server::State& s, std::shared_ptr<Reply> reply) {
  const ServerGauges gauges = s.gauges(/*own_requests=*/1);
  json models = json::array();
  std::vector<runtime::ModelInfo> loaded = s.runtime.models();
  const auto entries = s.repository.entries();
  for (const auto& e : entries) {
    auto it = std::find_if(loaded.begin(), loaded.end(), [&](const auto& i) { return i.name == e.name; });
    models.push_back(model_json(it == loaded.end() ? nullptr : &*it, e.name,
                                it == loaded.end() ? e.source.string() : it->source, true, gauges));
  }
  for (const auto& i : loaded) {  // loaded some other way (none today): still shown
    if (!s.repository.find(i.name)) models.push_back(model_json(&i, i.name, i.source, false, gauges));
  }
  json budgets = json::array();
  for (const auto& b : s.runtime.budgets()) {
    json owners = json::array();
    for (const auto& o : b.owners) {
      // Whether an owner is pinned is the model manager's fact (a model's name; other owners never are).
      auto m = std::find_if(loaded.begin(), loaded.end(), [&](const auto& i) { return i.name == o.owner; });
      owners.push_back(
          {{"owner", o.owner}, {"bytes", o.footprint()}, {"pinned", m != loaded.end() && m->pinned}});
    }
    budgets.push_back({{"device", b.device},
                       {"capacity", b.capacity},
                       {"used", b.used},
                       {"peak", b.peak},
                       {"owners", std::move(owners)}});
  }
  size_t queued = 0;
  for (const auto& [name, n] : gauges.queue_depth) queued += n;
  const auto uptime = std::chrono::system_clock::now() - s.started;
  json out{
      {"server",
       {{"version", GANTRY_VERSION_STRING},
        {"uptime_s", std::chrono::duration<double>(uptime).count()},
        {"ready", gauges.ready},
        {"load_on_demand", s.options.load_on_demand},
        {"api_key_required", !s.api_keys()->empty()}}},
      {"machine", hw::registry_to_json(s.runtime.hardware())},  // the `gantry detect --json` document
      {"models", std::move(models)},
      {"budgets", std::move(budgets)},
      {"gauges",
       {{"queue_depth", queued},
        {"inflight_requests", gauges.inflight_requests},
        {"open_connections", gauges.open_connections}}},
      {"totals", totals_json(s.metrics.collect())},
  };
  reply->json(200, out.dump(-1, ' ', false, json::error_handler_t::replace));
}

void dashboard_pin(Server::State& s, std::shared_ptr<Reply> reply, std::string model, bool pinned) {
  auto info = s.runtime.manager().info(model);
  if (!s.repository.find(model) && !info) {
    reply->error(404, "model '" + model + "' is not served here (GET /gantry/status lists the models)");
    return;
  }
  // A pin belongs to a loaded model (a later load starts from the load options), so pinning one that is
  // not loaded is refused rather than silently forgotten.
  if (pinned && (!info || info->state != runtime::ModelState::kReady)) {
    const std::string state = info ? std::string(runtime::model_state_name(info->state)) : "unloaded";
    reply->error(409,
                 "model '" + model + "' is " + state +
                     " and only a loaded model can be pinned: load it first (POST /v2/repository/models/" +
                     model + "/load), then pin it");
    return;
  }
  Status st = info ? s.runtime.manager().set_pinned(model, pinned) : Status::Ok();
  if (!st.ok()) {
    reply->error(st);
    return;
  }
  reply->json(200,
              json{{"name", model}, {"pinned", pinned}}.dump(-1, ' ', false, json::error_handler_t::replace));
}

// The dashboard: its page and files (no key, GET only), the status it polls and pinning.
namespace {
using Runs = Route::Runs;

void send_asset(Reply& reply, std::string_view name, const HttpRequest& request) {
  if (auto asset = dashboard_asset(name, request))
    reply.send(std::move(*asset));
  else
    reply.error(404, "the dashboard has no asset '" + std::string(name) + "'");
}

void page(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams&) {
  if (!s.options.dashboard) return reply->error(404, "the dashboard is off (--no-dashboard)");
  send_asset(*reply, "index.html", request);
}

void asset(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& request, const RouteParams& p) {
  if (!s.options.dashboard) return reply->error(404, "the dashboard is off (--no-dashboard)");
  send_asset(*reply, p.asset, request);
}

void status(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams&) {
  dashboard_status(s, std::move(reply));
}

void pin(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams& p) {
  dashboard_pin(s, std::move(reply), p.model, true);
}

void unpin(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, const RouteParams& p) {
  dashboard_pin(s, std::move(reply), p.model, false);
}

constexpr Protocol kHttp = Protocol::kHttp;
const Route kRoutes[] = {
    {.method = "GET",
     .pattern = "/",
     .protocol = kHttp,
     .runs = Runs::kInline,
     .handle = page,
     .access = Route::Access::kPublicPage},
    {.method = "GET",
     .pattern = "/dashboard/{asset}",
     .protocol = kHttp,
     .runs = Runs::kInline,
     .handle = asset,
     .access = Route::Access::kPublicPage},
    {.method = "GET",
     .pattern = "/gantry/status",
     .protocol = kHttp,
     .runs = Runs::kControl,
     .handle = status},
    {.method = "POST",
     .pattern = "/gantry/models/{model}/pin",
     .protocol = kHttp,
     .runs = Runs::kControl,
     .handle = pin},
    {.method = "POST",
     .pattern = "/gantry/models/{model}/unpin",
     .protocol = kHttp,
     .runs = Runs::kControl,
     .handle = unpin},
};
}  // namespace

std::span<const Route> dashboard_routes() { return kRoutes; }

}  // namespace gantry::server
