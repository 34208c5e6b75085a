#include "gantry/server/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <map>

#include "gantry/core/utf8.h"
#include "gantry/runtime/runtime.h"

namespace gantry::server {
namespace {
using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Latency buckets from 1 ms to ~2 min; token timings from 1 ms to 30 s; batch sizes 1..256.
const Histogram::BucketBoundaries kLatency = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                              0.5,   1,      2.5,   5,    10,    30,   60,  120};
const Histogram::BucketBoundaries kToken = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                            0.5,   1,     2.5,  5,     10,   30};
const Histogram::BucketBoundaries kBatch = {1, 2, 4, 8, 16, 32, 64, 128, 256};

std::string s(std::string_view v) { return std::string(v); }
}  // namespace

struct Metrics::Families {
  explicit Families(prometheus::Registry& r)
      : requests(BuildCounter()
                     .Name("gantry_requests_total")
                     .Help("Requests answered, by model, protocol and HTTP status")
                     .Register(r)),
        latency(BuildHistogram()
                    .Name("gantry_request_duration_seconds")
                    .Help("Time from a request's header to its complete response")
                    .Register(r)),
        queue(BuildHistogram()
                  .Name("gantry_queue_duration_seconds")
                  .Help("Time a request waited before its model started on it")
                  .Register(r)),
        ttft(BuildHistogram()
                 .Name("gantry_time_to_first_token_seconds")
                 .Help("Time from admission to the first generated token")
                 .Register(r)),
        batch(BuildHistogram()
                  .Name("gantry_batch_size")
                  .Help("Requests per dynamic batch run by a model")
                  .Register(r)),
        prompt_tokens(
            BuildCounter().Name("gantry_prompt_tokens_total").Help("Prompt tokens processed").Register(r)),
        prompt_tokens_cached(BuildCounter()
                                 .Name("gantry_prompt_tokens_cached_total")
                                 .Help("Prompt tokens taken from the prompt cache (not evaluated again)")
                                 .Register(r)),
        generated_tokens(
            BuildCounter().Name("gantry_generated_tokens_total").Help("Tokens generated").Register(r)),
        tokens_per_second(BuildGauge()
                              .Name("gantry_generation_tokens_per_second")
                              .Help("Generation speed of the model's most recent request")
                              .Register(r)),
        evictions(BuildCounter()
                      .Name("gantry_model_evictions_total")
                      .Help("Models evicted from memory to make room for another")
                      .Register(r)
                      .Add({})) {}

  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& latency;
  prometheus::Family<prometheus::Histogram>& queue;
  prometheus::Family<prometheus::Histogram>& ttft;
  prometheus::Family<prometheus::Histogram>& batch;
  prometheus::Family<prometheus::Counter>& prompt_tokens;
  prometheus::Family<prometheus::Counter>& prompt_tokens_cached;
  prometheus::Family<prometheus::Counter>& generated_tokens;
  prometheus::Family<prometheus::Gauge>& tokens_per_second;
  prometheus::Counter& evictions;
};

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()), f_(std::make_unique<Families>(*registry_)) {}
Metrics::~Metrics() = default;

void Metrics::set_model_names(std::vector<std::string> names) {
  model_names_.emplace();
  for (auto& n : names) model_names_->insert(std::move(n));
}

std::string Metrics::label(std::string_view model) const {
  if (model_names_ && !model_names_->contains(model)) return "-";
  return to_valid_utf8(model);
}

void Metrics::request(std::string_view model, std::string_view protocol, int status, Seconds latency) {
  const std::string m = label(model);
  f_->requests.Add({{"model", m}, {"protocol", s(protocol)}, {"code", std::to_string(status)}}).Increment();
  f_->latency.Add({{"model", m}, {"protocol", s(protocol)}}, kLatency).Observe(latency.count());
}

void Metrics::queue_time(std::string_view model, Seconds waited) {
  f_->queue.Add({{"model", label(model)}}, kLatency).Observe(waited.count());
}

void Metrics::time_to_first_token(std::string_view model, Seconds ttft) {
  f_->ttft.Add({{"model", label(model)}}, kToken).Observe(ttft.count());
}

void Metrics::batch(std::string_view model, size_t requests) {
  f_->batch.Add({{"model", label(model)}}, kBatch).Observe(static_cast<double>(requests));
}

