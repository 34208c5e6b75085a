// A port of the type choice in llama.cpp's src/llama-quant.cpp (commit de3ff815): tensor_allows_quantization,
// tensor_get_category, llama_tensor_get_type(_impl) and tensor_type_fallback, restricted to the file types in
// file_types() and to quantisation without an importance matrix. Names and branches follow the original so
// that a diff against a newer llama.cpp is easy to read.
#include "gantry/plan/quantiser.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

namespace gantry::plan {
namespace {

using model::GgmlType;

// llama_ftype values (include/llama.h).
enum Ftype : uint32_t {
  kAllF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ2_K = 10,
  kQ3_K_S = 11,
  kQ3_K_M = 12,
  kQ3_K_L = 13,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kIQ4_NL = 25,
  kIQ4_XS = 30,
  kBF16 = 32,
};

enum class Category {
  kTokenEmbd,
  kAttentionQ,
  kAttentionV,
  kAttentionK,
  kAttentionQkv,
  kAttentionKvB,
  kAttentionOutput,
  kFfnUp,
  kFfnGate,
  kFfnDown,
  kOutput,
  kOther
};

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

Category category_of(const std::string& name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::kTokenEmbd;
  if (contains(name, "attn_qkv.weight")) return Category::kAttentionQkv;
  if (contains(name, "attn_kv_b.weight")) return Category::kAttentionKvB;
  if (contains(name, "attn_v.weight")) return Category::kAttentionV;
  if (contains(name, "attn_k.weight")) return Category::kAttentionK;
  if (contains(name, "attn_q.weight")) return Category::kAttentionQ;
  if (contains(name, "attn_output.weight")) return Category::kAttentionOutput;
  if (contains(name, "ffn_up")) return Category::kFfnUp;
  if (contains(name, "ffn_gate")) return Category::kFfnGate;
  if (contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

bool is_attn_v(Category c) {
  return c == Category::kAttentionV || c == Category::kAttentionQkv || c == Category::kAttentionKvB;
}

// ggml_n_dims: the dimensions up to the last one above 1 (at least 1).
size_t n_dims(const std::vector<uint64_t>& dims) {
  size_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] > 1) n = i + 1;
  return n;
}

bool allows_quantization(const model::GgufTensorInfo& t) {
  if (n_dims(t.dims) < 2) return false;
  const std::string& name = t.name;
  bool q = name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0;
  q = q && !contains(name, "_norm.weight");
  q = q && !contains(name, "ffn_gate_inp.weight");
  q = q && !contains(name, "ffn_gate_tid2eid.weight");
  for (const char* never : {"altup",
                            "laurel",
                            "per_layer_model_proj",
                            "ssm_conv1d",
                            "shortconv.conv.weight",
                            "indexer.k_proj.weight",
                            "indexer.q_proj.weight",
                            "time_mix_first.weight",
                            "time_mix_w0.weight",
                            "time_mix_w1.weight",
                            "time_mix_w2.weight",
                            "time_mix_v0.weight",
                            "time_mix_v1.weight",
                            "time_mix_v2.weight",
                            "time_mix_a0.weight",
                            "time_mix_a1.weight",
                            "time_mix_a2.weight",
                            "time_mix_g1.weight",
                            "time_mix_g2.weight",
                            "time_mix_decay_w1.weight",
                            "time_mix_decay_w2.weight",
                            "time_mix_lerp_fused.weight",
                            "attn_rel_b.weight",
                            ".position_embd",
                            "sam.pos_embd",
                            "sam.neck.",
                            "sam.net_",
                            ".rel_pos",
                            ".patch_embd",
                            ".patch_merger",
                            "a.rvq.codebook",
                            "mm.a.code_embd"}) {
    q = q && !contains(name, never);
  }
  q = q && name != "position_embd.weight" && name != "token_types.weight";
  return q;
}

model::GgmlTypeTraits traits(GgmlType t) { return *model::ggml_type_traits(static_cast<uint32_t>(t)); }
uint32_t block(GgmlType t) { return traits(t).block_size; }
bool is_quantized(GgmlType t) { return block(t) > 1; }

// "blk.N." -> N, else -1 (llama_model_loader's weight_name_comparer reads it with sscanf).
int layer_of(const std::string& name) {
  int il = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &il) != 1) return -1;
  return il;
}

struct State {
  const QuantModel& model;
  uint32_t ftype;
  int n_attention_wv = 0, i_attention_wv = 0;
  int n_ffn_down = 0, i_ffn_down = 0, n_ffn_gate = 0, i_ffn_gate = 0, n_ffn_up = 0, i_ffn_up = 0;
  bool has_tied_embeddings = true;
  uint32_t n_gqa() const { return model.n_head_kv > 0 ? model.n_head / model.n_head_kv : 0; }
  bool is_70b() const {
    return (model.architecture == "llama" && model.n_layer == 80 && model.n_head != model.n_head_kv) ||
           (model.architecture == "qwen2" && model.n_layer == 80);
  }
};

bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

