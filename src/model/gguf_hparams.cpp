#include "gantry/model/gguf_hparams.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

namespace gantry::model {
namespace {

class Reader {
 public:
  explicit Reader(const GgufFile& f) : f_(f) {}

  Status bad(std::string_view key, std::string_view why) const {
    return InvalidArgument(
        fmt::format("GGUF model {}: {} {}; the file is corrupt or was written for a "
                    "different llama.cpp (llama.cpp itself would abort on it)",
                    f_.label(), key, why));
  }

  // An unsigned count in [lo, hi]; nullopt when absent (a Status when present but bad).
  Result<std::optional<uint32_t>> count(const std::string& key, uint64_t lo, uint64_t hi) const {
    const GgufValue* v = f_.find(key);
    if (v == nullptr) return std::optional<uint32_t>();
    if (v->as_array()) return bad(key, "is an array where a number belongs");
    const auto u = v->as_uint();
    if (!u) return bad(key, fmt::format("is {}, not a non-negative integer", v->to_string()));
    if (*u < lo || *u > hi) return bad(key, fmt::format("is {}, outside {}..{}", *u, lo, hi));
    return std::optional<uint32_t>(static_cast<uint32_t>(*u));
  }

  Result<uint32_t> required_count(const std::string& key, uint64_t lo, uint64_t hi) const {
    GANTRY_ASSIGN_OR_RETURN(auto v, count(key, lo, hi));
    if (!v) return bad(key, "is missing");
    return *v;
  }

  // A per-layer key: a scalar for every layer or an array of n_layer entries, each in [lo, hi].
  Result<std::optional<std::vector<uint32_t>>> per_layer(const std::string& key, uint32_t n_layer,
                                                         uint64_t lo, uint64_t hi) const {
    const GgufValue* v = f_.find(key);
    if (v == nullptr) return std::optional<std::vector<uint32_t>>();
    std::vector<uint32_t> out;
    if (const GgufArray* a = v->as_array()) {
      if (a->size() != n_layer)
        return bad(key, fmt::format("has {} entries for {} layers", a->size(), n_layer));
      for (uint64_t i = 0; i < a->size(); ++i) {
        const auto u = a->at(i).as_uint();
        if (!u || *u < lo || *u > hi) {
          return bad(key, fmt::format("entry {} is {}, outside {}..{}", i, a->at(i).to_string(), lo, hi));
        }
        out.push_back(static_cast<uint32_t>(*u));
      }
    } else {
      GANTRY_ASSIGN_OR_RETURN(uint32_t u, required_count(key, lo, hi));
      out.assign(n_layer, u);
    }
    return std::optional<std::vector<uint32_t>>(std::move(out));
  }

  // A float that, when present, is finite and in (lo, hi).
  Status positive_float(const std::string& key, double lo, double hi) const {
    const GgufValue* v = f_.find(key);
    if (v == nullptr) return Status::Ok();
    const auto d = v->as_float();
    if (!d || !std::isfinite(*d) || *d <= lo || *d >= hi) {
      return bad(key, fmt::format("is {}, not a finite number in ({}, {})", v->to_string(), lo, hi));
    }
    return Status::Ok();
  }

  // A 2-D tensor, when present, has shape [d0, d1].
  Status shape(const std::string& name, uint64_t d0, uint64_t d1, std::string_view from) const {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (t == nullptr) return Status::Ok();
    if (t->dims.size() < 2 || t->dims[0] != d0 || t->dims[1] != d1) {
      std::string got;
      for (size_t i = 0; i < t->dims.size(); ++i) got += (i ? " x " : "") + std::to_string(t->dims[i]);
      return InvalidArgument(
          fmt::format("GGUF model {}: tensor {} is {} but the hyperparameters ({}) make "
                      "it {} x {}; the file is corrupt",
                      f_.label(), name, got, from, d0, d1));
    }
    return Status::Ok();
  }

  std::string key(std::string_view suffix) const { return f_.arch_key(suffix); }
  const GgufFile& file() const { return f_; }

