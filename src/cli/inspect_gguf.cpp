#include "cli/inspect_gguf.h"

#include <fmt/format.h>

#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "gantry/backend/llama/llama_backend.h"
#include "gantry/model/gguf.h"

namespace gantry::cli {
namespace {

// The largest value of a per-layer field that is a scalar or an array.
std::optional<uint64_t> max_of(const model::GgufFile& f, const std::string& key) {
  const model::GgufValue* v = f.find(key);
  if (v == nullptr) return std::nullopt;
  if (const auto* a = v->as_array()) {
    std::optional<uint64_t> best;
    for (uint64_t i = 0; i < a->size(); ++i) {
      if (auto u = a->at(i).as_uint()) best = std::max(best.value_or(0), *u);
    }
    return best;
  }
  return v->as_uint();
}

nlohmann::json opt(const std::optional<uint64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::string opt_text(const std::optional<uint64_t>& v) { return v ? std::to_string(*v) : "unknown"; }

}  // namespace

int inspect_gguf(const std::filesystem::path& path, bool json, std::ostream& out) {
  auto r = model::GgufFile::open(path);
  if (!r.ok()) {
    std::cerr << "gantry: inspect: " << r.status().to_string() << "\n";
    return 1;
  }
  const model::GgufFile& f = *r;
  uint64_t n_params = 0;
  struct TypeStat {
    uint64_t count = 0, bytes = 0;
  };
  std::map<std::string, TypeStat> types;
  for (const auto& t : f.tensors()) {
    n_params += t.n_elements;
    auto& s = types[std::string(t.type.name)];
    ++s.count;
    s.bytes += t.size_bytes;
  }
  std::optional<uint64_t> n_vocab;
  if (const auto* tokens = f.find("tokenizer.ggml.tokens"); tokens && tokens->as_array()) {
    n_vocab = tokens->as_array()->size();
  } else {
    n_vocab = f.get_uint(f.arch_key("vocab_size"));
  }
  const std::string arch = f.architecture();
  const bool chat_template = f.find("tokenizer.chat_template") != nullptr;
  const auto layers = f.get_uint(f.arch_key("block_count"));
  const auto heads = max_of(f, f.arch_key("attention.head_count"));
  auto kv_heads = max_of(f, f.arch_key("attention.head_count_kv"));
  if (!kv_heads) kv_heads = heads;
  const auto n_embd = f.get_uint(f.arch_key("embedding_length"));
  const auto n_ctx = f.get_uint(f.arch_key("context_length"));
  // What llama.cpp's chat layer makes of the template (its vocabulary is loaded, no weights).
  auto chat = llama::inspect_chat_template(path.string());

  if (json) {
    nlohmann::json j;
    j["file"] = path.string();
    j["format"] = "gguf";
    j["gguf_version"] = f.version();
    j["file_size"] = f.file_size();
    j["architecture"] = arch;
    j["name"] = f.get_string("general.name").value_or("");
    j["parameters"] = n_params;
    j["layers"] = opt(layers);
    j["heads"] = opt(heads);
    j["kv_heads"] = opt(kv_heads);
    j["embedding_length"] = opt(n_embd);
    j["context_length"] = opt(n_ctx);
    j["vocab_size"] = opt(n_vocab);
    j["chat_template"] = chat_template;
    if (chat.ok()) {
      j["chat"] = {{"source", chat->source},
                   {"format", chat->format},
                   {"tools", chat->tools},
                   {"parallel_tool_calls", chat->parallel_tool_calls},
                   {"thinking", chat->thinking}};
    } else {
      j["chat"] = {{"error", chat.status().message()}};
    }
    j["metadata_count"] = f.metadata().size();
    j["tensor_count"] = f.tensors().size();
    j["alignment"] = f.alignment();
    nlohmann::json hist = nlohmann::json::object();
    for (const auto& [name, s] : types) hist[name] = {{"count", s.count}, {"bytes", s.bytes}};
    j["tensor_types"] = hist;
    out << j.dump(2) << "\n";
    return 0;
  }
  out << fmt::format("file:             {}\n", path.string());
  out << fmt::format("format:           GGUF v{} ({} bytes, {} metadata keys, {} tensors)\n", f.version(),
                     f.file_size(), f.metadata().size(), f.tensors().size());
  out << fmt::format("architecture:     {}\n", arch.empty() ? "unknown" : arch);
  if (auto name = f.get_string("general.name")) out << fmt::format("name:             {}\n", *name);
  out << fmt::format("parameters:       {} ({:.1f} M)\n", n_params, static_cast<double>(n_params) / 1e6);
  out << fmt::format("layers:           {}\n", opt_text(layers));
  out << fmt::format("heads:            {} (KV heads {})\n", opt_text(heads), opt_text(kv_heads));
  out << fmt::format("embedding length: {}\n", opt_text(n_embd));
  out << fmt::format("context length:   {}\n", opt_text(n_ctx));
  out << fmt::format("vocabulary:       {}\n", opt_text(n_vocab));
  out << fmt::format("chat template:    {}\n", chat_template ? "yes" : "no (llama.cpp's default, ChatML)");
  if (chat.ok()) {
    out << fmt::format("chat format:      {} (tools: {}{}; thinking: {})\n", chat->format,
                       chat->tools ? "yes" : "no", chat->parallel_tool_calls ? ", parallel calls" : "",
                       chat->thinking ? "yes" : "no");
  } else {
    out << fmt::format("chat format:      unknown ({})\n", chat.status().message());
  }
  out << "tensor types:\n";
  for (const auto& [name, s] : types) {
    out << fmt::format("  {:<8} {:>5} tensors {:>14} bytes\n", name, s.count, s.bytes);
  }
  return 0;
}

}  // namespace gantry::cli
