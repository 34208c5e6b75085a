// config.json + safetensors headers -> the GGUF llama.cpp's converter writes (convert_hf_to_gguf.py and
// conversion/*.py at commit de3ff815; names from gguf-py/gguf/tensor_mapping.py) -> its quantised profile.
#include "gantry/plan/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "gantry/core/json.h"
#include "gantry/plan/gguf_profile.h"

namespace gantry::plan {
namespace {

using Json = nlohmann::json;
using model::GgmlType;

struct Arch {
  std::string_view hf;    // config.json "architectures"[0]
  std::string_view gguf;  // llama.cpp's architecture
};
constexpr Arch kArchs[] = {
    {"LlamaForCausalLM", "llama"},   {"LLaMAForCausalLM", "llama"},
    {"MistralForCausalLM", "llama"}, {"MixtralForCausalLM", "llama"},
    {"Qwen2ForCausalLM", "qwen2"},   {"Qwen2MoeForCausalLM", "qwen2moe"},
    {"Qwen3ForCausalLM", "qwen3"},   {"Qwen3MoeForCausalLM", "qwen3moe"},
    {"GemmaForCausalLM", "gemma"},   {"Gemma2ForCausalLM", "gemma2"},
    {"Gemma3ForCausalLM", "gemma3"}, {"Gemma3ForConditionalGeneration", "gemma3"},
};

bool gemma_like(std::string_view arch) { return arch == "gemma2" || arch == "gemma3"; }

// TextModel.find_hparam: the first of `keys` present (a non-negative integer).
std::optional<uint64_t> find_count(const Json& cfg, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    const auto it = cfg.find(k);
    if (it == cfg.end() || it->is_null()) continue;
    if (it->is_number_unsigned()) return it->get<uint64_t>();
    if (it->is_number_integer() && it->get<int64_t>() >= 0) return static_cast<uint64_t>(it->get<int64_t>());
    return std::nullopt;
  }
  return std::nullopt;
}

Status bad_config(std::string_view field, std::string_view why) {
  return InvalidArgument(fmt::format("config.json: {} {}", field, why));
}

Result<uint32_t> required(const Json& cfg, std::initializer_list<const char*> keys, uint64_t lo,
                          uint64_t hi) {
  const auto v = find_count(cfg, keys);
  const std::string field = *keys.begin();
  if (!v) return bad_config(field, "is missing or not a non-negative integer");
  if (*v < lo || *v > hi) return bad_config(field, fmt::format("is {}, outside {}..{}", *v, lo, hi));
  return static_cast<uint32_t>(*v);
}

// The converter's tensor filters (TextModel.filter_tensors, ModelBase.filter_tensors, prepare_tensors):
// multimodal towers and buffers it never writes.
bool skipped(const std::string& name, std::string_view arch) {
  for (const char* p : {"mlp", "vit.", "vpm.", "siglip2.", "conformer.", "merger.", "resampler.",
                        "sound_encoder.", "sound_projection.", "speech_embeddings."}) {
    if (name.rfind(p, 0) == 0) return true;
  }
  for (const char* p :
       {"visual.", "vision.", "audio.", "talker.", "vision_", "audio_", "token2wav.", "code2wav.",
        "projector.", "pre_mm_projector_norm", "image_newline", "view_seperator", "patch_embed",
        "patch_embedding", "patch_merger.", "patch_merge_mlp.", "model.connector."}) {
    if (name.find(p) != std::string::npos) return true;
  }
  for (const char* s : {".attention.masked_bias", ".attention.bias", ".rotary_emb.inv_freq"}) {
    const std::string_view sv(s);
    if (name.size() >= sv.size() && name.compare(name.size() - sv.size(), sv.size(), sv) == 0) return true;
  }
  // Gemma and Gemma 2 tie their embeddings; a stray lm_head (e.g. from AutoAWQ) is dropped.
  return (arch == "gemma" || arch == "gemma2") && name == "lm_head.weight";
}

// A per-layer module (the part after "model.layers.N.", without .weight/.bias) -> its GGUF name.
std::optional<std::string_view> layer_tensor(std::string_view module, std::string_view arch) {
  static const std::map<std::string_view, std::string_view> kMap = {
      {"input_layernorm", "attn_norm"},
      {"self_attn.q_proj", "attn_q"},
      {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"},
      {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"},
      {"self_attn.qkv_proj", "attn_qkv"},
      {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},
      {"mlp.gate_up_proj", "ffn_up"},
      {"block_sparse_moe.gate", "ffn_gate_inp"},
      {"mlp.gate", "ffn_gate_inp"},
      {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"},
      {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
      {"mlp.shared_expert.down_proj", "ffn_down_shexp"},
      {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},
      {"pre_feedforward_layernorm", "ffn_norm"},
      {"post_feedforward_layernorm", "post_ffw_norm"},
  };
  if (module == "post_attention_layernorm") return gemma_like(arch) ? "post_attention_norm" : "ffn_norm";
  if ((module == "pre_feedforward_layernorm" || module == "post_feedforward_layernorm") && !gemma_like(arch))
    return std::nullopt;
  const auto it = kMap.find(module);
  if (it == kMap.end()) return std::nullopt;
  return it->second;
}

// The converter's output type for one tensor (prepare_tensors): f32 for 1-D tensors, norms, expert routers
// and non-".weight" tensors; else the file type.
GgmlType converted_type(const std::string& gguf_name, size_t n_dims, GgmlType file_type) {
  auto ends = [&](std::string_view s) {
    return gguf_name.size() >= s.size() && gguf_name.compare(gguf_name.size() - s.size(), s.size(), s) == 0;
  };
  if (n_dims <= 1 || ends("_norm.weight")) return GgmlType::kF32;
  if (gguf_name.find("ffn_gate_inp.") != std::string::npos ||
      gguf_name.find("ffn_gate_inp_shexp.") != std::string::npos || gguf_name == "position_embd.weight" ||
      gguf_name == "token_types.weight" || !ends(".weight")) {
    return GgmlType::kF32;
  }
  return file_type;
}

model::GgufTensorInfo make_tensor(std::string name, std::vector<uint64_t> dims, GgmlType type) {
  model::GgufTensorInfo t;
  t.name = std::move(name);
  t.dims = std::move(dims);
  t.type = *model::ggml_type_traits(static_cast<uint32_t>(type));
  t.n_elements = 1;
  for (uint64_t d : t.dims) t.n_elements *= d;
  t.size_bytes = ggml_tensor_bytes(t.type, t.dims);
  return t;
}

std::vector<uint64_t> reversed(const std::vector<uint64_t>& shape) { return {shape.rbegin(), shape.rend()}; }

// "model.layers.12.self_attn.q_proj.weight" -> (12, "self_attn.q_proj", ".weight").
struct LayerName {
  uint32_t layer;
  std::string module, suffix;
};
std::optional<LayerName> parse_layer(const std::string& name) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (name.rfind(kPrefix, 0) != 0) return std::nullopt;
  const char* b = name.data() + kPrefix.size();
  const char* e = name.data() + name.size();
  uint32_t il = 0;
  auto [p, ec] = std::from_chars(b, e, il);
  if (ec != std::errc() || p == b || p == e || *p != '.') return std::nullopt;
  std::string rest(p + 1, e);
  std::string suffix;
  for (const char* s : {".weight", ".bias"}) {
    const std::string_view sv(s);
    if (rest.size() > sv.size() && rest.compare(rest.size() - sv.size(), sv.size(), sv) == 0) {
      suffix = s;
      rest.resize(rest.size() - sv.size());
      break;
    }
  }
  return LayerName{il, rest, suffix};
}

// One projection of every expert of a layer, to stack.
struct ExpertSlot {
  std::vector<uint64_t> shape;  // of one expert
  uint32_t seen = 0;
};

// rope_parameters / rope_scaling, the "full_attention" part where split (TextModel.__init__).
const Json* rope_parameters(const Json& cfg) {
  for (const char* k : {"rope_parameters", "rope_scaling"}) {
    const auto it = cfg.find(k);
    if (it != cfg.end() && it->is_object()) {
      const auto full = it->find("full_attention");
      return full != it->end() && full->is_object() ? &*full : &*it;
    }
  }
  return nullptr;
}

bool is_llama3_rope(const Json& cfg) {
  const Json* r = rope_parameters(cfg);
  if (r == nullptr) return false;
  for (const char* k : {"rope_type", "type"}) {
    const auto it = r->find(k);
    if (it != r->end() && it->is_string()) {
      std::string s = it->get<std::string>();
      std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
      return s == "llama3";
    }
  }
  return false;
}

}  // namespace

std::string planned_architectures() {
  std::vector<std::string_view> names;
  for (const auto& a : kArchs) names.push_back(a.hf);
  return fmt::format("{}", fmt::join(names, ", "));
}

Result<ConvertedCheckpoint> convert_checkpoint(std::string_view config_json,
                                               const std::vector<CheckpointTensor>& tensors) {
  auto parsed = parse_json<Json>(config_json, "config.json");
  if (!parsed.ok()) return InvalidArgument(parsed.status().message());
  Json cfg = std::move(*parsed);
  if (!cfg.is_object()) return bad_config("(the document)", "is not a JSON object");
  const auto archs = cfg.find("architectures");
  if (archs == cfg.end() || !archs->is_array() || archs->empty() || !(*archs)[0].is_string())
    return bad_config("architectures", "is missing (a list naming the model class, e.g. LlamaForCausalLM)");
  ConvertedCheckpoint out;
  out.hf_architecture = (*archs)[0].get<std::string>();
  std::string_view arch;
  for (const auto& a : kArchs)
    if (a.hf == out.hf_architecture) arch = a.gguf;
  if (arch.empty()) {
    return Unsupported(fmt::format("not planned yet: architecture {} (planned: {})", out.hf_architecture,
                                   planned_architectures()));
  }
  // A multimodal config keeps the language model's fields in text_config (TextModel.__init__).
  if (const auto tc = cfg.find("text_config"); tc != cfg.end() && tc->is_object()) {
    Json merged = cfg;
    for (const auto& [k, v] : tc->items()) merged[k] = v;
    cfg = std::move(merged);
  }

  model::GgufHyperparameters& h = out.hparams;
  h.architecture = std::string(arch);
  GANTRY_ASSIGN_OR_RETURN(h.n_layer, required(cfg, {"num_hidden_layers", "n_layers", "n_layer", "num_layers"},
                                              1, model::kGgufMaxLayers));
  GANTRY_ASSIGN_OR_RETURN(h.n_embd,
                          required(cfg, {"hidden_size", "n_embd", "dim"}, 1, model::kGgufMaxEmbedding));
  const uint64_t default_heads = arch == "gemma3" ? 8 : 0;
  const uint32_t n_head = static_cast<uint32_t>(
      find_count(cfg, {"num_attention_heads", "n_head", "n_heads"}).value_or(default_heads));
  if (n_head == 0 || n_head > model::kGgufMaxHeads)
    return bad_config("num_attention_heads",
                      fmt::format("is {}, outside 1..{}", n_head, model::kGgufMaxHeads));
  const uint32_t n_head_kv = static_cast<uint32_t>(
      find_count(cfg, {"num_key_value_heads", "n_kv_heads"}).value_or(arch == "gemma3" ? 4 : n_head));
  if (n_head_kv == 0 || n_head % n_head_kv != 0) {
    return bad_config(
        "num_key_value_heads",
        fmt::format("is {}; it must be at least 1 and divide num_attention_heads {}", n_head_kv, n_head));
  }
  const auto head_dim_cfg = find_count(cfg, {"head_dim"});
  const uint32_t head_dim =
      static_cast<uint32_t>(head_dim_cfg.value_or(arch == "gemma3" ? 256 : h.n_embd / n_head));
  if (head_dim == 0 || head_dim > model::kGgufMaxHeadWidth)
    return bad_config("head_dim",
                      fmt::format("is {} (hidden_size / num_attention_heads when absent)", head_dim));
  const uint32_t n_ff = static_cast<uint32_t>(
      std::min<uint64_t>(find_count(cfg, {"prefix_dense_intermediate_size", "dense_intermediate_size",
                                          "intermediate_size", "n_inner", "hidden_dim"})
                             .value_or(0),
                         model::kGgufMaxFeedForward));
  const auto n_ctx = find_count(cfg, {"max_position_embeddings", "n_ctx", "n_positions", "max_length",
                                      "max_sequence_length", "model_max_length"});
  h.n_ctx_train =
      static_cast<uint32_t>(std::min<uint64_t>(n_ctx.value_or(arch == "gemma3" ? 131072 : 0), UINT32_MAX));
  if (h.n_ctx_train == 0) return bad_config("max_position_embeddings", "is missing or 0");
  h.n_expert = static_cast<uint32_t>(
      find_count(cfg, {"num_local_experts", "num_experts", "n_routed_experts"}).value_or(0));
  h.n_expert_used = static_cast<uint32_t>(
      find_count(cfg, {"num_experts_per_tok", "num_experts_per_token", "top_k_experts"}).value_or(0));
  if (h.n_expert > 0 && (h.n_expert_used == 0 || h.n_expert_used > h.n_expert)) {
    return bad_config("num_experts_per_tok",
                      fmt::format("is {}; it must be 1..{} (num_experts)", h.n_expert_used, h.n_expert));
  }
  if (h.n_expert > model::kGgufMaxExperts)
    return bad_config("num_local_experts",
                      fmt::format("is {}, above {}", h.n_expert, model::kGgufMaxExperts));
  if (arch == "gemma2" || arch == "gemma3") {
    const auto pattern = find_count(cfg, {"sliding_window_pattern"});
    if (arch == "gemma2" || pattern.value_or(0) != 1)
      h.n_swa = static_cast<uint32_t>(
          std::min<uint64_t>(find_count(cfg, {"sliding_window"}).value_or(0), UINT32_MAX));
  }
  h.n_head.assign(h.n_layer, n_head);
  h.n_head_kv.assign(h.n_layer, n_head_kv);
  h.n_embd_head_k.assign(h.n_layer, head_dim);
  h.n_embd_head_v.assign(h.n_layer, head_dim);
  h.n_ff.assign(h.n_layer, n_ff);
  out.sliding_window = sliding_window_layers(h.architecture, h.n_layer, h.n_swa, 0);

  // --outtype auto: the first bf16 or f16 matrix decides; without one (an f32 checkpoint), f16.
  out.converted_type = *file_type_by_name("f16");
  for (const auto& t : tensors) {
    if (t.shape.size() < 2 || (t.dtype != DType::kBFloat16 && t.dtype != DType::kFloat16)) continue;
    if (t.dtype == DType::kBFloat16) out.converted_type = *file_type_by_name("bf16");
    break;
  }
  const GgmlType ftype = out.converted_type.default_type;

  std::map<std::pair<uint32_t, std::string>, ExpertSlot> experts;  // (layer, GGUF name) -> stacked slot
  auto add = [&](std::string gguf_name, std::vector<uint64_t> dims) {
    out.tensors.push_back(make_tensor(gguf_name, dims, converted_type(gguf_name, dims.size(), ftype)));
  };
  for (const auto& t : tensors) {
    out.checkpoint_bytes += t.bytes;
    std::string name = t.name;
    for (size_t at; (at = name.find("language_model.")) != std::string::npos;) name.erase(at, 15);
    if (skipped(name, arch)) continue;
    if (name == "model.embed_tokens.weight") {
      add("token_embd.weight", reversed(t.shape));
      continue;
    }
    if (name == "model.norm.weight") {
      add("output_norm.weight", reversed(t.shape));
      continue;
    }
    if (name == "lm_head.weight") {
      add("output.weight", reversed(t.shape));
      continue;
    }
    const auto ln = parse_layer(name);
    if (!ln) {
      return Unsupported(fmt::format("not planned yet: tensor {} of architecture {} has no GGUF name here",
                                     t.name, out.hf_architecture));
    }
    if (ln->layer >= h.n_layer) {
      return InvalidArgument(fmt::format("tensor {} names layer {} but config.json has num_hidden_layers {}",
                                         t.name, ln->layer, h.n_layer));
    }
    const std::string blk = fmt::format("blk.{}.", ln->layer);
    // Experts, one tensor each (Mixtral's w1/w2/w3, Qwen MoE's gate/up/down), stacked per layer.
    std::string_view m = ln->module;
    std::optional<std::string> stacked;
    if (m.rfind("block_sparse_moe.experts.", 0) == 0 || m.rfind("mlp.experts.", 0) == 0) {
      const std::string_view tail = m.substr(m.rfind('.') + 1);
      static const std::map<std::string_view, std::string_view> kExpert = {
          {"w1", "ffn_gate_exps"},        {"w2", "ffn_down_exps"},    {"w3", "ffn_up_exps"},
          {"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"}, {"down_proj", "ffn_down_exps"},
          {"gate_up_proj", "gate_up"}};
      const auto it = kExpert.find(tail);
      if (it == kExpert.end()) {
        return Unsupported(
            fmt::format("not planned yet: expert tensor {} of {}", t.name, out.hf_architecture));
      }
      const bool fused = m == "mlp.experts.gate_up_proj" || m == "mlp.experts.down_proj";
      if (fused) {  // already stacked: [n_expert, rows, cols] (Qwen2MoeModel.modify_tensors)
        if (t.shape.size() != 3)
          return InvalidArgument(fmt::format("tensor {} should have 3 dimensions (experts stacked)", t.name));
        if (tail == "gate_up_proj") {
          if (t.shape[1] % 2 != 0)
            return InvalidArgument(
                fmt::format("tensor {}: gate_up rows {} are not even", t.name, t.shape[1]));
          const std::vector<uint64_t> dims = {t.shape[2], t.shape[1] / 2, t.shape[0]};
          add(blk + "ffn_gate_exps.weight", dims);
          add(blk + "ffn_up_exps.weight", dims);
        } else {
          add(blk + "ffn_down_exps.weight", reversed(t.shape));
        }
        continue;
      }
      stacked = blk + std::string(it->second) + ".weight";
      ExpertSlot& slot = experts[{ln->layer, *stacked}];
      if (slot.seen > 0 && slot.shape != t.shape)
        return InvalidArgument(fmt::format("tensor {} differs in shape from the other experts", t.name));
      slot.shape = t.shape;
      ++slot.seen;
      continue;
    }
    const auto mapped = layer_tensor(m, arch);
    if (!mapped) {
      return Unsupported(fmt::format("not planned yet: tensor {} of architecture {} has no GGUF name here",
                                     t.name, out.hf_architecture));
    }
    add(blk + std::string(*mapped) + (ln->suffix.empty() ? std::string(".weight") : ln->suffix),
        reversed(t.shape));
  }
  for (const auto& [key, slot] : experts) {
    if (slot.seen != h.n_expert) {
      return InvalidArgument(fmt::format("{}: {} experts found, config.json has num_experts {}", key.second,
                                         slot.seen, h.n_expert));
    }
    std::vector<uint64_t> dims = reversed(slot.shape);
    dims.push_back(slot.seen);
    add(key.second, dims);
  }
  // Llama 3's frequency factors (LlamaModel.generate_extra_tensors).
  if (arch == "llama" && is_llama3_rope(cfg)) add("rope_freqs.weight", {head_dim / 2});

  // The vocabulary: token_embd's rows (the converter pads the tokenizer to config.json's vocab_size).
  const auto embd = std::find_if(out.tensors.begin(), out.tensors.end(),
                                 [](const auto& t) { return t.name == "token_embd.weight"; });
  if (embd == out.tensors.end()) return InvalidArgument("the checkpoint has no model.embed_tokens.weight");
  if (embd->dims.size() != 2 || embd->dims[0] != h.n_embd) {
    return InvalidArgument(fmt::format("model.embed_tokens.weight is not [vocab, hidden_size {}]", h.n_embd));
  }
  h.n_vocab = static_cast<uint32_t>(std::min<uint64_t>(embd->dims[1], INT32_MAX));
  if (arch == "gemma3") {
    out.notes.push_back(
        "gemma3: the converter trims token_embd to the tokenizer's size, which the headers do not state; "
        "planned at config.json's vocab_size");
  }
  // Shapes llama.cpp checks at load: q/k/v against heads and head width.
  for (const auto& t : out.tensors) {
    const auto il = model::gguf_tensor_layer(t.name);
    if (!il || t.dims.size() != 2) continue;
    const auto check = [&](std::string_view proj, uint64_t rows) -> Status {
      if (t.name != fmt::format("blk.{}.{}.weight", *il, proj)) return Status::Ok();
      if (t.dims[0] == h.n_embd && t.dims[1] == rows) return Status::Ok();
      return InvalidArgument(
          fmt::format("{} is {} x {} but config.json (hidden_size {}, {} heads, {} KV heads, head_dim {}) "
                      "makes it {} x {}",
                      t.name, t.dims[1], t.dims[0], h.n_embd, n_head, n_head_kv, head_dim, rows, h.n_embd));
    };
    GANTRY_RETURN_IF_ERROR(check("attn_q", uint64_t{n_head} * head_dim));
    GANTRY_RETURN_IF_ERROR(check("attn_k", uint64_t{n_head_kv} * head_dim));
    GANTRY_RETURN_IF_ERROR(check("attn_v", uint64_t{n_head_kv} * head_dim));
  }
  return out;
}

std::vector<model::GgufTensorInfo> checkpoint_gguf_tensors(const ConvertedCheckpoint& c,
                                                           const FileType& type) {
  const auto& h = c.hparams;
  QuantModel qm{h.architecture, h.n_layer, h.n_head.empty() ? 0 : h.n_head[0],
                h.n_head_kv.empty() ? 0 : h.n_head_kv[0], h.n_expert};
  return quantised_tensors(qm, type, c.tensors);
}

Result<ModelProfile> profile_checkpoint(const ConvertedCheckpoint& c, const FileType& type,
                                        std::string name) {
  const auto tensors = checkpoint_gguf_tensors(c, type);
  uint64_t data_bytes = 0;
  for (const auto& t : tensors) data_bytes = std::max(data_bytes, t.offset + t.size_bytes);
  return profile_from_tensors(c.hparams, c.sliding_window, tensors, std::move(name), data_bytes);
}

uint64_t checkpoint_weight_bytes(const std::vector<CheckpointTensor>& tensors, const FileType& type) {
  const auto traits = *model::ggml_type_traits(static_cast<uint32_t>(type.default_type));
  const double bpw = 8.0 * traits.type_size / traits.block_size;
  double total = 0;
  for (const auto& t : tensors) {
    uint64_t n = 1;
    for (uint64_t d : t.shape) n *= d;
    const bool matrix = t.shape.size() >= 2 && t.name.size() > 7 &&
                        t.name.compare(t.name.size() - 7, 7, ".weight") == 0 &&
                        t.name.find("norm") == std::string::npos;
    total += matrix ? static_cast<double>(n) * bpw / 8.0 : static_cast<double>(n) * 4.0;
  }
  return static_cast<uint64_t>(total);
}

}  // namespace gantry::plan