void Metrics::tokens(std::string_view model, uint64_t prompt, uint64_t generated, Seconds generation_time,
                     uint64_t prompt_cached) {
  const std::string m = label(model);
  f_->prompt_tokens.Add({{"model", m}}).Increment(static_cast<double>(prompt));
  f_->prompt_tokens_cached.Add({{"model", m}}).Increment(static_cast<double>(prompt_cached));
  f_->generated_tokens.Add({{"model", m}}).Increment(static_cast<double>(generated));
  if (generated > 0 && generation_time.count() > 0) {
    f_->tokens_per_second.Add({{"model", m}}).Set(static_cast<double>(generated) / generation_time.count());
  }
}

std::vector<prometheus::MetricFamily> Metrics::collect() const { return registry_->Collect(); }

std::string Metrics::render(runtime::Runtime& runtime, const ServerGauges& gauges) {
  std::lock_guard lock(render_mu_);
  const uint64_t ev = runtime.manager().evictions();
  if (ev > evictions_seen_) {
    f_->evictions.Increment(static_cast<double>(ev - evictions_seen_));
    evictions_seen_ = ev;
  }
  // State gauges go in a registry built for this scrape: a model that left leaves no stale series.
  prometheus::Registry now;
  auto& depth = BuildGauge().Name("gantry_queue_depth").Help("Requests waiting per model").Register(now);
  for (const auto& [model, n] : gauges.queue_depth)
    depth.Add({{"model", label(model)}}).Set(static_cast<double>(n));
  BuildGauge()
      .Name("gantry_http_connections")
      .Help("Open client connections")
      .Register(now)
      .Add({})
      .Set(static_cast<double>(gauges.open_connections));
  BuildGauge()
      .Name("gantry_inflight_requests")
      .Help("Inference requests accepted and not yet answered")
      .Register(now)
      .Add({})
      .Set(static_cast<double>(gauges.inflight_requests));
  BuildGauge()
      .Name("gantry_ready")
      .Help("1 while /v2/health/ready answers 200 (every model asked for loaded, not draining), else 0")
      .Register(now)
      .Add({})
      .Set(gauges.ready ? 1 : 0);
  BuildCounter()
      .Name("gantry_model_header_reads_total")
      .Help("GGUF headers read for Ollama's /api/tags, /api/ps and /api/show (once per version of a file)")
      .Register(now)
      .Add({})
      .Increment(static_cast<double>(gauges.header_reads));
  auto& loaded =
      BuildGauge().Name("gantry_models_loaded").Help("Models loaded and ready").Register(now).Add({});
  auto& model_mem = BuildGauge()
                        .Name("gantry_model_memory_bytes")
                        .Help("Memory reserved for a model, per device")
                        .Register(now);
  // What only some backends have (a KV cache, speculative decoding), as each names it: one family per name.
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> figure_gauges;
  std::map<std::string, prometheus::Family<prometheus::Counter>*> figure_counters;
  auto export_figure = [&](const backend::BackendFigure& f, const std::string& model) {
    const std::string name = "gantry_" + f.name;
    if (f.counter) {
      auto it = figure_counters.find(name);
      if (it == figure_counters.end())
        it = figure_counters.emplace(name, &BuildCounter().Name(name).Help(f.help).Register(now)).first;
      it->second->Add({{"model", model}}).Increment(std::max(0.0, f.value));
    } else {
      auto it = figure_gauges.find(name);
      if (it == figure_gauges.end())
        it = figure_gauges.emplace(name, &BuildGauge().Name(name).Help(f.help).Register(now)).first;
      it->second->Add({{"model", model}}).Set(f.value);
    }
  };
  int ready = 0;
  for (const auto& m : runtime.models()) {
    if (m.state != runtime::ModelState::kReady) continue;
    ++ready;
    for (const auto& [device, bytes] : m.reserved_bytes) {
      model_mem.Add({{"model", label(m.name)}, {"device", to_valid_utf8(device)}})
          .Set(static_cast<double>(bytes));
    }
    for (const auto& f : m.stats.figures) export_figure(f, label(m.name));
  }
  loaded.Set(ready);
  // For routers (the Gateway API inference extension's endpoint picker, llm-d, KServe): vLLM's names.
  auto& waiting = BuildGauge()
                      .Name("vllm:num_requests_waiting")
                      .Help("Requests admitted and waiting for a place to run, per model")
                      .Register(now);
  auto& running =
      BuildGauge().Name("vllm:num_requests_running").Help("Requests running now, per model").Register(now);
  auto& kv_usage = BuildGauge()
                       .Name("vllm:kv_cache_usage_perc")
                       .Help("KV cache cells held by running requests / cells, per model (1 = full)")
                       .Register(now);
  auto& gpu_cache_usage = BuildGauge()
                              .Name("vllm:gpu_cache_usage_perc")
                              .Help("The same as vllm:kv_cache_usage_perc (its older name)")
                              .Register(now);
  for (const auto& m : runtime.models()) {
    if (m.state != runtime::ModelState::kReady) continue;
    const std::string name = label(m.name);
    const size_t run = std::min(m.requests, m.capacity);
    running.Add({{"model_name", name}}).Set(static_cast<double>(run));
    waiting.Add({{"model_name", name}}).Set(static_cast<double>(m.requests - run));
    for (const auto& f : m.stats.figures) {
      if (f.name != "kv_cache_usage_ratio") continue;
      kv_usage.Add({{"model_name", name}}).Set(f.value);
      gpu_cache_usage.Add({{"model_name", name}}).Set(f.value);
    }
  }
  if (!gauges.tenants.empty()) {
    auto& admitted = BuildCounter()
                         .Name("gantry_tenant_requests_admitted_total")
                         .Help("Requests admitted, per tenant of the keys file")
                         .Register(now);
    auto& refused = BuildCounter()
                        .Name("gantry_tenant_requests_refused_total")
                        .Help(
                            "Requests refused at admission, per tenant and reason (rate: requests or tokens "
                            "per minute; concurrency; model; queue: its share or a full queue; deadline)")
                        .Register(now);
    auto& cancelled =
        BuildCounter()
            .Name("gantry_tenant_deadline_cancelled_total")
            .Help("Requests admitted, then cancelled when they ran past their deadline, per tenant")
            .Register(now);
    auto& tokens = BuildCounter()
                       .Name("gantry_tenant_tokens_total")
                       .Help("Prompt + generated tokens of ended generations, per tenant")
                       .Register(now);
    auto& in_flight = BuildGauge()
                          .Name("gantry_tenant_requests_in_flight")
                          .Help("Requests admitted and not yet ended, per tenant")
                          .Register(now);
    for (const auto& t : gauges.tenants) {
      const std::string n = to_valid_utf8(t.name);
      const runtime::TenantCounters& c = t.counters;
      admitted.Add({{"tenant", n}}).Increment(static_cast<double>(c.admitted));
      refused.Add({{"tenant", n}, {"reason", "rate"}}).Increment(static_cast<double>(c.refused_rate));
      refused.Add({{"tenant", n}, {"reason", "concurrency"}})
          .Increment(static_cast<double>(c.refused_concurrency));
      refused.Add({{"tenant", n}, {"reason", "model"}}).Increment(static_cast<double>(c.refused_model));
      refused.Add({{"tenant", n}, {"reason", "queue"}}).Increment(static_cast<double>(c.refused_queue));
      refused.Add({{"tenant", n}, {"reason", "deadline"}}).Increment(static_cast<double>(c.refused_deadline));
      cancelled.Add({{"tenant", n}}).Increment(static_cast<double>(c.cancelled_deadline));
      tokens.Add({{"tenant", n}}).Increment(static_cast<double>(c.tokens));
      in_flight.Add({{"tenant", n}}).Set(static_cast<double>(c.in_flight));
    }
  }
  auto& cap = BuildGauge().Name("gantry_memory_budget_bytes").Help("Memory budget per device").Register(now);
  auto& used =
      BuildGauge().Name("gantry_memory_used_bytes").Help("Memory budget in use per device").Register(now);
  for (const auto& b : runtime.budgets()) {
    cap.Add({{"device", b.device}}).Set(static_cast<double>(b.capacity));
    used.Add({{"device", b.device}}).Set(static_cast<double>(b.used));
  }
  auto families = registry_->Collect();
  auto state = now.Collect();
  families.insert(families.end(), state.begin(), state.end());
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace gantry::server
