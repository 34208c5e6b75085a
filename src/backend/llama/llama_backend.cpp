#include "gantry/backend/llama/llama_backend.h"

#include <future>
#include <sstream>

#include "gantry/backend/llama/llama_info.h"
#include "gantry/model/package.h"

namespace gantry::llama {
namespace {

bool has_gpu(std::string_view prefix) {
  for (const auto& d : ggml_devices()) {
    if (d.type == "gpu" && (prefix.empty() || d.name.rfind(prefix, 0) == 0)) return true;
  }
  return false;
}

Result<int> int_option(const backend::Placement& p, const std::string& key, int fallback) {
  auto it = p.options.find(key);
  if (it == p.options.end()) return fallback;
  try {
    size_t used = 0;
    const int v = std::stoi(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument("trailing");
    return v;
  } catch (...) {
    return InvalidArgument("placement option " + key + "='" + it->second + "' is not an integer");
  }
}

}  // namespace

LlamaBackend::LlamaBackend() {
  caps_.dtypes = {DType::kString, DType::kInt32};
  caps_.device_kinds = {backend::DeviceKind::kCpu};
  if (has_gpu("CUDA")) caps_.device_kinds.push_back(backend::DeviceKind::kNvidiaGpu);
  caps_.dynamic_shapes = true;
  caps_.streams = true;
  caps_.text_generation = true;
  caps_.formats = {"gguf"};
}

std::string LlamaBackend::version() const { return llama_version(); }

backend::Support LlamaBackend::supports(const backend::DeviceInfo& device) const {
  if (device.kind == backend::DeviceKind::kCpu)
    return backend::Support::yes("llama.cpp CPU backend built in");
  if (device.kind == backend::DeviceKind::kNvidiaGpu) {
    return has_gpu("CUDA")
               ? backend::Support::yes("ggml CUDA backend loaded")
               : backend::Support::no("this llama.cpp build has no CUDA backend (CPU-only build)");
  }
  return backend::Support::no("llama.cpp in this build runs on the CPU and NVIDIA GPUs only");
}

backend::Support LlamaBackend::provider_available(std::string_view provider) const {
  if (provider == "cpu") return backend::Support::yes("CPU backend built in");
  if (provider == "cuda") {
    return has_gpu("CUDA") ? backend::Support::yes("ggml CUDA backend loaded")
                           : backend::Support::no(
                                 "no ggml CUDA device: llama.cpp was built for the CPU only, or no driver");
  }
  return backend::Support::no("llama.cpp knows providers cpu and cuda, not '" + std::string(provider) + "'");
}

backend::DeviceKind LlamaBackend::provider_device_kind(std::string_view provider) const {
  return provider == "cuda" ? backend::DeviceKind::kNvidiaGpu : backend::DeviceKind::kCpu;
}

Result<std::unique_ptr<backend::Model>> LlamaBackend::load(const model::Package& package,
                                                           const backend::Placement& placement) {
  GANTRY_ASSIGN_OR_RETURN(auto m, load_file(package.model_path().string(), placement));
  m->meta_.name = placement.model_name.empty() ? package.manifest().name : placement.model_name;
  return std::unique_ptr<backend::Model>(std::move(m));
}

Result<std::unique_ptr<LlamaModel>> LlamaBackend::load_file(const std::string& path,
                                                            const backend::Placement& p) {
  auto pa = provider_available(p.provider);
  if (!pa.ok) return Unavailable(pa.reason);
  LoadOptions lo;
  GANTRY_ASSIGN_OR_RETURN(lo.placement.n_gpu_layers,
                          int_option(p, "n_gpu_layers", p.provider == "cuda" ? -1 : 0));
  lo.placement.main_gpu = p.primary_device();
  if (auto it = p.options.find("tensor_split"); it != p.options.end()) {
    std::stringstream ss(it->second);
    std::string part;
    while (std::getline(ss, part, ',')) {
      try {
        lo.placement.tensor_split.push_back(std::stof(part));
      } catch (...) {
        return InvalidArgument("placement option tensor_split='" + it->second +
                               "' must be numbers separated by commas");
      }
    }
  }
  ContextOptions co;
  int v;
  GANTRY_ASSIGN_OR_RETURN(v, int_option(p, "n_ctx", 2048));
  co.n_ctx = static_cast<uint32_t>(std::max(v, 1));
  GANTRY_ASSIGN_OR_RETURN(v, int_option(p, "parallel", 4));
  co.n_seq_max = static_cast<uint32_t>(std::max(v, 1));
  GANTRY_ASSIGN_OR_RETURN(v, int_option(p, "n_batch", 512));
  co.n_batch = co.n_ubatch = static_cast<uint32_t>(std::max<int>(v, static_cast<int>(co.n_seq_max)));
  co.n_threads = p.intra_op_threads;
  if (auto it = p.options.find("kv_type"); it != p.options.end()) {
    GANTRY_ASSIGN_OR_RETURN(co.type_k, parse_kv_type(it->second));
    co.type_v = co.type_k;
  }
  if (auto it = p.options.find("flash_attn"); it != p.options.end()) {
    if (it->second == "on")
      co.flash_attn = FlashAttn::kOn;
    else if (it->second == "off")
      co.flash_attn = FlashAttn::kOff;
    else if (it->second != "auto")
      return InvalidArgument("placement option flash_attn must be auto, on or off");
  }
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  GANTRY_ASSIGN_OR_RETURN(m->default_max_tokens_, int_option(p, "max_tokens", 128));
  GANTRY_ASSIGN_OR_RETURN(m->weights_, LlamaWeights::load(path, lo));
  GANTRY_ASSIGN_OR_RETURN(m->engine_, BatchEngine::create(m->weights_, co));
  auto& meta = m->meta_;
  meta.name = m->weights_->description();
  meta.backend = "llama.cpp";
  meta.provider = p.provider;
  meta.inputs = {{"prompt", DType::kString, Shape({1}), {""}}};
  meta.outputs = {{"text", DType::kString, Shape({1}), {""}},
                  {"tokens", DType::kInt32, Shape({Shape::kDynamic}), {"n_tokens"}}};
  meta.batchable = false;
  meta.max_batch = co.n_seq_max;
  meta.properties = {{"architecture", m->weights_->architecture()},
                     {"n_params", std::to_string(m->weights_->n_params())},
                     {"n_ctx", std::to_string(m->engine_->context().n_ctx())},
                     {"parallel", std::to_string(co.n_seq_max)},
                     {"chat_template", m->weights_->has_chat_template() ? "yes" : "no"}};
  return m;
}

Status LlamaModel::init() {
  engine_->start();
  return Status::Ok();
}

Result<GenerationRequest> LlamaModel::request_from(std::span<const backend::NamedTensor> inputs) const {
  GenerationRequest r;
  r.sampling.temperature = 0;
  r.max_tokens = default_max_tokens_;
  bool any = false;
  for (const auto& in : inputs) {
    if (in.name == "prompt") {
      if (in.tensor.dtype() != DType::kString || in.tensor.strings().size() != 1) {
        return InvalidArgument("input 'prompt' must be a string tensor holding one string");
      }
      r.prompt = in.tensor.strings()[0];
      any = true;
    } else if (in.name == "tokens") {
      if (in.tensor.dtype() != DType::kInt32) return InvalidArgument("input 'tokens' must be int32");
      auto v = in.tensor.values<int32_t>();
      r.tokens.assign(v.begin(), v.end());
      any = true;
    } else {
      return InvalidArgument("unknown input '" + in.name +
                             "' (a llama.cpp model takes 'prompt' or 'tokens')");
    }
  }
  if (!any) return InvalidArgument("missing input: give 'prompt' (string) or 'tokens' (int32)");
  return r;
}

Result<std::vector<backend::NamedTensor>> LlamaModel::outputs_from(const GenerationResult& r) {
  GANTRY_ASSIGN_OR_RETURN(Tensor text, Tensor::from_strings(Shape({1}), {r.text}));
  GANTRY_ASSIGN_OR_RETURN(
      Tensor toks,
      Tensor::from_values<int32_t>(DType::kInt32, Shape({static_cast<int64_t>(r.tokens.size())}), r.tokens));
  std::vector<backend::NamedTensor> out;
  out.push_back({"text", std::move(text)});
  out.push_back({"tokens", std::move(toks)});
  return out;
}

Result<std::vector<backend::NamedTensor>> LlamaModel::infer_one(
    std::span<const backend::NamedTensor> inputs) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  GANTRY_ASSIGN_OR_RETURN(auto req, request_from(inputs));
  GANTRY_ASSIGN_OR_RETURN(auto res, engine_->generate(std::move(req)));
  return outputs_from(res);
}

Result<std::vector<std::vector<backend::NamedTensor>>> LlamaModel::infer_batch(
    std::span<const std::vector<backend::NamedTensor>> requests) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  std::vector<SequenceHandle> handles;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto req = request_from(requests[i]);
    if (!req.ok()) {
      for (auto& h : handles) h.cancel();
      return req.status().with_context("request " + std::to_string(i) + " of the batch");
    }
    auto h = engine_->submit(std::move(*req));
    if (!h.ok()) {
      for (auto& hh : handles) hh.cancel();
      return h.status().with_context("request " + std::to_string(i) + " of the batch");
    }
    handles.push_back(*h);
  }
  std::vector<std::vector<backend::NamedTensor>> out;
  for (size_t i = 0; i < handles.size(); ++i) {
    auto r = engine_->wait(handles[i]);
    if (!r.ok()) return r.status().with_context("request " + std::to_string(i) + " of the batch");
    GANTRY_ASSIGN_OR_RETURN(auto o, outputs_from(*r));
    out.push_back(std::move(o));
  }
  return out;
}

Status LlamaModel::reset() {
  engine_->cancel_all();
  GANTRY_RETURN_IF_ERROR(Model::reset());
  return Status::Ok();
}

Result<SequenceHandle> LlamaModel::submit(GenerationRequest request) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  return engine_->submit(std::move(request));
}

Result<GenerationResult> LlamaModel::generate(GenerationRequest request) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  return engine_->generate(std::move(request));
}

std::unique_ptr<backend::Backend> make_llama_backend() { return std::make_unique<LlamaBackend>(); }

}  // namespace gantry::llama
