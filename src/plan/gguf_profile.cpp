#include "gantry/plan/gguf_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>

namespace gantry::plan {
namespace {

// A per-layer hyperparameter: a scalar for every layer, or an array with one entry per layer.
Result<std::vector<uint32_t>> per_layer(const model::GgufFile& f, const std::string& key, uint32_t n_layer,
                                        std::optional<uint32_t> fallback) {
  const model::GgufValue* v = f.find(key);
  if (v == nullptr) {
    if (!fallback) return InvalidArgument(fmt::format("{}: metadata {} is missing", f.label(), key));
    return std::vector<uint32_t>(n_layer, *fallback);
  }
  if (const model::GgufArray* a = v->as_array()) {
    if (a->items.size() != n_layer) {
      return InvalidArgument(fmt::format("{}: metadata {} has {} entries for {} layers", f.label(), key,
                                         a->items.size(), n_layer));
    }
    std::vector<uint32_t> out;
    for (const auto& item : a->items) {
      const auto u = item.as_uint();
      if (!u || *u > UINT32_MAX)
        return InvalidArgument(fmt::format("{}: metadata {} has a bad entry", f.label(), key));
      out.push_back(static_cast<uint32_t>(*u));
    }
    return out;
  }
  const auto u = v->as_uint();
  if (!u || *u > UINT32_MAX) {
    return InvalidArgument(
        fmt::format("{}: metadata {} is not a count ({})", f.label(), key, v->to_string()));
  }
  return std::vector<uint32_t>(n_layer, static_cast<uint32_t>(*u));
}

// Which layers use sliding-window attention: an explicit bool array, a period (llama.cpp's set_swa_pattern:
// layer il is SWA when il % n < n - 1), or the architecture's built-in pattern.
std::vector<bool> swa_layers(const model::GgufFile& f, uint32_t n_layer, uint32_t n_swa) {
  std::vector<bool> out(n_layer, false);
  if (n_swa == 0) return out;
  const model::GgufValue* p = f.find(f.arch_key("attention.sliding_window_pattern"));
  if (p != nullptr) {
    if (const model::GgufArray* a = p->as_array(); a && a->items.size() == n_layer) {
      for (uint32_t i = 0; i < n_layer; ++i) out[i] = a->items[i].as_bool().value_or(false);
      return out;
    }
  }
  uint32_t period = 0;
  if (p != nullptr && p->as_uint()) period = static_cast<uint32_t>(*p->as_uint());
  if (period == 0) {
    static const std::map<std::string, uint32_t, std::less<>> kBuiltIn = {
        {"gemma2", 2}, {"gemma3", 6}, {"cohere2", 4}, {"gpt-oss", 2}, {"llama4", 4}};
    auto it = kBuiltIn.find(f.architecture());
    period = it == kBuiltIn.end() ? 1 : it->second;  // 1: every layer SWA (e.g. mistral-style window)
  }
  for (uint32_t i = 0; i < n_layer; ++i) out[i] = period == 1 || (i % period) < (period - 1);
  return out;
}

std::optional<uint32_t> layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return std::nullopt;
  name.remove_prefix(4);
  uint32_t il = 0;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), il);
  if (ec != std::errc() || ptr == name.data() || ptr == name.data() + name.size() || *ptr != '.')
    return std::nullopt;
  return il;
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

