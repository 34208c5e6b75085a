// gantry weights get|convert, and the weights part of gantry inspect (safetensors files, indexes,
// checkpoint directories, URLs, .npz/.npy): everything through the weight loader (gantry/weights).
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "gantry/core/json.h"
#include "gantry/core/npy.h"
#include "gantry/weights/loader.h"
#include "gantry/weights/writer.h"

namespace gantry::cli {
namespace {

using Json = nlohmann::ordered_json;
using weights::Transform;
using weights::WeightLoader;
using weights::WeightSource;

Result<WeightLoader> open_loader(const std::string& spec) {
  GANTRY_ASSIGN_OR_RETURN(auto src, WeightSource::open(spec));
  return WeightLoader::open(src);
}

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.rank(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// Transformations in command-line order (options trigger as they are parsed).
struct TransformList {
  std::vector<Transform> list;
  std::string error;  // the first bad spelling: bad usage
  void add(const Result<Transform>& t) {
    if (t.ok())
      list.push_back(*t);
    else if (error.empty())
      error = t.status().message();
  }
};

void add_transform_options(CLI::App* cmd, const std::shared_ptr<TransformList>& ts) {
  cmd->add_option_function<std::string>(
         "--cast", [ts](const std::string& s) { ts->add(weights::parse_cast(s)); },
         "Cast to a type (f32, f16, bf16, f64, f8e4m3, f8e5m2, i8..i64, u8..u64, bool)")
      ->trigger_on_parse();
  cmd->add_option_function<std::string>(
         "--transpose", [ts](const std::string& s) { ts->add(weights::parse_transpose(s)); },
         "Permute dimensions, e.g. 1,0")
      ->trigger_on_parse();
  cmd->add_option_function<std::string>(
         "--slice", [ts](const std::string& s) { ts->add(weights::parse_slice(s)); },
         "numpy slicing per dimension, e.g. 0:10,::2")
      ->trigger_on_parse();
  cmd->add_option_function<std::string>(
         "--reshape", [ts](const std::string& s) { ts->add(weights::parse_reshape(s)); },
         "New shape, one -1 allowed, e.g. 4,-1")
      ->trigger_on_parse();
  cmd->add_option_function<double>(
         "--scale", [ts](double f) { ts->list.push_back(weights::Scale{f}); }, "Multiply every element")
      ->trigger_on_parse();
  cmd->add_option_function<std::string>(
         "--quantize", [ts](const std::string& s) { ts->add(weights::parse_quantize(s)); },
         "Quantise to a ggml block type: q8_0 or q4_0")
      ->trigger_on_parse();
  cmd->add_flag_callback(
         "--dequantize", [ts] { ts->list.push_back(weights::Dequantize{}); },
         "Dequantise a ggml block type to f32")
      ->trigger_on_parse();
}

struct GetArgs {
  std::string source, name, output;
  std::shared_ptr<TransformList> ts = std::make_shared<TransformList>();
};

int run_get(const GetArgs& a) {
  if (!a.ts->error.empty()) {
    std::cerr << "gantry weights get: " << a.ts->error << "\n";
    return 2;
  }
  if (!a.output.ends_with(".npy")) {
    std::cerr << "gantry weights get: the output must be a .npy file, got " << a.output << "\n";
    return 2;
  }
  auto loader = open_loader(a.source);
  if (!loader.ok()) {
    std::cerr << "gantry weights get: " << loader.status().to_string() << "\n";
    return 1;
  }
  // A block-quantised tensor cast to a plain type is dequantised first.
  std::vector<Transform> ts = a.ts->list;
  const auto* info = loader->metadata().find(a.name);
  if (info && std::holds_alternative<model::GgmlType>(info->type) && !ts.empty() &&
      std::holds_alternative<weights::Cast>(ts.front())) {
    const DType to = std::get<weights::Cast>(ts.front()).to;
    ts.erase(ts.begin());
    if (to != DType::kFloat32) ts.insert(ts.begin(), weights::Cast{to});
    ts.insert(ts.begin(), weights::Dequantize{});
  }
  auto w = loader->load({a.name, std::nullopt, ts});
  if (!w.ok()) {
    std::cerr << "gantry weights get: " << w.status().to_string() << "\n";
    return 1;
  }
  if (w->quantised()) {
    std::cerr << "gantry weights get: " << a.name << " is " << weights::weight_type_name(w->type)
              << " (ggml block-quantised), which .npy cannot hold: add --dequantize (or --cast f32) to write "
                 "f32 values\n";
    return 1;
  }
  if (auto st = write_npy(a.output, w->data); !st.ok()) {
    std::cerr << "gantry weights get: " << a.name << ": " << st.to_string() << "\n";
    return 1;
  }
  std::cout << a.name << ": " << weights::weight_type_name(w->type) << " " << shape_text(w->shape) << " -> "
            << a.output << "\n";
  return 0;
}

struct ConvertArgs {
  std::string source, output, cast, quantize;
  std::vector<std::string> only;
};

// Quantise only what ggml would: floats of rank >= 2 whose rows are whole blocks.
bool quantisable(const weights::TensorInfo& t) {
  const auto* d = std::get_if<DType>(&t.type);
  if (d == nullptr || t.shape.rank() < 2 || t.shape.dims().back() % 32 != 0) return false;
  return *d == DType::kFloat32 || *d == DType::kFloat16 || *d == DType::kBFloat16 || *d == DType::kFloat64;
}

int run_convert(const ConvertArgs& a) {
  const bool to_gguf = a.output.ends_with(".gguf"), to_st = a.output.ends_with(".safetensors");
  if (!to_gguf && !to_st) {
    std::cerr << "gantry weights convert: the output must end in .safetensors or .gguf, got " << a.output
              << "\n";
    return 2;
  }
  std::optional<weights::WeightType> cast, quant;
  if (!a.cast.empty()) {
    auto t = weights::parse_weight_type(a.cast);
    if (!t || !std::holds_alternative<DType>(*t)) {
      std::cerr << "gantry weights convert: --cast " << a.cast
                << ": not a plain type (f32, f16, bf16, ...)\n";
      return 2;
    }
    cast = t;
  }
  if (!a.quantize.empty()) {
    auto q = weights::parse_quantize(a.quantize);
    if (!q.ok()) {
      std::cerr << "gantry weights convert: " << q.status().message() << "\n";
      return 2;
    }
    quant = weights::WeightType{std::get<weights::Quantize>(*q).to};
  }
  auto loader = open_loader(a.source);
  if (!loader.ok()) {
    std::cerr << "gantry weights convert: " << loader.status().to_string() << "\n";
    return 1;
  }
  const auto& meta = loader->metadata();
  std::vector<weights::TensorSpec> specs;
  size_t quantised = 0;
  for (const auto& t : meta.tensors) {
    if (!a.only.empty() && std::find(a.only.begin(), a.only.end(), t.name) == a.only.end()) continue;
    weights::TensorSpec s{t.name};
    if (quant && quantisable(t)) {
      s.target = quant;
      ++quantised;
    } else if (cast) {
      s.target = cast;
    }
    specs.push_back(std::move(s));
  }
  for (const auto& n : a.only)
    if (!meta.find(n)) {
      std::cerr << "gantry weights convert: " << meta.source << ": no tensor \"" << n << "\"\n";
      return 1;
    }
  auto ws = loader->load_many(specs);
  if (!ws.ok()) {
    std::cerr << "gantry weights convert: " << ws.status().to_string() << "\n";
    return 1;
  }
  std::map<std::string, std::string> carried;
  for (const auto& [k, v] : meta.metadata)
    if (std::find(meta.rendered_keys.begin(), meta.rendered_keys.end(), k) == meta.rendered_keys.end())
      carried[k] = v;
  const Status st = to_gguf ? weights::write_gguf(a.output, *ws, carried)
                            : weights::write_safetensors(a.output, *ws, carried);
  if (!st.ok()) {
    std::cerr << "gantry weights convert: " << st.to_string() << "\n";
    return 1;
  }
  std::cout << "wrote " << a.output << ": " << ws->size() << " tensors";
  if (quant) std::cout << " (" << quantised << " quantised to " << a.quantize << ")";
  std::cout << ", " << carried.size() << " metadata entries\n";
  return 0;
}

}  // namespace

bool is_weights_input(const std::string& spec) {
  if (spec.starts_with("http://") || spec.starts_with("https://")) return true;
  for (const char* ext : {".safetensors", ".safetensors.index.json", ".npz", ".npy"})
    if (spec.ends_with(ext)) return true;
  std::error_code ec;
  const std::filesystem::path p(spec);
  return std::filesystem::is_directory(p, ec) && !std::filesystem::exists(p / "gantry.json", ec) &&
         (std::filesystem::exists(p / "model.safetensors", ec) ||
          std::filesystem::exists(p / "model.safetensors.index.json", ec));
}

int inspect_weights(const std::string& spec, bool json) {
  auto src = WeightSource::open(spec);
  if (!src.ok()) {
    std::cerr << "gantry inspect: " << src.status().to_string() << "\n";
    return 1;
  }
  auto m = weights::metadata(*src);
  if (!m.ok()) {
    std::cerr << "gantry inspect: " << m.status().to_string() << "\n";
    return 1;
  }
  const std::string format(weights::weight_format_name(m->format));
  const std::string kind(weights::source_kind_name(src->kind()));
  if (json) {
    Json o;
    o["source"] = spec;
    o["kind"] = kind;
    o["format"] = format;
    o["tensor_count"] = m->tensors.size();
    o["total_bytes"] = m->total_bytes;
    o["metadata"] = Json::object();
    for (const auto& [k, v] : m->metadata) o["metadata"][k] = v;
    o["shards"] = m->shards;
    // config.json as JSON; one that is not (or nests too deep to copy safely) is shown as its text.
    if (m->config_json.empty()) {
      o["config"] = nullptr;
    } else if (auto config = parse_json<Json>(m->config_json, "config.json"); config.ok()) {
      o["config"] = std::move(*config);
    } else {
      o["config"] = m->config_json;
    }
    Json ts = Json::array();
    for (const auto& t : m->tensors) {
      Json j{{"name", t.name},
             {"dtype", weights::weight_type_name(t.type)},
             {"shape", t.shape.dims()},
             {"bytes", t.bytes}};
      if (!t.shard.empty()) j["shard"] = t.shard;
      ts.push_back(std::move(j));
    }
    o["tensors"] = std::move(ts);
    std::cout << o.dump(2) << "\n";
    return 0;
  }
  std::cout << "Source:   " << spec << " (" << kind << ", " << format << ")\n";
  std::cout << "Tensors:  " << m->tensors.size() << ", " << m->total_bytes << " bytes\n";
  if (!m->shards.empty()) {
    std::cout << "Shards:   " << m->shards.size() << "\n";
    for (const auto& s : m->shards) std::cout << "  " << s << "\n";
  }
  if (!m->config_json.empty()) std::cout << "Config:   config.json (" << m->config_json.size() << " bytes)\n";
  if (!m->metadata.empty()) {
    std::cout << "Metadata:\n";
    for (const auto& [k, v] : m->metadata) std::cout << "  " << k << " = " << v.substr(0, 120) << "\n";
  }
  size_t width = 4;
  for (const auto& t : m->tensors) width = std::max(width, t.name.size());
  std::cout << "  " << std::left << std::setw(static_cast<int>(width)) << "name"
            << "  " << std::setw(7) << "dtype" << std::setw(18) << "shape" << std::setw(12) << "bytes"
            << "shard\n";
  for (const auto& t : m->tensors) {
    std::cout << "  " << std::left << std::setw(static_cast<int>(width)) << t.name << "  " << std::setw(7)
              << weights::weight_type_name(t.type) << std::setw(18) << shape_text(t.shape) << std::setw(12)
              << t.bytes << t.shard << "\n";
  }
  return 0;
}

void register_weights_command(CLI::App& app, int& exit_code) {
  auto* cmd =
      app.add_subcommand("weights", "Read, transform and convert weights (safetensors, npz, ONNX, GGUF)");
  cmd->require_subcommand(1);

  auto get = std::make_shared<GetArgs>();
  auto* g = cmd->add_subcommand("get", "Write one tensor, transformed in the order given, to a .npy file");
  g->add_option("source", get->source, "File, checkpoint directory, index .json or http(s) URL")->required();
  g->add_option("name", get->name, "Tensor name")->required();
  g->add_option("-o,--output", get->output, "The .npy file to write")->required();
  add_transform_options(g, get->ts);
  g->callback([get, &exit_code] { exit_code = run_get(*get); });

  auto conv = std::make_shared<ConvertArgs>();
  auto* c = cmd->add_subcommand("convert", "Convert weights to safetensors or GGUF (metadata carried)");
  c->add_option("source", conv->source, "File, checkpoint directory, index .json or http(s) URL")->required();
  c->add_option("-o,--output", conv->output, "OUT.safetensors or OUT.gguf")->required();
  c->add_option("--cast", conv->cast, "Cast every tensor to this type (a block type: dequantised first)");
  c->add_option("--quantize", conv->quantize,
                "q8_0 or q4_0 for float tensors of rank >= 2 with whole blocks");
  c->add_option("--only", conv->only, "Only these tensors (repeatable)");
  c->callback([conv, &exit_code] { exit_code = run_convert(*conv); });
}

}  // namespace gantry::cli
