#include "gantry/backend/llama/settings.h"

#include <fmt/format.h>
#include <ggml-backend.h>

#include <algorithm>

#include "backend/llama/runtime_init.h"
#include "gantry/backend/llama/remote_devices.h"
#include "gantry/hw/registry.h"
#include "gantry/plan/gguf_profile.h"

namespace gantry::llama {
namespace {

constexpr uint32_t kDefaultCtx = 2048;
constexpr uint32_t kDefaultBatch = 512;

std::string gib(uint64_t b) { return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1ull << 30)); }

// The planner's options for these settings (what llama.cpp will be asked for).
plan::PlanOptions plan_options(const LlamaSettings& s, int n_gpu_layers) {
  plan::PlanOptions o;
  o.n_ctx = s.context.n_ctx;
  o.n_parallel = s.context.n_seq_max;
  o.n_batch = s.context.n_batch;
  o.n_ubatch = s.context.n_ubatch;
  o.kv_type = s.context.type_k;
  o.flash_attn = s.context.flash_attn != FlashAttn::kOff;
  o.kv_unified = s.context.kv_unified;
  o.n_gpu_layers = n_gpu_layers;
  o.tensor_split = s.load.placement.tensor_split;
  return o;
}

// n_gpu_layers and the tensor split (layers per offload device, the output layer counted with the device
// holding it) that make llama.cpp place layers exactly as `p` did: with these counts as split points,
// llama.cpp's upper_bound over (il - first) / n_gpu_layers lands every layer where the plan put it.
std::pair<int, std::vector<float>> split_of(const plan::Plan& p) {
  int n_gpu_layers = 0;
  std::vector<float> split;
  for (const auto& d : p.devices) {
    if (!plan::is_gpu(d.device)) continue;
    const int n = static_cast<int>(d.layers.size()) + (d.has_output_layer ? 1 : 0);
    n_gpu_layers += n;
    split.push_back(static_cast<float>(n));
  }
  return {n_gpu_layers, split};
}

bool any_local_gpu_in(const plan::Plan& p) {
  return std::any_of(p.devices.begin(), p.devices.end(), [](const plan::DevicePlan& d) {
    return plan::is_gpu(d.device) && d.device.kind != hw::DeviceKind::kRemote;
  });
}

bool any_local_gpu(const std::vector<plan::Device>& devices) {
  return std::any_of(devices.begin(), devices.end(), [](const plan::Device& d) {
    return plan::is_gpu(d) && d.kind != hw::DeviceKind::kRemote;
  });
}

// Provider cpu with RPC servers: the planner splits the layers over this host's CPU and the servers'
// devices in proportion to their free memory.
Status plan_rpc_split(LlamaSettings& s, const plan::ModelProfile& model,
                      const std::vector<plan::Device>& devices) {
  plan::PlanOptions o = plan_options(s, -1);
  o.cpu_takes_share = !any_local_gpu(devices);
  GANTRY_ASSIGN_OR_RETURN(plan::Plan p, plan::plan_gguf(model, o, devices));
  auto [n_gpu_layers, split] = split_of(p);
  auto& lp = s.load.placement;
  lp.n_gpu_layers = n_gpu_layers;
  if (lp.tensor_split.empty()) lp.tensor_split = split;
  std::vector<std::string> parts;
  uint64_t need = 0, free = 0;
  for (const auto& d : p.devices) {
    parts.push_back(
        fmt::format("{} {}", hw::memory_device_id(d.device), d.layers.size() + (d.has_output_layer ? 1 : 0)));
    need += d.predicted.total();
    free += plan::device_free_bytes(d.device);
  }
  s.reason = fmt::format(
      "RPC: the planner splits {} layers and the output layer by free memory ({}){}", model.n_layer(),
      fmt::join(parts, ", "),
      p.fits ? fmt::format(" ({} of {} free)", gib(need), gib(free)) : "; it does not fit: " + p.suggestion);
  return Status::Ok();
}

