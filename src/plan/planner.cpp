#include "gantry/plan/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "gantry/core/checked_math.h"
#include "gantry/model/memory_rule.h"
#include "plan/compute_graph.h"

namespace gantry::plan {
namespace {

constexpr uint32_t kCtxPad = 256;  // llama-context.cpp: GGML_PAD(n_ctx, 256)

uint32_t pad(uint32_t n, uint32_t to) { return (n + to - 1) / to * to; }

bool is_quantized(KvType t) { return t != KvType::kF32 && t != KvType::kF16 && t != KvType::kBF16; }

struct ContextShape {
  uint32_t n_ctx, n_ctx_seq, n_stream, kv_cells, kv_cells_swa, n_batch, n_ubatch, n_tokens, n_outputs;
};

ContextShape context_shape(const ModelProfile& m, const PlanOptions& o) {
  ContextShape s{};
  const uint32_t n_ctx_req = o.n_ctx == 0 ? m.n_ctx_train : o.n_ctx;
  const uint32_t n_seq = std::max(1u, o.n_parallel);
  s.n_batch = std::min(n_ctx_req, o.n_batch);  // causal attention: batch limited by the context
  s.n_ubatch = std::min(s.n_batch, o.n_ubatch == 0 ? o.n_batch : o.n_ubatch);
  s.n_ctx = pad(n_ctx_req, kCtxPad);
  if (o.kv_unified) {
    s.n_ctx_seq = s.n_ctx;
    s.n_stream = 1;
  } else {
    s.n_ctx_seq = pad(s.n_ctx / n_seq, kCtxPad);
    s.n_ctx = s.n_ctx_seq * n_seq;
    s.n_stream = n_seq;
  }
  s.kv_cells = s.n_ctx_seq;
  const bool any_swa =
      std::any_of(m.layers.begin(), m.layers.end(), [](const LayerProfile& l) { return l.sliding_window; });
  if (any_swa) {
    // In 64 bits: n_swa comes from the file; the minimum with kv_cells (<= kMaxContext) fits 32 bits.
    const uint64_t swa_cells = static_cast<uint64_t>(m.n_swa) * (o.kv_unified ? n_seq : 1) + s.n_ubatch;
    s.kv_cells_swa =
        o.swa_full ? s.kv_cells
                   : std::min(s.kv_cells,
                              pad(static_cast<uint32_t>(std::min<uint64_t>(swa_cells, s.kv_cells)), kCtxPad));
  }
  s.n_tokens = std::min(s.n_ctx, s.n_ubatch);  // worst-case graph reserved by sched_reserve
  s.n_outputs = std::min(s.n_tokens, s.n_batch);
  return s;
}

// Peak of the compute graph for the layers in `layers` (plus the output phase when `with_output`).
// Saturating: hyperparameters come from the file and may be absurd.
uint64_t compute_bytes(const ModelProfile& m, const PlanOptions& o, const ContextShape& s,
                       const std::vector<uint32_t>& layers, bool with_output) {
  // One device with the whole graph: replay ggml's allocator on the graph llama.cpp reserves, where the
  // architecture's graph is modelled (plan/compute_graph.h); else the phase estimate below.
  if (with_output && layers.size() == m.layers.size()) {
    GraphShape g;
    g.n_tokens = s.n_tokens;
    g.n_outputs = s.n_outputs;
    g.n_kv = s.kv_cells;
    g.n_kv_swa = s.kv_cells_swa > 0 ? s.kv_cells_swa : s.kv_cells;
    g.n_stream = s.n_stream;
    g.flash_attn = o.flash_attn;
    g.kv_quantised = is_quantized(o.kv_type);
    if (auto bytes = simulated_compute_bytes(m, g)) return *bytes;
  }
  const uint64_t t = s.n_tokens;
  const uint64_t f32 = 4;
  const bool any_swa = s.kv_cells_swa > 0;
  const uint64_t mask_elem = o.flash_attn ? 2 : 4;
  const uint64_t per_stream_tokens = t / s.n_stream;
  uint64_t peak = 0;
  for (uint32_t il : layers) {
    const LayerProfile& l = m.layers[il];
    const uint64_t cells =
        saturating_mul(l.sliding_window ? s.kv_cells_swa : s.kv_cells, static_cast<uint64_t>(s.n_stream));
    // KQ masks: one per stream over its cells, plus the SWA mask when the model has SWA layers.
    uint64_t masks = saturating_product(s.kv_cells, s.n_stream, per_stream_tokens, mask_elem);
    if (any_swa)
      masks =
          saturating_add(masks, saturating_product(s.kv_cells_swa, s.n_stream, per_stream_tokens, mask_elem));
    const uint64_t kq = o.flash_attn ? 0 : saturating_product(cells / s.n_stream, t, l.n_head, f32);
    const uint64_t k_w = saturating_mul(l.n_head_kv, l.n_embd_head_k);
    const uint64_t v_w = saturating_mul(l.n_head_kv, l.n_embd_head_v);
    const uint64_t q_w = saturating_mul(l.n_head, std::max(l.n_embd_head_k, l.n_embd_head_v));
    const uint64_t widths =
        saturating_add(saturating_add(saturating_mul(4, m.n_embd), q_w), saturating_add(k_w, v_w));
    const uint64_t attn = saturating_add(saturating_add(kq, masks), saturating_product(widths, t, f32));
    const uint64_t ffn =
        saturating_product(saturating_add(saturating_mul(3, l.n_ff), saturating_mul(2, m.n_embd)), t, f32);
    peak = std::max({peak, attn, ffn});
  }
  if (with_output) {
    const uint64_t logits = saturating_mul(m.n_vocab, s.n_outputs);
    const uint64_t embd = saturating_product(2, m.n_embd, t);
    peak = std::max(peak, saturating_mul(saturating_add(logits, embd), f32));
  }
  return peak;
}

// The same for a graph split over devices, one of them on another host (llama.cpp's ggml_backend_sched
// over RPC). Each device that runs layers also holds, for as long as its layers run, the step's inputs it
// uses (copies on the other devices): the KQ mask(s), the token positions and the KV cache's row indices
// (int64 per token for K and V), so its layer peak is the feed-forward peak plus those. The device that
// embeds the tokens (this host's CPU, `first`) also two more hidden states and the token ids. The device
// with the output layer places the logits after up to four hidden states and the inputs: where ggml's
// allocator put the last live tensor of the layers before it; that is an upper bound (fewer stay below the
// logits at some contexts). Measured on bench-100m-q8_0 over two RPC servers: exact on the devices
// without the output layer; the output device exact at ctx 1024 (ubatch 256 and 512) and up to ~9% over
// at others. Not modelled: the pipeline-parallel copies llama.cpp makes (x4) when every layer and the
// output layer are offloaded to several devices.
uint64_t split_compute_bytes(const ModelProfile& m, const PlanOptions& o, const ContextShape& s,
                             const std::vector<uint32_t>& layers, bool with_output, bool first) {
  const uint64_t t = s.n_tokens;
  const uint64_t f32 = 4;
  const uint64_t mask_elem = o.flash_attn ? 2 : 4;
  const uint64_t per_stream_tokens = t / s.n_stream;
  uint64_t masks = saturating_product(s.kv_cells, s.n_stream, per_stream_tokens, mask_elem);
  if (s.kv_cells_swa > 0)
    masks =
        saturating_add(masks, saturating_product(s.kv_cells_swa, s.n_stream, per_stream_tokens, mask_elem));
  const uint64_t small = saturating_add(saturating_mul(t, 4), saturating_mul(t, 16));  // positions, K/V rows
  const uint64_t inputs = saturating_add(masks, small);
  const uint64_t hidden = saturating_product(m.n_embd, t, f32);
  uint64_t peak = 0;
  for (uint32_t il : layers) {
    const LayerProfile& l = m.layers[il];
    const uint64_t attn = saturating_add(compute_bytes(m, o, s, {il}, false), small);
    const uint64_t ffn =
        saturating_product(saturating_add(saturating_mul(3, l.n_ff), saturating_mul(2, m.n_embd)), t, f32);
    peak = std::max({peak, attn, saturating_add(ffn, inputs)});
  }
  if (first && !layers.empty())
    peak = saturating_add(peak, saturating_add(saturating_mul(2, hidden), saturating_mul(t, 8)));
  if (with_output) {
    const uint64_t logits = saturating_product(m.n_vocab, s.n_outputs, f32);
    peak = std::max(peak, saturating_add(saturating_add(logits, saturating_mul(4, hidden)),
                                         saturating_add(inputs, saturating_mul(t, 4))));
  }
  return peak;
}

Result<uint64_t> layer_kv_bytes(const ModelProfile& m, const PlanOptions& o, const ContextShape& s,
                                uint32_t il, uint32_t n_embd_v_max) {
  const LayerProfile& l = m.layers[il];
  if (l.n_head_kv == 0) return uint64_t{0};
  const uint64_t cells = static_cast<uint64_t>(l.sliding_window ? s.kv_cells_swa : s.kv_cells) * s.n_stream;
  // llama.cpp quantises the cache per head: a block must divide the head width, not just the row.
  GANTRY_ASSIGN_OR_RETURN(uint64_t k_head, kv_row_bytes(o.kv_type, l.n_embd_head_k));
  const uint64_t k_row = saturating_mul(l.n_head_kv, k_head);
  // Without flash attention V is stored transposed, every layer padded to the widest V.
  uint64_t v_row = 0;
  if (o.flash_attn) {
    GANTRY_ASSIGN_OR_RETURN(uint64_t v_head, kv_row_bytes(o.kv_type, l.n_embd_head_v));
    v_row = saturating_mul(l.n_head_kv, v_head);
  } else {
    GANTRY_ASSIGN_OR_RETURN(v_row, kv_row_bytes(o.kv_type, n_embd_v_max));
  }
  return saturating_mul(saturating_add(k_row, v_row), cells);
}

Status validate(const ModelProfile& m, const PlanOptions& o, const std::vector<Device>& devices) {
  if (m.layers.empty()) return InvalidArgument(fmt::format("model {} has no layers to plan", m.name));
  if (m.n_embd == 0 || m.n_vocab == 0) {
    return InvalidArgument(fmt::format("model {} lacks n_embd or n_vocab; cannot plan it", m.name));
  }
  if (o.n_ctx == 0 && m.n_ctx_train == 0) {
    return InvalidArgument(fmt::format("model {} does not state its training context; pass --ctx", m.name));
  }
  if (o.n_ctx > kMaxContext) {
    return InvalidArgument(
        fmt::format("--ctx {} is more than the {} tokens Gantry accepts (llama.cpp counts cells in 32 bits)",
                    o.n_ctx, kMaxContext));
  }
  if (o.n_ctx == 0 && m.n_ctx_train > kMaxContext) {
    return InvalidArgument(fmt::format(
        "model {} states a training context of {} tokens, more than the {} the planner accepts; pass --ctx",
        m.name, m.n_ctx_train, kMaxContext));
  }
  if (o.n_parallel == 0 || o.n_parallel > 256) return InvalidArgument("--parallel must be between 1 and 256");
  if (o.n_batch == 0) return InvalidArgument("--batch must be at least 1");
  if (is_quantized(o.kv_type) && !o.flash_attn) {
    return InvalidArgument(
        fmt::format("a quantised V cache ({}) needs flash attention; use --flash-attn on or "
                    "--kv-type f16",
                    kv_type_name(o.kv_type)));
  }
  if (std::none_of(devices.begin(), devices.end(), [](const Device& d) { return !is_gpu(d); })) {
    return InvalidArgument("the device list has no CPU device");
  }
  return Status::Ok();
}

Result<Plan> plan_without_suggestion(const ModelProfile& m, const PlanOptions& o,
                                     const std::vector<Device>& devices);

// What would make a plan that does not fit fit. Each candidate is planned without a suggestion of its own,
// so the search is linear: 2 KV types + log2(n_ctx / 512) contexts + 7 quantisations.
void add_suggestion(const ModelProfile& m, const std::vector<Device>& devices, Plan& plan) {
  if (plan.fits) return;
  std::vector<std::string> ideas;
  // Every candidate is counted with the plans it made itself (none, as long as the search stays linear).
  auto count = [&](const Result<Plan>& p) {
    plan.candidates_planned += 1 + (p.ok() ? p->candidates_planned : 0);
  };
  auto fits_with = [&](PlanOptions o) {
    auto p = plan_without_suggestion(m, o, devices);
    count(p);
    return p.ok() && p->fits;
  };
  for (KvType kv : {KvType::kQ8_0, KvType::kQ4_0}) {
    if (plan.options.kv_type != KvType::kF16 && plan.options.kv_type != KvType::kF32) break;
    PlanOptions o = plan.options;
    o.kv_type = kv;
    o.flash_attn = true;
    if (fits_with(o)) {
      ideas.push_back(fmt::format("--kv-type {} --flash-attn on", kv_type_name(kv)));
      break;
    }
  }
  for (uint32_t ctx = plan.n_ctx / 2; ctx >= 512; ctx /= 2) {
    PlanOptions o = plan.options;
    o.n_ctx = ctx;
    if (fits_with(o)) {
      ideas.push_back(fmt::format("--ctx {}", ctx));
      break;
    }
  }
  // Smaller quantisations: scale the weights by bits per weight (llama.cpp's nominal figures).
  const uint64_t weights = m.total_weight_bytes();
  if (m.n_params > 0 && weights > 0) {
    const double bpw_now = 8.0 * static_cast<double>(weights) / static_cast<double>(m.n_params);
    const std::pair<const char*, double> quants[] = {{"Q8_0", 8.5},    {"Q6_K", 6.56}, {"Q5_K_M", 5.7},
                                                     {"Q4_K_M", 4.89}, {"Q4_0", 4.5},  {"Q3_K_M", 3.91},
                                                     {"Q2_K", 3.0}};
    for (const auto& [qname, bpw] : quants) {
      if (bpw >= bpw_now - 0.25) continue;
      ModelProfile q = m;
      const double f = bpw / bpw_now;
      for (auto& l : q.layers)
        l.weight_bytes = static_cast<uint64_t>(static_cast<double>(l.weight_bytes) * f);
      q.input_weight_bytes = static_cast<uint64_t>(static_cast<double>(q.input_weight_bytes) * f);
      q.output_weight_bytes = static_cast<uint64_t>(static_cast<double>(q.output_weight_bytes) * f);
      auto p = plan_without_suggestion(q, plan.options, devices);
      count(p);
      if (p.ok() && p->fits) {
        ideas.push_back(fmt::format("a {} quantisation (about {:.2f} GiB of weights)", qname,
                                    static_cast<double>(q.total_weight_bytes()) / (1ull << 30)));
        break;
      }
    }
  }
  plan.suggestion = ideas.empty()
                        ? "does not fit even with a smaller KV type, context or quantisation; add memory"
                        : "would fit with " + fmt::format("{}", fmt::join(ideas, ", or "));
}

}  // namespace

uint64_t ModelProfile::total_weight_bytes() const {
  uint64_t total = saturating_add(input_weight_bytes, output_weight_bytes);
  for (const auto& l : layers) total = saturating_add(total, l.weight_bytes);
  return total;
}

uint64_t MemoryBytes::total() const {
  return saturating_add(saturating_add(weights, kv_cache), saturating_add(compute, output));
}

MemoryBytes& MemoryBytes::operator+=(const MemoryBytes& o) {
  weights = saturating_add(weights, o.weights);
  kv_cache = saturating_add(kv_cache, o.kv_cache);
  compute = saturating_add(compute, o.compute);
  output = saturating_add(output, o.output);
  return *this;
}

std::vector<int> assign_layers(uint32_t n_layers, int n_gpu_layers, const std::vector<double>& weights) {
  std::vector<int> out(n_layers + 1, -1);
  if (weights.empty()) return out;
  const int n_all = static_cast<int>(n_layers);
  const int n_gpu = n_gpu_layers < 0 ? n_all + 1 : n_gpu_layers;
  std::vector<double> splits(weights.size());
  double sum = 0;
  for (size_t i = 0; i < weights.size(); ++i) splits[i] = (sum += weights[i]);
  if (sum <= 0) return out;
  for (double& s : splits) s /= sum;
  const int first = std::max(n_all + 1 - n_gpu, 0);
  const int act = std::min(n_gpu, n_all + 1);
  for (int il = 0; il <= n_all; ++il) {
    if (il < first || il - first >= act) continue;
    const float frac = static_cast<float>(il - first) / static_cast<float>(act);
    // llama.cpp compares float split points; keep that precision so ties land on the same GPU.
    std::vector<float> fsplits(splits.begin(), splits.end());
    const auto gpu = std::upper_bound(fsplits.begin(), fsplits.end(), frac) - fsplits.begin();
    out[il] = static_cast<int>(std::min<size_t>(gpu, weights.size() - 1));
  }
  return out;
}

int cpu_share_gpu_layers(uint32_t n_layers, double cpu_weight, const std::vector<double>& weights) {
  double sum = std::max(cpu_weight, 0.0);
  for (double w : weights) sum += std::max(w, 0.0);
  if (sum <= 0 || n_layers == 0) return static_cast<int>(n_layers) + 1;
  // As assign_layers compares: float positions against a float split point.
  const float cpu_split = static_cast<float>(std::max(cpu_weight, 0.0) / sum);
  uint32_t on_cpu = 0;
  for (uint32_t il = 0; il < n_layers; ++il) {
    if (static_cast<float>(il) / static_cast<float>(n_layers) < cpu_split) ++on_cpu;
  }
  return static_cast<int>(n_layers + 1 - on_cpu);
}

uint64_t device_total_bytes(const Device& d) { return d.memory_total_bytes.value_or(0); }

uint64_t device_free_bytes(const Device& d) { return d.memory_free_bytes.value_or(device_total_bytes(d)); }

bool is_gpu(const Device& d) { return d.kind != hw::DeviceKind::kCpu; }

bool cpu_should_take_share(const std::vector<Device>& devices) {
  return std::any_of(devices.begin(), devices.end(), [](const Device& d) { return d.remote.has_value(); }) &&
         std::none_of(devices.begin(), devices.end(), [](const Device& d) { return is_gpu(d) && !d.remote; });
}

Device memory_target(std::string_view id, std::string name, bool gpu, uint64_t free_bytes,
                     uint64_t total_bytes) {
  Device d;
  const auto colon = id.find(':');
  d.kind = gpu ? hw::DeviceKind::kGpu : hw::DeviceKind::kCpu;
  d.family = gpu ? std::string(id.substr(0, colon)) : std::string(hw::kFamilyCpu);
  d.id = gpu ? std::string(id) : "cpu:0";
  d.name = std::move(name);
  d.memory_free_bytes = free_bytes;
  d.memory_total_bytes = total_bytes;
  return d;
}

Result<Plan> plan_gguf(const ModelProfile& m, const PlanOptions& o, const std::vector<Device>& devices) {
  GANTRY_ASSIGN_OR_RETURN(Plan plan, plan_without_suggestion(m, o, devices));
  add_suggestion(m, devices, plan);
  return plan;
}

namespace {
Result<Plan> plan_without_suggestion(const ModelProfile& m, const PlanOptions& o,
                                     const std::vector<Device>& devices) {
  GANTRY_RETURN_IF_ERROR(validate(m, o, devices));
  const ContextShape s = context_shape(m, o);

  Plan plan;
  plan.model = m.name;
  plan.options = o;
  plan.n_ctx = s.n_ctx;
  plan.n_ctx_seq = s.n_ctx_seq;
  plan.n_stream = s.n_stream;
  plan.kv_cells = s.kv_cells;
  plan.kv_cells_swa = s.kv_cells_swa;
  plan.n_batch = s.n_batch;
  plan.n_ubatch = s.n_ubatch;

  // GPUs take layers in the given order; the first CPU device holds everything not offloaded.
  std::vector<size_t> gpu_idx;
  size_t cpu_idx = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (is_gpu(devices[i])) gpu_idx.push_back(i);
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!is_gpu(devices[i])) {
      cpu_idx = i;
      break;
    }
  }
  std::vector<double> weights;
  if (!o.tensor_split.empty()) {
    if (o.tensor_split.size() != gpu_idx.size()) {
      return InvalidArgument(fmt::format("tensor split has {} entries but there are {} GPUs",
                                         o.tensor_split.size(), gpu_idx.size()));
    }
    weights.assign(o.tensor_split.begin(), o.tensor_split.end());
  } else {
    for (size_t g : gpu_idx) weights.push_back(static_cast<double>(device_free_bytes(devices[g])));
  }
  int n_gpu_layers = o.n_gpu_layers;
  if (o.cpu_takes_share && n_gpu_layers < 0 && !gpu_idx.empty()) {
    n_gpu_layers =
        cpu_share_gpu_layers(m.n_layer(), static_cast<double>(device_free_bytes(devices[cpu_idx])), weights);
  }
  const std::vector<int> where = assign_layers(m.n_layer(), n_gpu_layers, weights);

