// Metrics: what `gantry serve` exposes at /metrics, in Prometheus' text format (prometheus-cpp).
// Request-path figures are recorded as they happen; state (queue depths, loaded models, memory budgets,
// evictions) is read from the Runtime and the server at scrape time, so it is never stale.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace prometheus {
class Registry;
struct MetricFamily;
}  // namespace prometheus

#include "gantry/runtime/tenant.h"

namespace gantry::runtime {
class Runtime;
}

namespace gantry::server {

// Scrape-time figures the server itself owns.
struct ServerGauges {
  std::map<std::string, size_t> queue_depth;  // model -> requests waiting
  size_t open_connections = 0;
  size_t inflight_requests = 0;
  bool ready = true;
  uint64_t header_reads = 0;  // GGUF headers read for Ollama's model lists (GgufHeaderCache)
  // Each tenant of the keys file, by name (never a key): gantry_tenant_* families.
  struct Tenant {
    std::string name;
    runtime::TenantCounters counters;
  };
  std::vector<Tenant> tenants;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  using Seconds = std::chrono::duration<double>;

  // The model names that may become a `model` label: the models this server serves. Anything else a
  // client names (an unknown model in a URL or a gRPC call, answered 404 or 401) is counted under
  // model="-", so strangers cannot grow the exposition without bound. Call before recording starts
  // (not thread-safe against the recording calls). Until called, every name is kept.
  void set_model_names(std::vector<std::string> names);

  // One answered request. `protocol`: "kserve", "openai", "http" (routing errors).
  void request(std::string_view model, std::string_view protocol, int status, Seconds latency);
  void queue_time(std::string_view model, Seconds waited);
  void time_to_first_token(std::string_view model, Seconds ttft);
  void batch(std::string_view model, size_t requests);
  // `prompt` tokens in all, `prompt_cached` of them from the prompt cache.
  void tokens(std::string_view model, uint64_t prompt, uint64_t generated, Seconds generation_time,
              uint64_t prompt_cached = 0);

  // The exposition text: everything recorded plus the runtime's and server's state now. Each loaded
  // model also has the gauges the Gateway API inference extension's endpoint picker reads from vLLM
  // (docs/metrics.md): vllm:num_requests_waiting, vllm:num_requests_running, vllm:kv_cache_usage_perc
  // and its older name vllm:gpu_cache_usage_perc, labelled model_name.
  std::string render(runtime::Runtime& runtime, const ServerGauges& gauges);
  // What has been recorded so far (request-path families only, no scrape-time state): the dashboard
  // sums it into totals.
  std::vector<prometheus::MetricFamily> collect() const;

 private:
  struct Families;
  // `model` when it may be a label (see set_model_names), else "-"; always valid UTF-8.
  std::string label(std::string_view model) const;

  std::optional<std::set<std::string, std::less<>>> model_names_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> f_;
  std::mutex render_mu_;
  uint64_t evictions_seen_ = 0;
};

}  // namespace gantry::server