// The most layers (0..n_layer+1, the last being the output layer) whose plan fits every GPU.
Result<int> layers_that_fit(const LlamaSettings& s, const plan::ModelProfile& model,
                            const std::vector<plan::Device>& devices, std::string* reason) {
  std::vector<plan::Device> gpus;
  for (const auto& d : devices) {
    if (plan::is_gpu(d)) gpus.push_back(d);
  }
  if (gpus.empty()) {
    return Unavailable("provider cuda: no CUDA device with known free memory to plan the offload on");
  }
  uint64_t free = 0;
  for (const auto& g : gpus) free += plan::device_free_bytes(g);
  const int n_all = static_cast<int>(model.n_layer()) + 1;
  for (int n = n_all; n >= 0; --n) {
    GANTRY_ASSIGN_OR_RETURN(plan::Plan p, plan::plan_gguf(model, plan_options(s, n), devices));
    // It fits when every GPU's share fits and the GPUs really hold n layers (a split by free memory
    // gives a GPU without free memory none).
    bool fits = true;
    uint64_t need = 0;
    int placed = 0;
    for (const auto& d : p.devices) {
      if (!plan::is_gpu(d.device)) continue;
      fits = fits && d.fits;
      need += d.predicted.total();
      placed += static_cast<int>(d.layers.size()) + (d.has_output_layer ? 1 : 0);
    }
    if (!fits || placed != n) continue;
    *reason = n == n_all ? fmt::format(
                               "provider cuda: the planner fits all {} layers and the output layer "
                               "({} of {} free on {} GPU(s))",
                               model.n_layer(), gib(need), gib(free), gpus.size())
                         : fmt::format(
                               "provider cuda: the planner fits {} of {} layers ({} of {} free on {} "
                               "GPU(s)); the rest run on the CPU",
                               n, n_all, gib(need), gib(free), gpus.size());
    return n;
  }
  return Internal("the planner found no layer count that fits (not even 0)");
}

// Provider cuda: the draft model's layers all go to the GPUs when they fit in what the target's plan
// leaves free there (the draft's KV cache is the target's size), else the draft runs on the CPU.
Status place_draft(LlamaSettings& s, const plan::ModelProfile& target, std::vector<plan::Device> devices) {
  auto draft = plan::profile_from_gguf(std::filesystem::path(s.draft_path));
  if (!draft.ok()) return draft.status().with_context("reading the draft model (draft_model)");
  auto& dl = s.draft_load.placement;
  dl.n_gpu_layers = 0;
  if (std::none_of(devices.begin(), devices.end(), [](const plan::Device& d) { return plan::is_gpu(d); })) {
    dl.n_gpu_layers = -1;  // no free memory known: as the target, every layer on the GPUs
    return Status::Ok();
  }
  GANTRY_ASSIGN_OR_RETURN(plan::Plan tp,
                          plan::plan_gguf(target, plan_options(s, s.load.placement.n_gpu_layers), devices));
  for (auto& d : devices) {
    for (const auto& used : tp.devices) {
      if (used.device.id != d.id || !plan::is_gpu(d)) continue;
      const uint64_t free = plan::device_free_bytes(d);
      d.memory_free_bytes = free > used.predicted.total() ? free - used.predicted.total() : 0;
    }
  }
  GANTRY_ASSIGN_OR_RETURN(plan::Plan dp, plan::plan_gguf(*draft, plan_options(s, -1), devices));
  if (dp.fits) {
    dl.n_gpu_layers = -1;
    s.reason += "; the draft model fits on the GPUs beside it";
  } else {
    s.reason += "; the draft model runs on the CPU (it does not fit on the GPUs beside the target)";
  }
  return Status::Ok();
}

}  // namespace

