#include "gantry/model/backend_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "gantry/core/enum_names.h"
#include "gantry/hw/rpc.h"

namespace gantry::model {
namespace {

// ONNX Runtime's numeric levels are aliases.
constexpr auto kOptLevels = enum_names<GraphOptimizationLevel>(
    "graph optimization level", {
                                    {GraphOptimizationLevel::kDisable, "disable"},
                                    {GraphOptimizationLevel::kBasic, "basic"},
                                    {GraphOptimizationLevel::kExtended, "extended"},
                                    {GraphOptimizationLevel::kAll, "all"},
                                    {GraphOptimizationLevel::kDisable, "0"},
                                    {GraphOptimizationLevel::kBasic, "1"},
                                    {GraphOptimizationLevel::kExtended, "2"},
                                    {GraphOptimizationLevel::kAll, "3"},
                                    {GraphOptimizationLevel::kAll, "99"},
                                });

// The integer options and their ranges: the one place they are defined.
struct IntOption {
  std::string_view key;
  std::optional<int> LlamaOptions::*field;
  int lo;
  int hi;
};
constexpr std::array kIntOptions = {
    IntOption{"n_ctx", &LlamaOptions::n_ctx, 0, 1 << 24},
    IntOption{"parallel", &LlamaOptions::parallel, 1, 256},
    IntOption{"n_batch", &LlamaOptions::n_batch, 1, 1 << 20},
    IntOption{"n_ubatch", &LlamaOptions::n_ubatch, 1, 1 << 20},
    IntOption{"n_gpu_layers", &LlamaOptions::n_gpu_layers, -1, 1 << 16},
    IntOption{"max_tokens", &LlamaOptions::max_tokens, 1, 1 << 24},
    IntOption{"draft_max", &LlamaOptions::draft_max, 0, 1024},
    IntOption{"draft_min", &LlamaOptions::draft_min, 0, 1024},
    IntOption{"spec_ngram_size_n", &LlamaOptions::spec_ngram_size_n, 1, 1024},
    IntOption{"spec_ngram_size_m", &LlamaOptions::spec_ngram_size_m, 1, 1024},
    IntOption{"cache_ram", &LlamaOptions::cache_ram, -1, 1 << 24},
    IntOption{"prefill_chunk", &LlamaOptions::prefill_chunk, 1, 1 << 20},
};

// The on/off options.
struct BoolOption {
  std::string_view key;
  std::optional<bool> LlamaOptions::*field;
};
constexpr std::array kBoolOptions = {
    BoolOption{"mmap", &LlamaOptions::mmap},
    BoolOption{"kv_unified", &LlamaOptions::kv_unified},
    BoolOption{"cache_prompt", &LlamaOptions::cache_prompt},
};

constexpr std::array<std::string_view, 26> kKeys = {"n_ctx",
                                                    "parallel",
                                                    "n_batch",
                                                    "n_ubatch",
                                                    "n_gpu_layers",
                                                    "tensor_split",
                                                    "kv_type",
                                                    "flash_attn",
                                                    "mmap",
                                                    "max_tokens",
                                                    "chat_template_file",
                                                    "reasoning_format",
                                                    "pooling",
                                                    "reasoning",
                                                    "draft_model",
                                                    "draft_max",
                                                    "draft_min",
                                                    "draft_p_min",
                                                    "spec_type",
                                                    "spec_ngram_size_n",
                                                    "spec_ngram_size_m",
                                                    "kv_unified",
                                                    "cache_prompt",
                                                    "cache_ram",
                                                    "prefill_chunk",
                                                    "rpc"};

// llama-server's --spec-type names (common/speculative.cpp) that need no draft model, plus "none" and
// "draft-simple" (what a draft model does anyway).
constexpr std::array<std::string_view, 7> kSpecTypes = {
    "none", "draft-simple", "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"};

Status check_spec_type(std::string_view text) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view name = text.substr(start, end - start);
    if (std::find(kSpecTypes.begin(), kSpecTypes.end(), name) == kSpecTypes.end()) {
      return InvalidArgument(
          fmt::format("llama.cpp option spec_type='{}' names an unknown type '{}' (known: {})", text, name,
                      fmt::join(kSpecTypes, ", ")));
    }
    start = end + 1;
  }
  return Status::Ok();
}

Status bad(std::string_view key, std::string_view value, std::string_view what) {
  return InvalidArgument(fmt::format("llama.cpp option {}='{}' {}", key, value, what));
}

