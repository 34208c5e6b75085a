#include "gantry/backend/llama/settings.h"

#include <fmt/format.h>
#include <ggml-backend.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <sstream>

#include "backend/llama/runtime_init.h"
#include "gantry/hw/registry.h"
#include "gantry/plan/gguf_profile.h"

namespace gantry::llama {
namespace {

constexpr std::array<std::string_view, 10> kKeys = {"n_ctx",        "parallel",     "n_batch", "n_ubatch",
                                                    "n_gpu_layers", "tensor_split", "kv_type", "flash_attn",
                                                    "max_tokens",   "mmap"};
constexpr uint32_t kDefaultCtx = 2048;
constexpr uint32_t kDefaultBatch = 512;

std::string known_keys() { return fmt::format("{}", fmt::join(kKeys, ", ")); }

// An integer option in [lo, hi], or nullopt when absent.
Result<std::optional<int>> int_option(const backend::Placement& p, std::string_view key, int lo, int hi) {
  auto it = p.options.find(std::string(key));
  if (it == p.options.end()) return std::optional<int>();
  const std::string& s = it->second;
  int v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) {
    return InvalidArgument(fmt::format("placement option {}='{}' is not an integer", key, s));
  }
  if (v < lo || v > hi) {
    return InvalidArgument(fmt::format("placement option {}={} is out of range ({}..{})", key, v, lo, hi));
  }
  return std::optional<int>(v);
}

Result<std::vector<float>> split_option(const std::string& text) {
  std::vector<float> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    try {
      size_t used = 0;
      const float f = std::stof(part, &used);
      if (used != part.size() || !(f >= 0)) throw std::invalid_argument("bad");
      out.push_back(f);
    } catch (...) {
      return InvalidArgument("placement option tensor_split='" + text +
                             "' must be non-negative numbers separated by commas (e.g. 3,1)");
    }
  }
  if (out.empty()) return InvalidArgument("placement option tensor_split is empty");
  return out;
}

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

std::string gib(uint64_t b) { return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1ull << 30)); }

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

}  // namespace

std::span<const std::string_view> llama_placement_keys() { return kKeys; }