Result<LlamaSettings> llama_settings(const backend::Placement& p, const plan::ModelProfile& model,
                                     const std::vector<plan::Device>& devices) {
  if (p.provider != "cpu" && p.provider != "cuda") {
    return InvalidArgument("llama.cpp runs on provider cpu or cuda, not '" + p.provider + "'");
  }
  if (p.intra_op_threads < 0) return InvalidArgument("intra_op_threads must be >= 0 (0 = every core)");
  const model::LlamaOptions& o = p.llama;
  GANTRY_RETURN_IF_ERROR(model::validate_llama_options(o));
  LlamaSettings s;
  auto& c = s.context;
  c.n_threads = p.intra_op_threads;

  const uint32_t train = model.n_ctx_train;
  if (o.n_ctx && *o.n_ctx > 0) {
    c.n_ctx = static_cast<uint32_t>(*o.n_ctx);
  } else if (o.n_ctx) {  // 0: the training context
    c.n_ctx = train > 0 ? train : kDefaultCtx;
  } else {
    c.n_ctx = train > 0 ? std::min(kDefaultCtx, train) : kDefaultCtx;
  }
  c.n_seq_max = static_cast<uint32_t>(o.parallel.value_or(1));
  c.n_batch = o.n_batch ? static_cast<uint32_t>(*o.n_batch) : std::max(kDefaultBatch, c.n_seq_max);
  c.n_ubatch = std::min(c.n_batch, o.n_ubatch ? static_cast<uint32_t>(*o.n_ubatch) : c.n_batch);
  if (c.n_ctx < c.n_seq_max) {
    return InvalidArgument(
        fmt::format("a context of {} cells cannot hold {} parallel sequences", c.n_ctx, c.n_seq_max));
  }
  if (o.kv_type) c.type_k = c.type_v = *o.kv_type;
  c.kv_unified = o.kv_unified.value_or(kKvUnifiedDefault);
  s.engine.cache_prompt = o.cache_prompt.value_or(true);
  if (o.cache_ram)
    s.cache_ram_bytes =
        *o.cache_ram < 0 ? EngineOptions::kUnlimited : static_cast<uint64_t>(*o.cache_ram) << 20;
  s.engine.prefill_chunk = static_cast<uint32_t>(o.prefill_chunk.value_or(0));
  if (o.flash_attn) c.flash_attn = *o.flash_attn ? FlashAttn::kOn : FlashAttn::kOff;
  // mmap off reads the weights into memory: a file replaced in place while mapped would otherwise end the
  // process with SIGBUS on the next access.
  s.load.use_mmap = o.mmap.value_or(true);
  s.max_tokens = o.max_tokens.value_or(128);
  s.chat_template_file = o.chat_template_file.value_or("");
  s.reasoning_format =
      o.reasoning_format == "none" ? backend::ReasoningFormat::kNone : backend::ReasoningFormat::kAuto;
  s.thinking = o.reasoning != "off";
  if (o.pooling) {
    const std::string& p = *o.pooling;
    s.pooling = p == "none"   ? Pooling::kNone
                : p == "cls"  ? Pooling::kCls
                : p == "last" ? Pooling::kLast
                : p == "rank" ? Pooling::kRank
                              : Pooling::kMean;
  }

  auto& sp = s.speculative;
  sp.draft_max = o.draft_max.value_or(sp.draft_max);
  sp.draft_min = o.draft_min.value_or(sp.draft_min);
  sp.draft_p_min = o.draft_p_min.value_or(sp.draft_p_min);
  sp.ngram_size_n = o.spec_ngram_size_n.value_or(sp.ngram_size_n);
  sp.ngram_size_m = o.spec_ngram_size_m.value_or(sp.ngram_size_m);
  if (o.spec_type) {
    for (size_t start = 0; start <= o.spec_type->size();) {
      const size_t end = std::min(o.spec_type->find(',', start), o.spec_type->size());
      sp.types.push_back(o.spec_type->substr(start, end - start));
      start = end + 1;
    }
  }
  if (sp.draft_max > 0) s.draft_path = o.draft_model.value_or("");  // draft_max 0: no draft model
  s.draft_load.use_mmap = s.load.use_mmap;
  s.draft_load.placement.main_gpu = p.primary_device();

  auto& lp = s.load.placement;
  lp.main_gpu = p.primary_device();
  lp.tensor_split = o.tensor_split;
  // The manifest's strategy: tensor-parallel splits every layer's rows over the devices, pipeline gives
  // each device whole layers (llama.cpp's default), pool keeps the model on the one device chosen for it;
  // a split over listed devices leaves the others out.
  using SplitMode = LlamaPlacement::SplitMode;
  using model::Strategy;
  const bool split = p.strategy == Strategy::kTensorParallel || p.strategy == Strategy::kPipeline;
  if (p.strategy == Strategy::kTensorParallel) lp.split_mode = SplitMode::kRow;
  if (p.strategy == Strategy::kPipeline) lp.split_mode = SplitMode::kLayer;
  if (p.strategy == Strategy::kPool) lp.split_mode = SplitMode::kNone;
  if (split && p.device_ids.size() > 1 && lp.tensor_split.empty()) {
    const int last = *std::max_element(p.device_ids.begin(), p.device_ids.end());
    lp.tensor_split.assign(static_cast<size_t>(last) + 1, 0.0f);
    for (int id : p.device_ids) lp.tensor_split[static_cast<size_t>(id)] = 1.0f;
  }
  lp.rpc_servers = o.rpc;
  if (p.provider == "cpu" && !o.rpc.empty()) {
    if (o.n_gpu_layers) {
      lp.n_gpu_layers = *o.n_gpu_layers;
      s.reason = fmt::format("RPC: n_gpu_layers={} as given", *o.n_gpu_layers);
    } else {
      GANTRY_RETURN_IF_ERROR(plan_rpc_split(s, model, devices));
    }
  } else if (p.provider == "cpu") {
    if (o.n_gpu_layers && *o.n_gpu_layers != 0) {
      return InvalidArgument(
          fmt::format("llama.cpp option n_gpu_layers={} contradicts provider cpu "
                      "(use provider cuda to offload layers)",
                      *o.n_gpu_layers));
    }
    lp.n_gpu_layers = 0;
    s.reason = "provider cpu: every layer on the CPU";
  } else if (o.n_gpu_layers) {
    lp.n_gpu_layers = *o.n_gpu_layers;
    s.reason = *o.n_gpu_layers < 0 ? "provider cuda: n_gpu_layers=-1 offloads every layer"
                                   : fmt::format("provider cuda: n_gpu_layers={} as given", *o.n_gpu_layers);
  } else {
    GANTRY_ASSIGN_OR_RETURN(lp.n_gpu_layers, layers_that_fit(s, model, devices, &s.reason));
  }
  // Every layer on this CPU: a step's time grows with its tokens, so prompts go one a step (options.h).
  s.engine.one_prompt_per_step = lp.n_gpu_layers == 0 && lp.rpc_servers.empty();
  sp.draft_context = s.context;
  sp.draft_context.threadpool = false;  // the engine lends the draft the target's threads
  return s;
}

