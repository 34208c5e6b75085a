#include "cli/plan_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>

#include "gantry/plan/plan_json.h"
#include "gantry/plan/speed.h"
#include "gantry/weights/loader.h"
#include "gantry/weights/source.h"

namespace gantry::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool is_url(const std::string& s) { return s.rfind("http://", 0) == 0 || s.rfind("https://", 0) == 0; }

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "https://huggingface.co/ORG/NAME[/]" -> ".../ORG/NAME/resolve/main/"; other URLs unchanged.
std::string hub_url(std::string url) {
  constexpr std::string_view kHub = "https://huggingface.co/";
  if (url.rfind(kHub, 0) != 0) return url;
  std::string rest = url.substr(kHub.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (std::count(rest.begin(), rest.end(), '/') != 1) return url;
  return std::string(kHub) + rest + "/resolve/main/";
}

// The whole of a small remote or local file (config.json), read through a WeightSource so it is counted.
Result<std::string> read_small(const std::string& spec) {
  constexpr uint64_t kMax = 16ull << 20;
  GANTRY_ASSIGN_OR_RETURN(
      auto src, is_url(spec) ? weights::WeightSource::url(spec) : weights::WeightSource::file(spec));
  if (src.size() > kMax) return InvalidArgument(spec + ": larger than 16 MiB; not a config.json");
  GANTRY_ASSIGN_OR_RETURN(auto bytes, src.read(0, src.size()));
  return std::string(reinterpret_cast<const char*>(bytes.data.data()), bytes.data.size());
}

void fill_tensors(const weights::WeightMetadata& meta, CheckpointRead& r) {
  for (const auto& t : meta.tensors) {
    plan::CheckpointTensor ct;
    ct.name = t.name;
    if (const auto* d = std::get_if<DType>(&t.type)) ct.dtype = *d;
    for (int64_t d : t.shape.dims()) ct.shape.push_back(static_cast<uint64_t>(d));
    ct.bytes = t.bytes;
    r.tensors.push_back(std::move(ct));
  }
  r.files = std::max<size_t>(1, meta.shards.size());
  r.stored_bytes = meta.total_bytes;
}

// --- --params ---------------------------------------------------------------------------------------

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

// --- printing ----------------------------------------------------------------------------------------

std::string describe(const CheckpointRead& r, const plan::ConvertedCheckpoint* c) {
  std::string out;
  if (!r.assumptions.empty()) {
    out += fmt::format("model: ESTIMATE for {} parameters (no checkpoint read)\n", r.label);
    for (const auto& a : r.assumptions) out += "assumes: " + a + "\n";
  } else {
    out += fmt::format("checkpoint: {}\n", r.label);
    out += fmt::format(
        "read {} (config.json and the safetensors headers only) of {} of tensors in {} file{}\n",
        plan::human_bytes(r.bytes_read), plan::human_bytes(r.stored_bytes), r.files, r.files == 1 ? "" : "s");
  }
  if (c != nullptr) {
    const auto& h = c->hparams;
    out += fmt::format(
        "converts to: {} -> llama.cpp {}, {} layers, embd {}, {} heads ({} KV, width {}), ff {}, vocab {}, "
        "training context {}{}{}; converted as {}\n",
        c->hf_architecture, h.architecture, h.n_layer, h.n_embd, h.n_head[0], h.n_head_kv[0],
        h.n_embd_head_k[0], h.n_ff[0], h.n_vocab, h.n_ctx_train,
        h.n_expert ? fmt::format(", {} experts", h.n_expert) : "",
        h.n_swa ? fmt::format(", sliding window {}", h.n_swa) : "", c->converted_type.name);
    for (const auto& n : c->notes) out += "note: " + n + "\n";
  }
  return out;
}

json describe_json(const CheckpointRead& r, const plan::ConvertedCheckpoint* c) {
  json j = {{"source", r.label}, {"estimate", !r.assumptions.empty()}, {"assumptions", r.assumptions},
            {"files", r.files},  {"stored_bytes", r.stored_bytes},     {"bytes_read", r.bytes_read}};
  if (c != nullptr) {
    const auto& h = c->hparams;
    j["hf_architecture"] = c->hf_architecture;
    j["architecture"] = h.architecture;
    j["layers"] = h.n_layer;
    j["embd"] = h.n_embd;
    j["heads"] = h.n_head[0];
    j["kv_heads"] = h.n_head_kv[0];
    j["head_width"] = h.n_embd_head_k[0];
    j["feed_forward"] = h.n_ff[0];
    j["vocab"] = h.n_vocab;
    j["training_context"] = h.n_ctx_train;
    j["experts"] = h.n_expert;
    j["sliding_window"] = h.n_swa;
    j["converted_type"] = std::string(c->converted_type.name);
    j["notes"] = c->notes;
  }
  return j;
}

// The quantisations `--quant` asks for, largest first.
Result<std::vector<plan::FileType>> requested_types(const std::string& quant,
                                                    const plan::ConvertedCheckpoint* c) {
  std::string q = quant;
  std::transform(q.begin(), q.end(), q.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (q.empty()) {
    if (c != nullptr) return std::vector<plan::FileType>{c->converted_type};
    return std::vector<plan::FileType>{*plan::file_type_by_name("bf16")};
  }
  if (q == "all") {
    std::vector<plan::FileType> all;
    for (const auto& t : plan::file_types())
      if (t.name != "f32") all.push_back(t);
    return all;
  }
  if (auto t = plan::file_type_by_name(q)) return std::vector<plan::FileType>{*t};
  return InvalidArgument(
      fmt::format("--quant {}: not a type llama-quantize writes without an importance "
                  "matrix ({}, or all)",
                  quant, plan::file_type_names()));
}

int not_planned(const CheckpointRead& r, const Status& why, const CheckpointPlanRequest& q, std::ostream& out,
                std::ostream& err) {
  auto types = requested_types(q.quant, nullptr);
  if (!types.ok()) {
    err << "gantry: plan: " << types.status().message() << "\n";
    return 2;
  }
  json weights = json::object();
  for (const auto& t : *types) weights[std::string(t.name)] = plan::checkpoint_weight_bytes(r.tensors, t);
  if (q.json) {
    out << json{{"checkpoint", describe_json(r, nullptr)},
                {"planned", false},
                {"reason", why.message()},
                {"weights_alone", weights}}
               .dump(2)
        << "\n";
    return 0;
  }
  out << describe(r, nullptr) << why.message() << "\n";
  out << "weights alone (every matrix at the type's nominal bits per weight; no KV cache or buffers):\n";
  for (const auto& t : *types)
    out << fmt::format("  {:<8} {}\n", t.name,
                       plan::human_bytes(weights[std::string(t.name)].get<uint64_t>()));
  return 0;
}

// A short name for what was planned: the checkpoint's directory ("Qwen2.5-7B-Instruct"), also for an index,
// a model.safetensors or a URL inside it.
std::string model_name(const std::string& spec) {
  std::string s = spec.substr(0, spec.find_first_of("?#"));
  while (!s.empty() && s.back() == '/') s.pop_back();
  std::vector<std::string> parts;
  for (size_t at = 0; at <= s.size();) {
    const size_t slash = s.find('/', at);
    const std::string part = s.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
    if (!part.empty() && part != "." && part != "resolve" && part != "main") parts.push_back(part);
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  while (!parts.empty() && (ends_with(parts.back(), ".json") || ends_with(parts.back(), ".safetensors")))
    parts.pop_back();
  return parts.empty() ? spec : parts.back();
}

struct Candidate {
  plan::FileType type;
  plan::ModelProfile profile;
  plan::Plan plan;
  uint32_t max_context = 0;
};

}  // namespace

bool is_checkpoint_spec(const std::string& spec) {
  if (is_url(spec)) return true;
  if (ends_with(spec, ".json") || ends_with(spec, ".safetensors")) return true;
  std::error_code ec;
  return fs::is_directory(spec, ec);
}

Result<CheckpointRead> read_checkpoint(const std::string& spec) {
  const uint64_t before = weights::WeightSource::total_bytes_read();
  CheckpointRead r;
  r.label = spec;
  uint64_t uncounted = 0;  // config.json of a local directory, which the loader reads without a source
  std::optional<weights::WeightSource> src;
  std::string config_at;  // where config.json is, unless the loader read it with the directory
  if (is_url(spec)) {
    std::string url = hub_url(spec);
    const std::string base = url.substr(0, url.find_first_of("?#"));
    if (!base.empty() && base.back() == '/') {
      auto index = weights::WeightSource::url(base + "model.safetensors.index.json");
      if (index.ok()) {
        src = *index;
      } else {
        auto single = weights::WeightSource::url(base + "model.safetensors");
        if (!single.ok()) {
          return NotFound(
              fmt::format("{}: neither model.safetensors.index.json ({}) nor model.safetensors ({})", spec,
                          index.status().message(), single.status().message()));
        }
        src = *single;
      }
      config_at = base + "config.json";
    } else {
      GANTRY_ASSIGN_OR_RETURN(src, weights::WeightSource::url(url));
      config_at = base.substr(0, base.rfind('/') + 1) + "config.json";
    }
  } else {
    GANTRY_ASSIGN_OR_RETURN(src, weights::WeightSource::open(spec));
    if (src->kind() != weights::WeightSource::Kind::kDirectory) {
      config_at = (fs::path(spec).parent_path() / "config.json").string();
      if (fs::path(spec).parent_path().empty()) config_at = "config.json";
    }
  }
  GANTRY_ASSIGN_OR_RETURN(auto meta, weights::metadata(*src));
  if (meta.format != weights::WeightFormat::kSafetensors &&
      meta.format != weights::WeightFormat::kSafetensorsIndex) {
    return InvalidArgument(fmt::format("{}: a {} file, not a safetensors checkpoint", spec,
                                       weights::weight_format_name(meta.format)));
  }
  fill_tensors(meta, r);
  if (config_at.empty()) {
    if (meta.config_json.empty())
      return NotFound(spec + ": no config.json in the directory; a checkpoint is planned from it");
    r.config_json = meta.config_json;
    uncounted = r.config_json.size();
  } else {
    auto cfg = read_small(config_at);
    if (!cfg.ok())
      return cfg.status().with_context(spec + ": its config.json (a checkpoint is planned from it)");
    r.config_json = std::move(*cfg);
  }
  r.bytes_read = weights::WeightSource::total_bytes_read() - before + uncounted;
  return r;
}

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
  json cfg = {{"architectures", {"LlamaForCausalLM"}},
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
    plan::CheckpointTensor t;
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

int run_checkpoint_plan(const CheckpointPlanRequest& q, std::ostream& out, std::ostream& err) {
  auto read = q.params.params.empty() ? read_checkpoint(q.spec) : params_checkpoint(q.params);
  if (!read.ok()) {
    err << "gantry: plan: " << read.status().to_string() << "\n";
    return read.status().code() == StatusCode::kInvalidArgument && !q.params.params.empty() ? 2 : 1;
  }
  auto conv = plan::convert_checkpoint(read->config_json, read->tensors);
  if (!conv.ok()) {
    if (conv.status().code() == StatusCode::kUnsupported)
      return not_planned(*read, conv.status(), q, out, err);
    err << "gantry: plan: " << read->label << ": " << conv.status().message() << "\n";
    return 1;
  }
  auto types = requested_types(q.quant, &*conv);
  if (!types.ok()) {
    err << "gantry: plan: " << types.status().message() << "\n";
    return 2;
  }
  const std::string name = q.params.params.empty() ? model_name(q.spec) : q.params.params + " (estimate)";
  std::vector<Candidate> cands;
  for (const auto& t : *types) {
    auto profile = plan::profile_checkpoint(*conv, t,
                                            name + " (" + conv->hparams.architecture + ", " +
                                                std::to_string(conv->hparams.n_layer) + " layers, " +
                                                std::string(t.name) + ")");
    if (!profile.ok()) {
      err << "gantry: plan: " << profile.status().to_string() << "\n";
      return 1;
    }
    cands.push_back({t, std::move(*profile), {}, 0});
  }
  // Largest first by the bytes llama.cpp would hold (the nominal order is not exact for small models).
  std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    return a.profile.total_weight_bytes() > b.profile.total_weight_bytes();
  });

  if (!q.what_if.empty()) {
    auto targets = plan::resolve_targets(*q.catalogue, q.what_if,
                                         q.this_machine ? std::optional(q.this_machine()) : std::nullopt);
    if (!targets.ok()) {
      err << "gantry: plan: " << targets.status().message() << "\n";
      return 2;
    }
    std::vector<plan::QuantisedProfile> qp;
    for (const auto& c : cands) qp.push_back({std::string(c.type.name), c.profile});
    qp.front().profile.name = name;
    auto report = plan::what_if(qp, q.options, *q.catalogue, *targets);
    if (!report.ok()) {
      err << "gantry: plan: " << report.status().to_string() << "\n";
      return 2;
    }
    if (q.json) {
      json j = plan::what_if_to_json(*report);
      j["checkpoint"] = describe_json(*read, &*conv);
      out << j.dump(2) << "\n";
    } else {
      out << describe(*read, &*conv) << plan::what_if_to_text(*report);
    }
    return 0;
  }

  // Plan each at the requested context; with several, a type "fits" when it fits at --ctx (default: 4096
  // tokens, or the training context when shorter) and leaves max_context.
  plan::PlanOptions o = q.options;
  const uint32_t train = conv->hparams.n_ctx_train;
  if (cands.size() > 1 && !q.ctx_given) o.n_ctx = std::min<uint32_t>(4096, train);
  const Candidate* chosen = nullptr;
  for (auto& c : cands) {
    auto p = plan::plan_gguf(c.profile, o, q.devices);
    if (!p.ok()) {
      err << "gantry: plan: " << p.status().to_string() << "\n";
      return p.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    c.plan = std::move(*p);
    if (cands.size() > 1 && c.plan.fits) {
      auto mc = plan::max_context(c.profile, o, q.devices, train > 0 ? train : plan::kMaxContext);
      c.max_context = mc.ok() ? *mc : 0;
    }
    if (c.plan.fits && chosen == nullptr) chosen = &c;
  }
  const Candidate& shown = chosen != nullptr ? *chosen : cands.back();
  std::optional<plan::SpeedPrediction> speed;
  if (q.speed && q.this_machine) {
    const plan::WhatIfTarget self = q.this_machine();
    auto s = plan::predict_speed(shown.profile, shown.plan, self.speeds, self.storage_bytes_per_s);
    if (s.ok()) speed = std::move(*s);
  }
  plan::Plan p = shown.plan;
  if (!read->assumptions.empty()) {
    p.notes.insert(p.notes.begin(), "ESTIMATE from a parameter count: see the assumptions above");
  }

  if (q.json) {
    json j = plan::plan_to_json(p);
    j["checkpoint"] = describe_json(*read, &*conv);
    j["quantization"] = std::string(shown.type.name);
    j["weight_bytes"] = shown.profile.total_weight_bytes();  // the GGUF's tensors (CPU repack copies aside)
    if (cands.size() > 1) {
      json rows = json::array();
      for (const auto& c : cands) {
        rows.push_back({{"quantization", std::string(c.type.name)},
                        {"weight_bytes", c.profile.total_weight_bytes()},
                        {"total_bytes", c.plan.totals.total()},
                        {"n_ctx", c.plan.n_ctx},
                        {"fits", c.plan.fits},
                        {"max_context", c.plan.fits ? json(c.max_context) : json(nullptr)}});
      }
      j["quantizations"] = rows;
      j["chosen"] = chosen != nullptr ? json(std::string(chosen->type.name)) : json(nullptr);
    }
    if (speed) j["speed"] = plan::speed_to_json(*speed);
    out << j.dump(2) << "\n";
    return 0;
  }
  out << describe(*read, &*conv);
  if (cands.size() > 1) {
    out << fmt::format("\n{:<8} {:>11} {:>14} {:>12}  {}\n", "quant", "weights",
                       fmt::format("total @{}", cands.front().plan.n_ctx), "max context", "fits");
    for (const auto& c : cands) {
      out << fmt::format("{:<8} {:>11} {:>14} {:>12}  {}\n", c.type.name,
                         plan::human_bytes(c.profile.total_weight_bytes()),
                         plan::human_bytes(c.plan.totals.total()),
                         c.plan.fits ? std::to_string(c.max_context) : "-", c.plan.fits ? "yes" : "no");
    }
    if (chosen != nullptr) {
      out << fmt::format("\nlargest that fits: {} ({} of weights), leaving a context of up to {} tokens{}\n",
                         chosen->type.name, plan::human_bytes(chosen->profile.total_weight_bytes()),
                         chosen->max_context, chosen->max_context >= train ? " (the training context)" : "");
    } else {
      out << fmt::format("\nnone fits at {} tokens, not even {}\n", cands.front().plan.n_ctx,
                         cands.back().type.name);
    }
    out << fmt::format("\nplan at {}:\n", shown.type.name);
  }
  out << plan::plan_to_text(p);
  if (speed) out << plan::speed_to_text(*speed);
  return 0;
}

}  // namespace gantry::cli