  std::vector<DevicePlan> plans(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) plans[i].device = devices[i];
  auto device_of = [&](uint32_t il) { return where[il] < 0 ? cpu_idx : gpu_idx[where[il]]; };

  uint32_t n_embd_v_max = 0;
  for (const auto& l : m.layers) n_embd_v_max = std::max(n_embd_v_max, l.n_head_kv * l.n_embd_head_v);

  for (uint32_t il = 0; il < m.n_layer(); ++il) {
    DevicePlan& d = plans[device_of(il)];
    d.layers.push_back(il);
    d.predicted.weights = saturating_add(d.predicted.weights, m.layers[il].weight_bytes);
    GANTRY_ASSIGN_OR_RETURN(uint64_t kv, layer_kv_bytes(m, o, s, il, n_embd_v_max));
    d.predicted.kv_cache = saturating_add(d.predicted.kv_cache, kv);
  }
  const size_t out_dev = device_of(m.n_layer());
  plans[out_dev].has_output_layer = true;
  plans[out_dev].predicted.weights = saturating_add(plans[out_dev].predicted.weights, m.output_weight_bytes);
  plans[cpu_idx].predicted.weights = saturating_add(plans[cpu_idx].predicted.weights, m.input_weight_bytes);
  if (o.cpu_repack) {
    uint64_t repack = out_dev == cpu_idx ? m.output_repack_bytes : 0;
    for (uint32_t il : plans[cpu_idx].layers) repack = saturating_add(repack, m.layers[il].repack_bytes);
    const bool all_on_cpu = plans[cpu_idx].layers.size() == m.n_layer() && out_dev == cpu_idx;
    if (all_on_cpu && m.mapped_span_bytes > 0) plans[cpu_idx].predicted.weights = m.mapped_span_bytes;
    plans[cpu_idx].predicted.weights = saturating_add(plans[cpu_idx].predicted.weights, repack);
  }
  // Logits (and embeddings) for one output per sequence live in host memory.
  plans[cpu_idx].predicted.output = saturating_product(
      static_cast<uint64_t>(m.n_vocab) + (o.embeddings ? m.n_embd : 0), std::max(1u, o.n_parallel), 4);