Result<LlamaSettings> llama_settings(const backend::Placement& p, const plan::ModelProfile& model,
                                     const std::vector<plan::Device>& devices) {
  for (const auto& [key, value] : p.options) {
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
      return InvalidArgument(
          fmt::format("unknown llama.cpp placement option '{}' (known: {})", key, known_keys()));
    }
  }
  if (p.provider != "cpu" && p.provider != "cuda") {
    return InvalidArgument("llama.cpp runs on provider cpu or cuda, not '" + p.provider + "'");
  }
  if (p.intra_op_threads < 0) return InvalidArgument("intra_op_threads must be >= 0 (0 = every core)");
  LlamaSettings s;
  auto& c = s.context;
  c.n_threads = p.intra_op_threads;

  GANTRY_ASSIGN_OR_RETURN(auto n_ctx, int_option(p, "n_ctx", 0, 1 << 24));
  const uint32_t train = model.n_ctx_train;
  if (n_ctx && *n_ctx > 0) {
    c.n_ctx = static_cast<uint32_t>(*n_ctx);
  } else if (n_ctx) {  // 0: the training context
    c.n_ctx = train > 0 ? train : kDefaultCtx;
  } else {
    c.n_ctx = train > 0 ? std::min(kDefaultCtx, train) : kDefaultCtx;
  }
  GANTRY_ASSIGN_OR_RETURN(auto parallel, int_option(p, "parallel", 1, 256));
  c.n_seq_max = static_cast<uint32_t>(parallel.value_or(1));
  GANTRY_ASSIGN_OR_RETURN(auto n_batch, int_option(p, "n_batch", 1, 1 << 20));
  if (n_batch && static_cast<uint32_t>(*n_batch) < c.n_seq_max) {
    return InvalidArgument(
        fmt::format("placement option n_batch={} must be >= parallel ({}): every "
                    "generating sequence needs a place in each decode",
                    *n_batch, c.n_seq_max));
  }
  c.n_batch = n_batch ? static_cast<uint32_t>(*n_batch) : std::max(kDefaultBatch, c.n_seq_max);
  GANTRY_ASSIGN_OR_RETURN(auto n_ubatch, int_option(p, "n_ubatch", 1, 1 << 20));
  c.n_ubatch = std::min(c.n_batch, n_ubatch ? static_cast<uint32_t>(*n_ubatch) : c.n_batch);
  if (c.n_ctx < c.n_seq_max) {
    return InvalidArgument(
        fmt::format("a context of {} cells cannot hold {} parallel sequences", c.n_ctx, c.n_seq_max));
  }

  if (auto it = p.options.find("kv_type"); it != p.options.end()) {
    const auto kv = plan::parse_kv_type(it->second);
    if (!kv) {
      return InvalidArgument(fmt::format("placement option kv_type='{}' is not a KV cache type ({})",
                                         it->second, plan::kv_type_names()));
    }
    c.type_k = c.type_v = *kv;
  }
  if (auto it = p.options.find("flash_attn"); it != p.options.end()) {
    if (it->second == "on") {
      c.flash_attn = FlashAttn::kOn;
    } else if (it->second == "off") {
      c.flash_attn = FlashAttn::kOff;
    } else if (it->second != "auto") {
      return InvalidArgument("placement option flash_attn='" + it->second + "' must be auto, on or off");
    }
  }
  if (plan::kv_type_quantized(c.type_v) && c.flash_attn == FlashAttn::kOff) {
    return InvalidArgument(
        fmt::format("a quantised V cache ({}) needs flash attention: use flash_attn=on "
                    "(or auto) or kv_type=f16",
                    plan::kv_type_name(c.type_v)));
  }
  // mmap off reads the weights into memory: a file replaced in place while mapped would otherwise end the
  // process with SIGBUS on the next access.
  if (auto it = p.options.find("mmap"); it != p.options.end()) {
    if (it->second != "on" && it->second != "off")
      return InvalidArgument("placement option mmap='" + it->second + "' must be on or off");
    s.load.use_mmap = it->second == "on";
  }
  GANTRY_ASSIGN_OR_RETURN(auto max_tokens, int_option(p, "max_tokens", 1, 1 << 24));
  s.max_tokens = max_tokens.value_or(128);

  auto& lp = s.load.placement;
  lp.main_gpu = p.primary_device();
  if (auto it = p.options.find("tensor_split"); it != p.options.end()) {
    GANTRY_ASSIGN_OR_RETURN(lp.tensor_split, split_option(it->second));
  }
  GANTRY_ASSIGN_OR_RETURN(auto ngl, int_option(p, "n_gpu_layers", -1, 1 << 16));
  if (p.provider == "cpu") {
    if (ngl && *ngl != 0) {
      return InvalidArgument(
          fmt::format("placement option n_gpu_layers={} contradicts provider cpu "
                      "(use provider cuda to offload layers)",
                      *ngl));
    }
    lp.n_gpu_layers = 0;
    s.reason = "provider cpu: every layer on the CPU";
  } else if (ngl) {
    lp.n_gpu_layers = *ngl;
    s.reason = *ngl < 0 ? "provider cuda: n_gpu_layers=-1 offloads every layer"
                        : fmt::format("provider cuda: n_gpu_layers={} as given", *ngl);
  } else {
    GANTRY_ASSIGN_OR_RETURN(lp.n_gpu_layers, layers_that_fit(s, model, devices, &s.reason));
  }
  return s;
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
  // The device list matters only when the planner chooses the offload.
  const bool plans = placement.provider == "cuda" && !placement.options.contains("n_gpu_layers");
  return llama_settings(placement, profile, plans ? llama_plan_devices() : std::vector<plan::Device>{});
}

backend::Placement placement_from_plan(const plan::Plan& plan) {
  backend::Placement p;
  int n_gpu_layers = 0;
  std::vector<std::string> split;
  for (const auto& d : plan.devices) {
    if (!plan::is_gpu(d.device)) continue;
    n_gpu_layers += static_cast<int>(d.layers.size()) + (d.has_output_layer ? 1 : 0);
    split.push_back(std::to_string(d.layers.size()));
  }
  p.provider = n_gpu_layers > 0 ? "cuda" : "cpu";
  const auto& o = plan.options;
  p.options = {{"n_ctx", std::to_string(plan.n_ctx)},
               {"parallel", std::to_string(o.n_parallel)},
               {"n_batch", std::to_string(plan.n_batch)},
               {"n_ubatch", std::to_string(plan.n_ubatch)},
               {"kv_type", std::string(plan::kv_type_name(o.kv_type))},
               {"flash_attn", o.flash_attn ? "on" : "off"}};
  if (n_gpu_layers > 0) {
    p.options["n_gpu_layers"] = std::to_string(n_gpu_layers);
    p.options["tensor_split"] = fmt::format("{}", fmt::join(split, ","));
  }
  return p;
}

}  // namespace gantry::llama
