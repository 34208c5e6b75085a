#include "gantry/plan/params_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

namespace gantry::plan {
namespace {

struct Shape {
  const char* name;
  uint32_t layers, embd, heads, kv_heads, ff, vocab;
  bool tied;
  uint32_t ctx;
};
// Published Llama-family shapes (config.json of each).
constexpr Shape kShapes[] = {
    {"Llama 3.2 1B", 16, 2048, 32, 8, 8192, 128256, true, 131072},
    {"Llama 3.2 3B", 28, 3072, 24, 8, 8192, 128256, true, 131072},
    {"Llama 3.1 8B", 32, 4096, 32, 8, 14336, 128256, false, 131072},
    {"Llama 2 13B", 40, 5120, 40, 40, 13824, 32000, false, 4096},
    {"Qwen2.5 32B (llama layout)", 64, 5120, 40, 8, 27648, 152064, false, 32768},
    {"Llama 3.1 70B", 80, 8192, 64, 8, 28672, 128256, false, 131072},
    {"Llama 3.1 405B", 126, 16384, 128, 8, 53248, 128256, false, 131072},
};

double layer_params(const Shape& s) {
  const double hd = static_cast<double>(s.embd) / s.heads;
  const double attn = 2.0 * s.embd * s.heads * hd + 2.0 * s.embd * s.kv_heads * hd;
  return attn + 3.0 * s.embd * s.ff + 2.0 * s.embd;
}
double global_params(const Shape& s) { return (s.tied ? 1.0 : 2.0) * s.vocab * s.embd + s.embd; }

}  // namespace

Result<uint64_t> parse_param_count(const std::string& text) {
  std::string s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  double mult = 1;
  if (!s.empty()) {
    switch (std::toupper(static_cast<unsigned char>(s.back()))) {
      case 'K':
        mult = 1e3;
        break;
      case 'M':
        mult = 1e6;
        break;
      case 'B':
      case 'G':
        mult = 1e9;
        break;
      case 'T':
        mult = 1e12;
        break;
      default:
        break;
    }
    if (mult != 1) s.pop_back();
  }
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const double n = v * mult;
  if (s.empty() || used != s.size() || !std::isfinite(n) || n < 1e6 || n > 1e14) {
    return InvalidArgument(
        fmt::format("--params {}: expected a parameter count from 1M to 100T such as 70B, "
                    "7.6b, 500M or 8e9",
                    text));
  }
  return static_cast<uint64_t>(n);
}

Result<CheckpointRead> params_checkpoint(const ParamsSpec& p) {
  GANTRY_ASSIGN_OR_RETURN(uint64_t n, parse_param_count(p.params));
  // The nearest published shape by parameter count (log scale).
  const Shape* ref = &kShapes[0];
  for (const auto& s : kShapes) {
    const double total = global_params(s) + s.layers * layer_params(s);
    const double best = global_params(*ref) + ref->layers * layer_params(*ref);
    if (std::fabs(std::log(total / n)) < std::fabs(std::log(best / n))) ref = &s;
  }
  Shape s = *ref;
  if (p.embd) s.embd = p.embd;
  if (p.heads) s.heads = p.heads;
  if (p.kv_heads)
    s.kv_heads = p.kv_heads;
  else if (p.heads && s.kv_heads > s.heads)
    s.kv_heads = s.heads;
  if (p.ff) s.ff = p.ff;
  if (p.vocab) s.vocab = p.vocab;
  if (p.ctx_train) s.ctx = p.ctx_train;
  if (s.heads == 0 || s.kv_heads == 0 || s.heads % s.kv_heads != 0 || s.embd % s.heads != 0) {
    return InvalidArgument(
        fmt::format("--params: {} heads and {} KV heads over embedding {}: the heads must "
                    "divide the embedding and the KV heads the heads",
                    s.heads, s.kv_heads, s.embd));
  }
  std::string layers_from = "given";
  const double ref_total = global_params(*ref) + ref->layers * layer_params(*ref);
  const bool ref_shape = !p.embd && !p.heads && !p.kv_heads && !p.ff && !p.vocab;
  if (p.layers) {
    s.layers = p.layers;
  } else if (ref_shape && std::fabs(ref_total / static_cast<double>(n) - 1) < 0.05) {
    layers_from = "as published";  // "70B" is Llama 3.1 70B's 70.6B: keep its 80 layers
  } else {
    const double per = layer_params(s);
    const double rest = static_cast<double>(n) - global_params(s);
    s.layers = static_cast<uint32_t>(std::clamp(std::llround(rest / per), 1LL, 512LL));
    layers_from = "scaled to the parameter count";
  }
  const uint32_t hd = s.embd / s.heads;
  CheckpointRead r;
  r.label = p.params;
  const double total = global_params(s) + s.layers * layer_params(s);
  r.assumptions.push_back(fmt::format(
      "a llama-architecture model (grouped-query attention, SwiGLU feed-forward) shaped like {}: {} layers "
      "({}), embedding {}, {} heads of width {} with {} KV heads, feed-forward {}, vocabulary {}{}, training "
      "context {}; {:.2f}B parameters",
      ref->name, s.layers, layers_from, s.embd, s.heads, hd, s.kv_heads, s.ff, s.vocab,
      s.tied ? " (tied embeddings)" : "", s.ctx, total / 1e9));
  r.assumptions.push_back(
      "weights as a bf16 checkpoint quantised by llama.cpp's rules for that shape; "
      "--layers/--heads/--kv-heads/--embd/--ff/--vocab replace any of these");
  nlohmann::json cfg = {{"architectures", {"LlamaForCausalLM"}},
                        {"hidden_size", s.embd},
                        {"num_hidden_layers", s.layers},
                        {"num_attention_heads", s.heads},
                        {"num_key_value_heads", s.kv_heads},
                        {"intermediate_size", s.ff},
                        {"vocab_size", s.vocab},
                        {"max_position_embeddings", s.ctx},
                        {"tie_word_embeddings", s.tied}};
  r.config_json = cfg.dump();
  auto add = [&](std::string name, std::vector<uint64_t> shape) {
    CheckpointTensor t;
    t.name = std::move(name);
    t.dtype = DType::kBFloat16;
    t.shape = std::move(shape);
    t.bytes = 2;
    for (uint64_t d : t.shape) t.bytes *= d;
    r.stored_bytes += t.bytes;
    r.tensors.push_back(std::move(t));
  };
  add("model.embed_tokens.weight", {s.vocab, s.embd});
  for (uint32_t il = 0; il < s.layers; ++il) {
    const std::string pre = fmt::format("model.layers.{}.", il);
    add(pre + "input_layernorm.weight", {s.embd});
    add(pre + "self_attn.q_proj.weight", {uint64_t{s.heads} * hd, s.embd});
    add(pre + "self_attn.k_proj.weight", {uint64_t{s.kv_heads} * hd, s.embd});
    add(pre + "self_attn.v_proj.weight", {uint64_t{s.kv_heads} * hd, s.embd});
    add(pre + "self_attn.o_proj.weight", {s.embd, uint64_t{s.heads} * hd});
    add(pre + "post_attention_layernorm.weight", {s.embd});
    add(pre + "mlp.gate_proj.weight", {s.ff, s.embd});
    add(pre + "mlp.up_proj.weight", {s.ff, s.embd});
    add(pre + "mlp.down_proj.weight", {s.embd, s.ff});
  }
  add("model.norm.weight", {s.embd});
  if (!s.tied) add("lm_head.weight", {s.vocab, s.embd});
  return r;
}

}  // namespace gantry::plan