  // A graph split over devices of which one is on another host: split_compute_bytes.
  int graph_devices = 0;
  bool remote_runs = false;
  for (const auto& d : plans) {
    if (d.layers.empty() && !d.has_output_layer) continue;
    ++graph_devices;
    remote_runs = remote_runs || d.device.kind == hw::DeviceKind::kRemote;
  }
  const bool split_remote = graph_devices > 1 && remote_runs;
  for (size_t i = 0; i < plans.size(); ++i) {
    DevicePlan& d = plans[i];
    const bool runs_graph = !d.layers.empty() || d.has_output_layer;
    if (runs_graph && split_remote) {
      d.predicted.compute = split_compute_bytes(m, o, s, d.layers, d.has_output_layer, i == cpu_idx);
    } else if (runs_graph) {
      d.predicted.compute = compute_bytes(m, o, s, d.layers, d.has_output_layer);
    } else if (i == cpu_idx) {
      d.predicted.compute = static_cast<uint64_t>(m.n_embd) * s.n_tokens * 4;  // input embeddings
    }
    d.fits = d.predicted.total() <= device_free_bytes(d.device);
    plan.totals += d.predicted;
  }
  plan.fits = std::all_of(plans.begin(), plans.end(), [](const DevicePlan& d) { return d.fits; });
  plan.devices = std::move(plans);
  if (s.n_ctx_seq > m.n_ctx_train && m.n_ctx_train > 0) {
    plan.notes.push_back(
        fmt::format("context per sequence {} exceeds the training context {}", s.n_ctx_seq, m.n_ctx_train));
  }
  const bool any_local_gpu = std::any_of(
      gpu_idx.begin(), gpu_idx.end(), [&](size_t g) { return devices[g].kind != hw::DeviceKind::kRemote; });
  if (any_local_gpu) {
    plan.notes.push_back(
        "GPU compute buffers are estimated from the CPU graph; measure with the backend to confirm");
  }
  if (n_gpu_layers != o.n_gpu_layers) {
    plan.notes.push_back(
        fmt::format("the CPU takes {} of {} layers in proportion to its free memory; the remote devices take "
                    "the other {} "
                    "and the output layer (n_gpu_layers {})",
                    m.n_layer() + 1 - static_cast<uint32_t>(n_gpu_layers), m.n_layer(),
                    static_cast<uint32_t>(n_gpu_layers) - 1, n_gpu_layers));
  }
  if (plan.totals.total() == kSaturated) {
    return InvalidArgument(fmt::format(
        "model {} would need more than 2^64 bytes at a context of {} tokens: its hyperparameters or the "
        "options are out of range; lower --ctx/--batch/--parallel or check the file",
        m.name, s.n_ctx));
  }
  return plan;
}
}  // namespace