Result<ModelProfile> profile_from_gguf(const model::GgufFile& f) {
  ModelProfile p;
  p.architecture = f.architecture();
  if (p.architecture.empty())
    return InvalidArgument(fmt::format("{}: general.architecture is missing", f.label()));
  p.name = f.get_string("general.name").value_or(f.label());
  p.file_bytes = f.file_size();

  const auto n_layer = f.get_uint(f.arch_key("block_count"));
  if (!n_layer || *n_layer == 0 || *n_layer > 4096) {
    return InvalidArgument(
        fmt::format("{}: {} is missing or out of range", f.label(), f.arch_key("block_count")));
  }
  const auto n_embd = f.get_uint(f.arch_key("embedding_length"));
  if (!n_embd || *n_embd == 0 || *n_embd > (1u << 20)) {
    return InvalidArgument(
        fmt::format("{}: {} is missing or out of range", f.label(), f.arch_key("embedding_length")));
  }
  const auto nl = static_cast<uint32_t>(*n_layer);
  p.n_embd = static_cast<uint32_t>(*n_embd);
  p.n_ctx_train = static_cast<uint32_t>(
      std::min<uint64_t>(f.get_uint(f.arch_key("context_length")).value_or(0), UINT32_MAX));
  p.n_swa = static_cast<uint32_t>(
      std::min<uint64_t>(f.get_uint(f.arch_key("attention.sliding_window")).value_or(0), UINT32_MAX));

  GANTRY_ASSIGN_OR_RETURN(auto n_head, per_layer(f, f.arch_key("attention.head_count"), nl, std::nullopt));
  const uint32_t head0 = *std::max_element(n_head.begin(), n_head.end());
  if (head0 == 0) return InvalidArgument(fmt::format("{}: attention.head_count is 0", f.label()));
  std::vector<uint32_t> n_head_kv = n_head;  // no GQA unless stated
  if (f.find(f.arch_key("attention.head_count_kv")) != nullptr) {
    GANTRY_ASSIGN_OR_RETURN(n_head_kv, per_layer(f, f.arch_key("attention.head_count_kv"), nl, std::nullopt));
  }
  const uint32_t head_dim = p.n_embd / head0;
  GANTRY_ASSIGN_OR_RETURN(auto k_len, per_layer(f, f.arch_key("attention.key_length"), nl, head_dim));
  GANTRY_ASSIGN_OR_RETURN(auto v_len, per_layer(f, f.arch_key("attention.value_length"), nl, head_dim));
  GANTRY_ASSIGN_OR_RETURN(auto n_ff, per_layer(f, f.arch_key("feed_forward_length"), nl, 0u));
  const std::vector<bool> swa = swa_layers(f, nl, p.n_swa);

  p.layers.resize(nl);
  for (uint32_t i = 0; i < nl; ++i) {
    auto& l = p.layers[i];
    l.n_head = n_head[i];
    l.n_head_kv = n_head_kv[i];
    l.n_embd_head_k = k_len[i];
    l.n_embd_head_v = v_len[i];
    l.n_ff = n_ff[i];
    l.sliding_window = swa[i];
  }

  std::map<std::string, uint64_t> bytes_by_type;
  uint64_t span_begin = UINT64_MAX, span_end = 0;
  for (const auto& t : f.tensors()) {
    const uint64_t repack = repack_bytes(t);
    if (repack == 0) {
      span_begin = std::min(span_begin, t.offset);
      span_end = std::max(span_end, t.offset + t.size_bytes);
    }
    p.n_params += t.n_elements;
    bytes_by_type[std::string(t.type.name)] += t.size_bytes;
    if (auto il = layer_of(t.name)) {
      if (*il >= nl) {
        return InvalidArgument(
            fmt::format("{}: tensor {} names layer {} but the model has {}", f.label(), t.name, *il, nl));
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

  if (const model::GgufValue* tokens = f.find("tokenizer.ggml.tokens"); tokens && tokens->as_array()) {
    p.n_vocab = static_cast<uint32_t>(tokens->as_array()->items.size());
  } else if (auto v = f.get_uint(f.arch_key("vocab_size"))) {
    p.n_vocab = static_cast<uint32_t>(*v);
  } else if (const auto* embd = f.find_tensor("token_embd.weight"); embd && embd->dims.size() >= 2) {
    p.n_vocab = static_cast<uint32_t>(embd->dims[1]);
  }
  return p;
}

Result<ModelProfile> profile_from_gguf(const std::filesystem::path& path) {
  GANTRY_ASSIGN_OR_RETURN(model::GgufFile f, model::GgufFile::open(path));
  return profile_from_gguf(f);
}

std::vector<Device> devices_from_registry(const hw::Registry& registry) {
  std::vector<Device> out;
  Device cpu;
  cpu.id = "cpu";
  cpu.name = registry.cpu.model.empty() ? "CPU" : registry.cpu.model;
  cpu.total_bytes = registry.host.memory_total_bytes.value_or(0);
  cpu.free_bytes = registry.host.memory_available_bytes.value_or(cpu.total_bytes);
  if (registry.host.memory_limit_bytes) {
    cpu.total_bytes = std::min(cpu.total_bytes, *registry.host.memory_limit_bytes);
    cpu.free_bytes = std::min(cpu.free_bytes, *registry.host.memory_limit_bytes);
  }
  out.push_back(cpu);
  for (const auto& d : registry.devices) {
    if (d.kind != hw::DeviceKind::kGpu || !d.memory_total_bytes) continue;
    Device g;
    g.id = d.id;
    g.name = d.name;
    g.is_gpu = true;
    g.total_bytes = *d.memory_total_bytes;
    g.free_bytes = d.memory_free_bytes.value_or(*d.memory_total_bytes);
    out.push_back(g);
  }
  return out;
}

}  // namespace gantry::plan