Result<std::vector<plan::Device>> llama_plan_devices(const std::vector<std::string>& rpc_servers) {
  std::vector<plan::Device> out = llama_plan_devices();
  if (rpc_servers.empty()) return out;
  std::vector<hw::RpcEndpoint> servers;
  for (const auto& text : rpc_servers) {
    GANTRY_ASSIGN_OR_RETURN(hw::RpcEndpoint e, hw::parse_rpc_endpoint(text));
    servers.push_back(std::move(e));
  }
  GANTRY_ASSIGN_OR_RETURN(RemoteDevices remote, resolve_remote_devices(servers));
  std::vector<plan::Device> remote_devices;
  for (size_t i = 0; i < remote.devices.size(); ++i) {
    size_t free = 0, total = 0;
    ggml_backend_dev_memory(remote.devices[i], &free, &total);
    const std::string endpoint = remote.links[remote.server_of[i]]->endpoint().text();
    plan::Device d = plan::memory_target(remote.ids[i],
                                         fmt::format("device {} of {}", remote.index_on_server[i], endpoint),
                                         true, free, total);
    d.kind = hw::DeviceKind::kRemote;
    d.family = std::string(hw::kFamilyRpc);
    hw::RemoteLink link;
    link.endpoint = endpoint;
    link.device_index = remote.index_on_server[i];
    d.remote = std::move(link);
    remote_devices.push_back(std::move(d));
  }
  GANTRY_RETURN_IF_ERROR(remote.check());
  // As llama-server orders them: the remote devices first, then the local GPUs.
  out.insert(out.begin() + 1, remote_devices.begin(), remote_devices.end());
  return out;
}