GgmlType get_type_impl(State& qs, GgmlType new_type, const model::GgufTensorInfo& t, Category category) {
  const uint32_t ftype = qs.ftype;
  const uint32_t n_expert = std::max(1u, qs.model.n_expert);
  // With experts, the layer is read from the name (llama.cpp's layer_info); else it is the running count.
  auto layer_info = [&](int i_layer, int n_layer) {
    if (n_expert > 1) i_layer = std::max(0, layer_of(t.name));
    return std::make_pair(i_layer, n_layer);
  };
  if (category == Category::kOutput || (qs.has_tied_embeddings && category == Category::kTokenEmbd)) {
    const uint64_t nx = t.dims.empty() ? 0 : t.dims[0];
    if (nx % block(new_type) != 0) {
      new_type = GgmlType::kQ8_0;
    } else if (new_type != GgmlType::kQ8_0) {
      new_type = GgmlType::kQ6_K;
    }
  } else if (category == Category::kTokenEmbd) {
    // token_embedding_type is not set; the IQ1/IQ2/IQ3/TQ/Q2_0 branches are for file types not planned.
  } else if (is_attn_v(category)) {
    if (ftype == kQ2_K) {
      new_type = qs.n_gqa() >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
    } else if (ftype == kQ3_K_M) {
      new_type = qs.i_attention_wv < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    } else if (ftype == kQ3_K_L) {
      new_type = GgmlType::kQ5_K;
    } else if ((ftype == kIQ4_NL || ftype == kIQ4_XS) && qs.n_gqa() >= 4) {
      new_type = GgmlType::kQ5_K;
    } else if ((ftype == kQ4_K_M || ftype == kQ5_K_M) &&
               use_more_bits(qs.i_attention_wv, qs.n_attention_wv)) {
      new_type = GgmlType::kQ6_K;
    } else if (ftype == kQ4_K_S && qs.i_attention_wv < 4) {
      new_type = GgmlType::kQ5_K;
    }
    if (qs.is_70b() && (new_type == GgmlType::kQ3_K || new_type == GgmlType::kQ4_K))
      new_type = GgmlType::kQ5_K;
    if (qs.model.n_expert == 8) new_type = GgmlType::kQ8_0;
    ++qs.i_attention_wv;
  } else if (category == Category::kAttentionK) {
    if (qs.model.n_expert == 8) new_type = GgmlType::kQ8_0;
  } else if (category == Category::kAttentionQ) {
    // only IQ3_XS / IQ3_XXS change it
  } else if (category == Category::kFfnDown) {
    const auto [i_layer, n_layer] = layer_info(qs.i_ffn_down, qs.n_ffn_down);
    if (ftype == kQ2_K) {
      new_type = GgmlType::kQ3_K;
    } else if (ftype == kQ3_K_M) {
      new_type = i_layer < n_layer / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;  // arch != falcon
    } else if (ftype == kQ3_K_L) {
      new_type = GgmlType::kQ5_K;
    } else if (ftype == kQ4_K_M) {
      if (use_more_bits(i_layer, n_layer)) new_type = GgmlType::kQ6_K;
    } else if (i_layer < n_layer / 8 && (ftype == kIQ4_NL || ftype == kIQ4_XS)) {
      new_type = GgmlType::kQ5_K;
    } else if (ftype == kQ5_K_M && use_more_bits(i_layer, n_layer)) {
      new_type = GgmlType::kQ6_K;
    } else if (ftype == kQ4_K_S && i_layer < n_layer / 8) {
      new_type = GgmlType::kQ5_K;
    }
    ++qs.i_ffn_down;
  } else if (category == Category::kAttentionOutput) {
    if (qs.model.n_expert == 8) {
      if (ftype == kQ2_K || ftype == kQ3_K_S || ftype == kQ3_K_M || ftype == kIQ4_NL || ftype == kQ4_K_S ||
          ftype == kQ4_K_M || ftype == kIQ4_XS) {
        new_type = GgmlType::kQ5_K;
      }
    } else {
      if (ftype == kQ2_K) {
        new_type = GgmlType::kQ3_K;
      } else if (ftype == kQ3_K_M) {
        new_type = GgmlType::kQ4_K;
      } else if (ftype == kQ3_K_L) {
        new_type = GgmlType::kQ5_K;
      }
    }
  } else if (category == Category::kAttentionQkv) {
    if (ftype == kQ3_K_M || ftype == kQ3_K_L) {
      new_type = GgmlType::kQ4_K;
    } else if (ftype == kQ4_K_M) {
      new_type = GgmlType::kQ5_K;
    } else if (ftype == kQ5_K_M) {
      new_type = GgmlType::kQ6_K;
    }
  } else if (category == Category::kFfnGate) {
    ++qs.i_ffn_gate;  // only IQ3_XS changes it
  } else if (category == Category::kFfnUp) {
    ++qs.i_ffn_up;
  }
  return new_type;
}