Status check_range(const IntOption& opt, int v) {
  if (v < opt.lo || v > opt.hi)
    return bad(opt.key, std::to_string(v), fmt::format("is out of range ({}..{})", opt.lo, opt.hi));
  return Status::Ok();
}

Result<std::vector<float>> parse_split(std::string_view text) {
  std::vector<float> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view part = text.substr(start, end - start);
    float f = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), f);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || !(f >= 0))
      return bad("tensor_split", text, "must be non-negative numbers separated by commas (e.g. 3,1)");
    out.push_back(f);
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string_view graph_optimization_level_name(GraphOptimizationLevel l) { return kOptLevels.name_of(l); }
std::optional<GraphOptimizationLevel> parse_graph_optimization_level(std::string_view text) {
  return kOptLevels.find(text);
}
std::string graph_optimization_level_names() { return kOptLevels.names(/*with_aliases=*/true); }

std::span<const std::string_view> llama_option_keys() { return kKeys; }

Status set_llama_option(LlamaOptions& o, std::string_view key, std::string_view value) {
  for (const auto& opt : kIntOptions) {
    if (opt.key != key) continue;
    int v = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (value.empty() || ec != std::errc() || ptr != value.data() + value.size())
      return bad(key, value, "is not an integer");
    GANTRY_RETURN_IF_ERROR(check_range(opt, v));
    o.*opt.field = v;
    return Status::Ok();
  }
  for (const auto& opt : kBoolOptions) {
    if (opt.key != key) continue;
    if (value == "on" || value == "true")
      o.*opt.field = true;
    else if (value == "off" || value == "false")
      o.*opt.field = false;
    else
      return bad(key, value, "must be on or off");
    return Status::Ok();
  }
  if (key == "kv_type") {
    o.kv_type = parse_kv_type(value);
    if (!o.kv_type) return bad(key, value, fmt::format("is not a KV cache type ({})", kv_type_names()));
  } else if (key == "flash_attn") {
    if (value == "auto")
      o.flash_attn.reset();
    else if (value == "on" || value == "true")
      o.flash_attn = true;
    else if (value == "off" || value == "false")
      o.flash_attn = false;
    else
      return bad(key, value, "must be auto, on or off");
  } else if (key == "tensor_split") {
    GANTRY_ASSIGN_OR_RETURN(o.tensor_split, parse_split(value));
  } else if (key == "chat_template_file") {
    if (value.empty() || value.size() > 4096) return bad(key, value.substr(0, 80), "must be a file path");
    o.chat_template_file = std::string(value);
  } else if (key == "rpc") {
    auto servers = hw::parse_rpc_endpoints(value);
    if (!servers.ok()) return bad(key, value, servers.status().message());
    o.rpc.clear();
    for (const auto& e : *servers) o.rpc.push_back(e.text());
  } else if (key == "reasoning") {
    if (value != "on" && value != "off" && value != "auto") return bad(key, value, "must be on, off or auto");
    o.reasoning = std::string(value);
  } else if (key == "pooling") {
    if (value != "none" && value != "mean" && value != "cls" && value != "last" && value != "rank")
      return bad(key, value, "must be none, mean, cls, last or rank");
    o.pooling = std::string(value);
  } else if (key == "reasoning_format") {
    if (value != "auto" && value != "deepseek" && value != "none") {
      return bad(key, value, "must be auto, deepseek or none");
    }
    o.reasoning_format = std::string(value);
  } else if (key == "draft_model") {
    if (value.empty() || value.size() > 4096) return bad(key, value.substr(0, 80), "must be a file path");
    o.draft_model = std::string(value);
  } else if (key == "draft_p_min") {
    float f = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), f);
    if (value.empty() || ec != std::errc() || ptr != value.data() + value.size() || !(f >= 0 && f <= 1))
      return bad(key, value, "must be a probability in 0..1");
    o.draft_p_min = f;
  } else if (key == "spec_type") {
    GANTRY_RETURN_IF_ERROR(check_spec_type(value));
    o.spec_type = std::string(value);
  } else {
    return InvalidArgument(
        fmt::format("unknown llama.cpp option '{}' (known: {})", key, fmt::join(kKeys, ", ")));
  }
  return Status::Ok();
}

Result<LlamaOptions> parse_llama_options(const std::map<std::string, std::string>& texts) {
  LlamaOptions o;
  for (const auto& [key, value] : texts) GANTRY_RETURN_IF_ERROR(set_llama_option(o, key, value));
  GANTRY_RETURN_IF_ERROR(validate_llama_options(o));
  return o;
}