std::vector<plan::Device> llama_plan_devices() {
  ensure_llama_runtime();
  std::vector<plan::Device> out;
  out.push_back(plan::memory_target("cpu", "CPU", false, 0, 0));
  int cuda_index = 0;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t dev = ggml_backend_dev_get(i);
    const std::string name = ggml_backend_dev_name(dev);
    size_t free = 0, total = 0;
    ggml_backend_dev_memory(dev, &free, &total);
    if (ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU) {
      out[0] = plan::memory_target("cpu", ggml_backend_dev_description(dev), false, free, total);
    } else if (ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_GPU && name.rfind("CUDA", 0) == 0) {
      out.push_back(plan::memory_target(hw::memory_device_id(hw::kFamilyCuda, cuda_index++),
                                        ggml_backend_dev_description(dev), true, free, total));
    }
  }
  return out;
}

Result<LlamaSettings> llama_settings(const backend::Placement& placement, const std::string& gguf_path) {
  GANTRY_ASSIGN_OR_RETURN(plan::ModelProfile profile,
                          plan::profile_from_gguf(std::filesystem::path(gguf_path)));
  // The device list matters only when the planner chooses an offload (the target's or the draft's), over
  // local GPUs or RPC servers.
  const bool cuda = placement.provider == "cuda";
  const bool rpc = !placement.llama.rpc.empty();
  const bool draft_on_gpu = cuda && placement.llama.draft_model;
  const bool plans = ((cuda || rpc) && !placement.llama.n_gpu_layers) || draft_on_gpu;
  std::vector<plan::Device> devices;
  if (plans) {
    GANTRY_ASSIGN_OR_RETURN(devices, llama_plan_devices(placement.llama.rpc));
  }
  GANTRY_ASSIGN_OR_RETURN(LlamaSettings s, llama_settings(placement, profile, devices));
  if (draft_on_gpu) GANTRY_RETURN_IF_ERROR(place_draft(s, profile, devices));
  return s;
}

backend::Placement placement_from_plan(const plan::Plan& plan) {
  backend::Placement p;
  auto [n_gpu_layers, split] = split_of(plan);
  std::vector<std::string> rpc;
  for (const auto& d : plan.devices) {
    if (d.device.remote && (rpc.empty() || rpc.back() != d.device.remote->endpoint))
      rpc.push_back(d.device.remote->endpoint);
  }
  p.provider = n_gpu_layers > 0 && any_local_gpu_in(plan) ? "cuda" : "cpu";
  p.llama.rpc = rpc;
  const auto& o = plan.options;
  model::LlamaOptions& l = p.llama;
  l.n_ctx = static_cast<int>(plan.n_ctx);
  l.parallel = static_cast<int>(o.n_parallel);
  l.n_batch = static_cast<int>(plan.n_batch);
  l.n_ubatch = static_cast<int>(plan.n_ubatch);
  l.kv_type = o.kv_type;
  l.flash_attn = o.flash_attn;
  l.kv_unified = o.kv_unified;
  if (n_gpu_layers > 0) {
    l.n_gpu_layers = n_gpu_layers;
    l.tensor_split = split;
  }
  return p;
}

}  // namespace gantry::llama