// tensor_type_fallback: a type whose block does not divide the row.
GgmlType fallback(const model::GgufTensorInfo& t, GgmlType target) {
  const uint64_t ncols = t.dims.empty() ? 0 : t.dims[0];
  if (ncols % block(target) == 0) return target;
  GgmlType r = target;
  switch (target) {
    case GgmlType::kIQ1_S:
    case GgmlType::kIQ1_M:
    case GgmlType::kIQ2_XXS:
    case GgmlType::kIQ2_XS:
    case GgmlType::kIQ2_S:
    case GgmlType::kIQ3_XXS:
    case GgmlType::kIQ3_S:
    case GgmlType::kIQ4_XS:
      r = GgmlType::kIQ4_NL;
      break;
    case GgmlType::kQ2_0:
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kTQ1_0:
    case GgmlType::kTQ2_0:
      r = GgmlType::kQ4_0;
      break;
    case GgmlType::kQ4_K:
      r = GgmlType::kQ5_0;
      break;
    case GgmlType::kQ5_K:
      r = GgmlType::kQ5_1;
      break;
    case GgmlType::kQ6_K:
      r = GgmlType::kQ8_0;
      break;
    default:
      break;  // a 32-block type: the check below turns it into f16
  }
  if (ncols % block(r) != 0) r = GgmlType::kF16;
  return r;
}

}  // namespace

const std::vector<FileType>& file_types() {
  static const std::vector<FileType> kTypes = {
      {"f32", kAllF32, GgmlType::kF32},       {"bf16", kBF16, GgmlType::kBF16},
      {"f16", kF16, GgmlType::kF16},          {"q8_0", kQ8_0, GgmlType::kQ8_0},
      {"q6_k", kQ6_K, GgmlType::kQ6_K},       {"q5_1", kQ5_1, GgmlType::kQ5_1},
      {"q5_k_m", kQ5_K_M, GgmlType::kQ5_K},   {"q5_k_s", kQ5_K_S, GgmlType::kQ5_K},
      {"q5_0", kQ5_0, GgmlType::kQ5_0},       {"q4_1", kQ4_1, GgmlType::kQ4_1},
      {"q4_k_m", kQ4_K_M, GgmlType::kQ4_K},   {"q4_k_s", kQ4_K_S, GgmlType::kQ4_K},
      {"iq4_nl", kIQ4_NL, GgmlType::kIQ4_NL}, {"q4_0", kQ4_0, GgmlType::kQ4_0},
      {"iq4_xs", kIQ4_XS, GgmlType::kIQ4_XS}, {"q3_k_l", kQ3_K_L, GgmlType::kQ3_K},
      {"q3_k_m", kQ3_K_M, GgmlType::kQ3_K},   {"q3_k_s", kQ3_K_S, GgmlType::kQ3_K},
      {"q2_k", kQ2_K, GgmlType::kQ2_K},
  };
  return kTypes;
}

std::optional<FileType> file_type_by_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const auto& t : file_types())
    if (t.name == lower) return t;
  return std::nullopt;
}

std::string file_type_names() {
  std::vector<std::string_view> names;
  for (const auto& t : file_types()) names.push_back(t.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

uint64_t ggml_tensor_bytes(const model::GgmlTypeTraits& type, const std::vector<uint64_t>& dims) {
  if (dims.empty()) return 0;
  uint64_t rows = 1;
  for (size_t i = 1; i < dims.size(); ++i) rows *= dims[i];
  return rows * model::ggml_row_bytes(type, dims[0]);
}

std::vector<model::GgufTensorInfo> quantised_tensors(const QuantModel& model, const FileType& type,
                                                     std::vector<model::GgufTensorInfo> tensors,
                                                     uint32_t alignment) {
  // llama_model_loader::weights_map order.
  std::stable_sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
    const int la = layer_of(a.name), lb = layer_of(b.name);
    if (la != lb) return la < lb;
    return a.name < b.name;
  });
  State qs{model, type.llama_ftype};
  for (const auto& t : tensors) {
    const Category c = category_of(t.name);
    if (is_attn_v(c)) ++qs.n_attention_wv;
    if (c == Category::kOutput) qs.has_tied_embeddings = false;
  }
  qs.n_ffn_down = qs.n_ffn_gate = qs.n_ffn_up = static_cast<int>(model.n_layer);

  uint64_t offset = 0;
  const uint64_t align = std::max<uint32_t>(alignment, 1);
  for (auto& t : tensors) {
    GgmlType new_type = t.type.type;
    if (allows_quantization(t)) {
      new_type = type.default_type;
      if (is_quantized(new_type)) {
        new_type = get_type_impl(qs, new_type, t, category_of(t.name));
        new_type = fallback(t, new_type);
      }
    }
    t.type = traits(new_type);
    t.dims.resize(n_dims(t.dims));  // gguf_add_tensor writes ggml_n_dims dimensions: trailing 1s go
    t.size_bytes = ggml_tensor_bytes(t.type, t.dims);
    t.offset = offset;
    offset += (t.size_bytes + align - 1) / align * align;
  }
  return tensors;
}

}  // namespace gantry::plan