Result<uint32_t> max_context(const ModelProfile& m, PlanOptions o, const std::vector<Device>& devices,
                             uint32_t limit) {
  limit = std::min(limit, kMaxContext) / kCtxPad;  // in units of 256 tokens
  auto fits = [&](uint32_t units) -> Result<bool> {
    o.n_ctx = units * kCtxPad;
    GANTRY_ASSIGN_OR_RETURN(Plan p, plan_without_suggestion(m, o, devices));
    return p.fits;
  };
  if (limit == 0) return uint32_t{0};
  GANTRY_ASSIGN_OR_RETURN(bool any, fits(1));
  if (!any) return uint32_t{0};
  uint32_t lo = 1, hi = limit;  // fits(lo); the answer is in [lo, hi]
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo + 1) / 2;
    GANTRY_ASSIGN_OR_RETURN(bool ok, fits(mid));
    if (ok) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo * kCtxPad;
}

Plan estimate_generic(std::string_view model_name, uint64_t file_bytes, const std::vector<Device>& devices) {
  Plan plan;
  plan.estimate = true;
  plan.model = std::string(model_name);
  // ONNX Runtime keeps initialisers once (weights ~ file size); activations and the arena: the one rule of
  // thumb (gantry/model/memory_rule.h).
  DevicePlan d;
  for (const auto& dev : devices) {
    if (!is_gpu(dev)) {
      d.device = dev;
      break;
    }
  }
  d.predicted.weights = file_bytes;
  d.predicted.compute = model::rule_of_thumb_activation_bytes(file_bytes);
  d.fits = d.predicted.total() <= device_free_bytes(d.device);
  plan.totals = d.predicted;
  plan.fits = d.fits;
  plan.devices.push_back(std::move(d));
  plan.notes.push_back("estimate: " + std::string(model::kRuleOfThumbBasis) +
                       " (weights = file size); not exact");
  if (!plan.fits) plan.suggestion = "free memory or use a smaller (quantised) model";
  return plan;
}

}  // namespace gantry::plan