std::map<std::string, std::string> llama_option_texts(const LlamaOptions& o) {
  std::map<std::string, std::string> out;
  for (const auto& opt : kIntOptions)
    if (const auto& v = o.*opt.field) out.emplace(opt.key, std::to_string(*v));
  if (!o.tensor_split.empty()) out.emplace("tensor_split", fmt::format("{}", fmt::join(o.tensor_split, ",")));
  if (o.kv_type) out.emplace("kv_type", kv_type_name(*o.kv_type));
  if (o.flash_attn) out.emplace("flash_attn", *o.flash_attn ? "on" : "off");
  for (const auto& opt : kBoolOptions)
    if (const auto& v = o.*opt.field) out.emplace(opt.key, *v ? "on" : "off");
  if (o.chat_template_file) out.emplace("chat_template_file", *o.chat_template_file);
  if (o.reasoning_format) out.emplace("reasoning_format", *o.reasoning_format);
  if (o.pooling) out.emplace("pooling", *o.pooling);
  if (o.reasoning) out.emplace("reasoning", *o.reasoning);
  if (o.draft_model) out.emplace("draft_model", *o.draft_model);
  if (o.draft_p_min) out.emplace("draft_p_min", fmt::format("{}", *o.draft_p_min));
  if (o.spec_type) out.emplace("spec_type", *o.spec_type);
  if (!o.rpc.empty()) out.emplace("rpc", fmt::format("{}", fmt::join(o.rpc, ",")));
  return out;
}

Status validate_llama_options(const LlamaOptions& o) {
  for (const auto& opt : kIntOptions)
    if (const auto& v = o.*opt.field) GANTRY_RETURN_IF_ERROR(check_range(opt, *v));
  for (float f : o.tensor_split)
    if (!(f >= 0))
      return bad("tensor_split", fmt::format("{}", fmt::join(o.tensor_split, ",")), "must not be negative");
  const int parallel = o.parallel.value_or(1);
  if (o.n_batch && *o.n_batch < parallel)
    return InvalidArgument(fmt::format(
        "llama.cpp option n_batch={} must be >= parallel ({}): every generating sequence needs a place "
        "in each decode",
        *o.n_batch, parallel));
  if (o.n_ctx && *o.n_ctx > 0 && *o.n_ctx < parallel)
    return InvalidArgument(
        fmt::format("a context of {} cells cannot hold {} parallel sequences", *o.n_ctx, parallel));
  if (o.kv_type && kv_type_quantized(*o.kv_type) && o.flash_attn == false)
    return InvalidArgument(fmt::format(
        "a quantised V cache ({}) needs flash attention: use flash_attn on (or auto) or kv_type f16",
        kv_type_name(*o.kv_type)));
  if (o.draft_p_min && !(*o.draft_p_min >= 0 && *o.draft_p_min <= 1))
    return bad("draft_p_min", fmt::format("{}", *o.draft_p_min), "must be a probability in 0..1");
  if (o.spec_type) GANTRY_RETURN_IF_ERROR(check_spec_type(*o.spec_type));
  if (o.draft_model && o.draft_model->empty()) return bad("draft_model", "", "must be a file path");
  if (o.draft_min && o.draft_max && *o.draft_min > *o.draft_max)
    return InvalidArgument(
        fmt::format("llama.cpp option draft_min={} must be <= draft_max ({})", *o.draft_min, *o.draft_max));
  return Status::Ok();
}

void overlay(LlamaOptions& base, const LlamaOptions& over) {
  for (const auto& opt : kIntOptions)
    if (over.*opt.field) base.*opt.field = over.*opt.field;
  if (!over.tensor_split.empty()) base.tensor_split = over.tensor_split;
  if (over.kv_type) base.kv_type = over.kv_type;
  if (over.flash_attn) base.flash_attn = over.flash_attn;
  for (const auto& opt : kBoolOptions)
    if (over.*opt.field) base.*opt.field = over.*opt.field;
  if (over.chat_template_file) base.chat_template_file = over.chat_template_file;
  if (over.reasoning_format) base.reasoning_format = over.reasoning_format;
  if (over.pooling) base.pooling = over.pooling;
  if (over.reasoning) base.reasoning = over.reasoning;
  if (over.draft_model) base.draft_model = over.draft_model;
  if (over.draft_p_min) base.draft_p_min = over.draft_p_min;
  if (over.spec_type) base.spec_type = over.spec_type;
  if (!over.rpc.empty()) base.rpc = over.rpc;
}

}  // namespace gantry::model