 private:
  const GgufFile& f_;
};

Status check_experts(const Reader& r, uint32_t n_layer, GgufHyperparameters& h) {
  GANTRY_ASSIGN_OR_RETURN(auto n_expert, r.count(r.key("expert_count"), 0, kGgufMaxExperts));
  h.n_expert = n_expert.value_or(0);
  GANTRY_ASSIGN_OR_RETURN(auto used, r.per_layer(r.key("expert_used_count"), n_layer, 0, kGgufMaxExperts));
  const uint32_t used_max = used ? *std::max_element(used->begin(), used->end()) : 0;
  h.n_expert_used = used_max;
  GANTRY_ASSIGN_OR_RETURN(auto groups, r.count(r.key("expert_group_count"), 0, kGgufMaxExperts));
  GANTRY_ASSIGN_OR_RETURN(auto group_used, r.count(r.key("expert_group_used_count"), 0, kGgufMaxExperts));
  const uint32_t g = groups.value_or(0), gu = group_used.value_or(0);
  if (h.n_expert == 0) {
    if (used_max != 0) return r.bad(r.key("expert_used_count"), "is set but the model has no experts");
    if (g != 0) return r.bad(r.key("expert_group_count"), "is set but the model has no experts");
    return Status::Ok();
  }
  if (used_max == 0 || used_max > h.n_expert) {
    return r.bad(r.key("expert_used_count"),
                 fmt::format("is {}; it must be 1..{} (expert_count)", used_max, h.n_expert));
  }
  if (g >= h.n_expert) {
    return r.bad(r.key("expert_group_count"), fmt::format("is {}, not below expert_count {}", g, h.n_expert));
  }
  if (g > 1 && (h.n_expert % g != 0 || gu == 0 || gu >= g)) {
    return r.bad(
        r.key("expert_group_count"),
        fmt::format("{} with {} used does not divide {} experts into usable groups", g, gu, h.n_expert));
  }
  return Status::Ok();
}

Status check_rope(const Reader& r) {
  if (const GgufValue* v = r.file().find(r.key("rope.scaling.type"))) {
    const std::string* s = v->as_string();
    static constexpr std::string_view kTypes[] = {"none", "linear", "yarn", "longrope"};
    if (s == nullptr || std::find(std::begin(kTypes), std::end(kTypes), *s) == std::end(kTypes)) {
      return r.bad(r.key("rope.scaling.type"),
                   fmt::format("is {}, not one of none, linear, yarn, longrope", v->to_string()));
    }
  }
  GANTRY_RETURN_IF_ERROR(r.positive_float(r.key("rope.freq_base"), 0, 1e30));
  for (const char* k : {"rope.scaling.factor", "rope.scale_linear"}) {
    if (const GgufValue* v = r.file().find(r.key(k))) {
      const auto d = v->as_float();
      if (!d || !std::isfinite(*d) || *d < 0) return r.bad(r.key(k), fmt::format("is {}", v->to_string()));
    }
  }
  return Status::Ok();
}

uint32_t vocab_size(const GgufFile& f) {
  if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens"); tokens && tokens->as_array()) {
    return static_cast<uint32_t>(std::min<uint64_t>(tokens->as_array()->size(), UINT32_MAX));
  }
  if (auto v = f.get_uint(f.arch_key("vocab_size")))
    return static_cast<uint32_t>(std::min<uint64_t>(*v, UINT32_MAX));
  if (const auto* embd = f.find_tensor("token_embd.weight"); embd && embd->dims.size() >= 2) {
    return static_cast<uint32_t>(std::min<uint64_t>(embd->dims[1], UINT32_MAX));
  }
  return 0;
}

}  // namespace

