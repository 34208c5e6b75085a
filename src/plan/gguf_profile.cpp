#include "gantry/plan/gguf_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "gantry/model/gguf_hparams.h"

namespace gantry::plan {
namespace {

// The GGUF's sliding-window pattern: an explicit bool array, or a period.
std::vector<bool> swa_layers(const model::GgufFile& f, uint32_t n_layer, uint32_t n_swa) {
  const model::GgufValue* p = f.find(f.arch_key("attention.sliding_window_pattern"));
  std::vector<bool> pattern;
  uint32_t period = 0;
  if (p != nullptr) {
    if (const model::GgufArray* a = p->as_array(); a && a->size() == n_layer) {
      for (uint32_t i = 0; i < n_layer; ++i) pattern.push_back(a->at(i).as_bool().value_or(false));
    } else if (p->as_uint()) {
      period = static_cast<uint32_t>(*p->as_uint());
    }
  }
  return sliding_window_layers(f.architecture(), n_layer, n_swa, period, pattern);
}

// Bytes llama.cpp's CPU backend would copy into its repack buffer for this tensor on an x86-64 AVX2 CPU
// (ggml-cpu/repack.cpp: q4_0, q4_K, iq4_nl and mxfp4 matrices with rows in multiples of 8). Token embeddings
// feed get_rows, not a matrix multiplication, and are never repacked.
uint64_t repack_bytes(const model::GgufTensorInfo& t) {
  using model::GgmlType;
  const GgmlType type = t.type.type;
  const bool repackable = type == GgmlType::kQ4_0 || type == GgmlType::kQ4_K || type == GgmlType::kIQ4_NL ||
                          type == GgmlType::kMXFP4;
  if (!repackable || t.dims.size() < 2 || t.dims[1] % 8 != 0 || t.dims[0] % 8 != 0) return 0;
  if (t.name.rfind("token_embd", 0) == 0) return 0;
  return t.size_bytes;
}

}  // namespace

std::vector<bool> sliding_window_layers(std::string_view architecture, uint32_t n_layer, uint32_t n_swa,
                                        uint32_t period, const std::vector<bool>& pattern) {
  std::vector<bool> out(n_layer, false);
  if (n_swa == 0) return out;
  if (pattern.size() == n_layer) return pattern;
  if (period == 0) {
    static const std::map<std::string, uint32_t, std::less<>> kBuiltIn = {
        {"gemma2", 2}, {"gemma3", 6}, {"cohere2", 4}, {"gpt-oss", 2}, {"llama4", 4}};
    auto it = kBuiltIn.find(architecture);
    period = it == kBuiltIn.end() ? 1 : it->second;  // 1: every layer SWA (e.g. mistral-style window)
  }
  for (uint32_t i = 0; i < n_layer; ++i) out[i] = period == 1 || (i % period) < (period - 1);
  return out;
}

Result<ModelProfile> profile_from_tensors(const model::GgufHyperparameters& h, const std::vector<bool>& swa,
                                          const std::vector<model::GgufTensorInfo>& tensors, std::string name,
                                          uint64_t file_bytes) {
  ModelProfile p;
  p.architecture = h.architecture;
  p.name = std::move(name);
  p.file_bytes = file_bytes;
  const uint32_t nl = h.n_layer;
  p.n_embd = h.n_embd;
  p.n_ctx_train = h.n_ctx_train;
  p.n_swa = h.n_swa;
  p.n_vocab = h.n_vocab;
  p.n_expert = h.n_expert;
  p.n_expert_used = h.n_expert_used;

  p.layers.resize(nl);
  for (uint32_t i = 0; i < nl; ++i) {
    auto& l = p.layers[i];
    l.n_head = h.n_head[i];
    l.n_head_kv = h.n_head_kv[i];
    l.n_embd_head_k = h.n_embd_head_k[i];
    l.n_embd_head_v = h.n_embd_head_v[i];
    l.n_ff = h.n_ff[i];
    l.sliding_window = i < swa.size() && swa[i];
  }

  std::map<std::string, uint64_t> bytes_by_type;
  uint64_t span_begin = UINT64_MAX, span_end = 0;
  for (const auto& t : tensors) {
    const uint64_t repack = repack_bytes(t);
    if (repack == 0) {
      span_begin = std::min(span_begin, t.offset);
      span_end = std::max(span_end, t.offset + t.size_bytes);
    }
    p.n_params += t.n_elements;
    // Expert widths from the first layer's stacked experts ([n_embd, n_ff_exp, n_expert]) and shared expert.
    if (t.name == "blk.0.ffn_gate_exps.weight" && t.dims.size() >= 2)
      p.n_ff_exp = static_cast<uint32_t>(t.dims[1]);
    if (t.name == "blk.0.ffn_gate_shexp.weight" && t.dims.size() >= 2)
      p.n_ff_shexp = static_cast<uint32_t>(t.dims[1]);
    bytes_by_type[std::string(t.type.name)] += t.size_bytes;
    if (auto il = model::gguf_tensor_layer(t.name)) {
      if (*il >= nl) {
        return InvalidArgument(
            fmt::format("{}: tensor {} names layer {} but the model has {}", p.name, t.name, *il, nl));
      }
      p.layers[*il].weight_bytes += t.size_bytes;
      p.layers[*il].repack_bytes += repack;
    } else if (t.name.rfind("output", 0) == 0) {
      p.output_weight_bytes += t.size_bytes;
      p.output_repack_bytes += repack;
    } else {
      p.input_weight_bytes += t.size_bytes;  // token_embd and other global tensors stay with the input layer
    }
  }
  if (span_end > span_begin) p.mapped_span_bytes = span_end - span_begin;
  if (!bytes_by_type.empty()) {
    p.weight_type =
        std::max_element(bytes_by_type.begin(), bytes_by_type.end(), [](const auto& a, const auto& b) {
          return a.second < b.second;
        })->first;
  }
  return p;
}

Result<ModelProfile> profile_from_gguf(const model::GgufFile& f) {
  // Every hyperparameter is checked once, where llama.cpp's own load checks it too.
  GANTRY_ASSIGN_OR_RETURN(model::GgufHyperparameters h, model::read_hyperparameters(f));
  return profile_from_tensors(h, swa_layers(f, h.n_layer, h.n_swa), f.tensors(),
                              f.get_string("general.name").value_or(f.label()), f.file_size());
}

Result<ModelProfile> profile_from_gguf(const std::filesystem::path& path) {
  GANTRY_ASSIGN_OR_RETURN(model::GgufFile f, model::GgufFile::open(path));
  return profile_from_gguf(f);
}

std::vector<Device> devices_from_registry(const hw::Registry& registry) {
  std::vector<Device> out;
  uint64_t cpu_total = registry.host.memory_total_bytes.value_or(0);
  uint64_t cpu_free = registry.host.memory_available_bytes.value_or(cpu_total);
  if (registry.host.memory_limit_bytes) {
    cpu_total = std::min(cpu_total, *registry.host.memory_limit_bytes);
    cpu_free = std::min(cpu_free, *registry.host.memory_limit_bytes);
  }
  out.push_back(memory_target("cpu", registry.cpu.model.empty() ? "CPU" : registry.cpu.model, false, cpu_free,
                              cpu_total));
  // Remote devices (RPC) before the local GPUs: the order llama.cpp is given them in (as llama-server does,
  // so that the output layer and its logits stay on this host when it has a GPU).
  for (const auto& d : registry.devices)
    if (d.kind == hw::DeviceKind::kRemote && d.memory_total_bytes) out.push_back(d);
  for (const auto& d : registry.devices)
    if (d.kind == hw::DeviceKind::kGpu && d.memory_total_bytes) out.push_back(d);  // free: total if unknown
  return out;
}

}  // namespace gantry::plan