Result<GgufHyperparameters> read_hyperparameters(const GgufFile& f) {
  Reader r(f);
  GgufHyperparameters h;
  h.architecture = f.architecture();
  if (h.architecture.empty()) return r.bad("general.architecture", "is missing (or not a string)");

  GANTRY_ASSIGN_OR_RETURN(h.n_layer, r.required_count(r.key("block_count"), 1, kGgufMaxLayers));
  GANTRY_ASSIGN_OR_RETURN(auto nextn, r.count(r.key("nextn_predict_layers"), 0, h.n_layer));
  (void)nextn;
  GANTRY_ASSIGN_OR_RETURN(h.n_embd, r.required_count(r.key("embedding_length"), 1, kGgufMaxEmbedding));
  GANTRY_ASSIGN_OR_RETURN(h.n_ctx_train, r.required_count(r.key("context_length"), 1, UINT32_MAX));
  GANTRY_ASSIGN_OR_RETURN(auto n_swa, r.count(r.key("attention.sliding_window"), 0, UINT32_MAX));
  h.n_swa = n_swa.value_or(0);
  GANTRY_RETURN_IF_ERROR(check_experts(r, h.n_layer, h));

  GANTRY_ASSIGN_OR_RETURN(auto n_head,
                          r.per_layer(r.key("attention.head_count"), h.n_layer, 0, kGgufMaxHeads));
  // Optional, as for llama.cpp: recurrent models (mamba, rwkv) have no attention heads.
  h.n_head = n_head ? std::move(*n_head) : std::vector<uint32_t>(h.n_layer, 0);
  GANTRY_ASSIGN_OR_RETURN(auto n_head_kv,
                          r.per_layer(r.key("attention.head_count_kv"), h.n_layer, 0, kGgufMaxHeads));
  h.n_head_kv = n_head_kv ? std::move(*n_head_kv) : h.n_head;  // no GQA unless stated
  GANTRY_ASSIGN_OR_RETURN(auto n_ff,
                          r.per_layer(r.key("feed_forward_length"), h.n_layer, 0, kGgufMaxFeedForward));
  h.n_ff = n_ff ? std::move(*n_ff) : std::vector<uint32_t>(h.n_layer, 0);

  // Head widths: stated, or n_embd / head_count of layer 0 (as llama.cpp derives them).
  const uint32_t head0 = h.n_head[0];
  const uint32_t derived = head0 > 0 ? h.n_embd / head0 : 0;
  GANTRY_ASSIGN_OR_RETURN(auto k_len, r.count(r.key("attention.key_length"), 0, kGgufMaxHeadWidth));
  GANTRY_ASSIGN_OR_RETURN(auto v_len, r.count(r.key("attention.value_length"), 0, kGgufMaxHeadWidth));
  const uint32_t head_k = k_len.value_or(derived), head_v = v_len.value_or(derived);
  h.n_embd_head_k.assign(h.n_layer, head_k);
  h.n_embd_head_v.assign(h.n_layer, head_v);
  const bool any_heads = std::any_of(h.n_head.begin(), h.n_head.end(), [](uint32_t n) { return n > 0; });
  if (any_heads && (head_k == 0 || head_v == 0)) {
    return r.bad(r.key("attention.head_count"),
                 fmt::format("is {} with embedding_length {}: the head width would be 0", head0, h.n_embd));
  }
  for (uint32_t il = 0; il < h.n_layer; ++il) {
    const uint32_t heads = h.n_head[il], kv = h.n_head_kv[il];
    if (heads > 0 && (kv == 0 || heads % kv != 0)) {
      return r.bad(
          r.key("attention.head_count_kv"),
          fmt::format("is {} in layer {}; it must be at least 1 and divide head_count {}", kv, il, heads));
    }
    if (heads == 0 && kv > heads) {
      return r.bad(r.key("attention.head_count_kv"),
                   fmt::format("is {} in layer {}, which has no attention heads", kv, il));
    }
  }
  for (const char* k : {"attention.layer_norm_rms_epsilon", "attention.layer_norm_epsilon"}) {
    GANTRY_RETURN_IF_ERROR(r.positive_float(r.key(k), 0, 1));
  }
  GANTRY_RETURN_IF_ERROR(check_rope(r));

  h.n_vocab = vocab_size(f);
  if (h.n_vocab > static_cast<uint32_t>(INT32_MAX)) {
    return r.bad("tokenizer.ggml.tokens", fmt::format("holds {} tokens; token ids are 32-bit", h.n_vocab));
  }
  if (h.n_vocab > 0) {
    const std::string from = fmt::format("embedding_length {}, {} tokens", h.n_embd, h.n_vocab);
    GANTRY_RETURN_IF_ERROR(r.shape("token_embd.weight", h.n_embd, h.n_vocab, from));
    GANTRY_RETURN_IF_ERROR(r.shape("output.weight", h.n_embd, h.n_vocab, from));
  }
  for (uint32_t il = 0; il < h.n_layer; ++il) {
    const std::string blk = fmt::format("blk.{}.", il);
    const uint64_t q = uint64_t{h.n_head[il]} * head_k;
    const uint64_t k = uint64_t{h.n_head_kv[il]} * head_k, v = uint64_t{h.n_head_kv[il]} * head_v;
    const std::string from = fmt::format("embedding_length {}, {} heads, {} kv heads, widths {}/{}", h.n_embd,
                                         h.n_head[il], h.n_head_kv[il], head_k, head_v);
    GANTRY_RETURN_IF_ERROR(r.shape(blk + "attn_q.weight", h.n_embd, q, from));
    GANTRY_RETURN_IF_ERROR(r.shape(blk + "attn_k.weight", h.n_embd, k, from));
    GANTRY_RETURN_IF_ERROR(r.shape(blk + "attn_v.weight", h.n_embd, v, from));
  }
  // llama.cpp refuses a file with tensors it does not expect ("wrong number of tensors"); say which one.
  for (const auto& t : f.tensors()) {
    if (auto il = gguf_tensor_layer(t.name); il && *il >= h.n_layer)
      return r.bad(r.key("block_count"),
                   fmt::format("is {} but tensor {} names layer {}", h.n_layer, t.name, *il));
  }
  return h;
}

std::optional<uint32_t> gguf_tensor_layer(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return std::nullopt;
  name.remove_prefix(4);
  uint32_t il = 0;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), il);
  if (ec != std::errc() || ptr == name.data() || ptr == name.data() + name.size() || *ptr != '.')
    return std::nullopt;
  return il;
}

}  // namespace gantry::model
