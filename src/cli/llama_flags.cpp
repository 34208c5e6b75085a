#include "cli/llama_flags.h"

#include <cstring>
#include <utility>

#include "gantry/memory/budget.h"

namespace gantry::cli {
namespace {

// llama.cpp's multi-letter short flags and the long names they stand for.
constexpr std::pair<const char*, const char*> kShortAliases[] = {
    {"-np", "--parallel"},    {"-ub", "--ubatch-size"}, {"-ngl", "--n-gpu-layers"}, {"-fa", "--flash-attn"},
    {"-cram", "--cache-ram"}, {"-kvu", "--kv-unified"}, {"-md", "--model-draft"},
};

// " (llama.cpp: -ub)" for a long name that has a rewritten short alias.
std::string short_alias_note(std::string_view long_name) {
  for (const auto& [short_name, name] : kShortAliases)
    if (long_name == name) return std::string(" (llama.cpp: ") + short_name + ")";
  return "";
}

Status set(model::LlamaOptions& o, const char* key, const std::string& value, const char* flag) {
  if (Status s = model::set_llama_option(o, key, value); !s.ok())
    return InvalidArgument(std::string(flag) + ": " + s.message());
  return Status::Ok();
}

}  // namespace

void add_llama_flags(CLI::App& cmd, LlamaFlags& f, uint32_t which) {
  if (which & kLlamaCtx)
    cmd.add_option("--ctx,--ctx-size,-c", f.ctx, "Context size in tokens (llama.cpp n_ctx)");
  if (which & kLlamaParallel)
    cmd.add_option("--parallel", f.parallel, "Sequences decoded together" + short_alias_note("--parallel"))
        ->check(CLI::Range(1, 256));
  if (which & kLlamaBatch)
    cmd.add_option("--batch-size,--batch,-b", f.batch, "Logical batch size (llama.cpp n_batch)")
        ->check(CLI::Range(1, 1 << 20));
  if (which & kLlamaUbatch)
    cmd.add_option("--ubatch-size,--ubatch", f.ubatch,
                   "Physical batch size (llama.cpp n_ubatch)" + short_alias_note("--ubatch-size"))
        ->check(CLI::Range(1, 1 << 20));
  if (which & kLlamaGpuLayers)
    cmd.add_option(
           "--n-gpu-layers,--gpu-layers,--ngl", f.gpu_layers,
           "Layers to offload to GPUs; -1 = all, with the output layer" + short_alias_note("--n-gpu-layers"))
        ->check(CLI::Range(-1, 65536));
  if (which & kLlamaKvType)
    cmd.add_option("--kv-type", f.kv_type, "KV cache type: " + std::string(kv_type_names()));
  if (which & kLlamaFlashAttn)
    cmd.add_option("--flash-attn", f.flash_attn,
                   "Flash attention: on, off or auto (auto = on)" + short_alias_note("--flash-attn"))
        ->check(CLI::IsMember({"on", "off", "auto"}));
  if (which & kLlamaThreads)
    cmd.add_option("--threads,-t", f.threads, "CPU threads; 0 = the default")->check(CLI::Range(0, 4096));
  if (which & kLlamaMmap)
    cmd.add_flag(
        "--no-mmap", f.no_mmap,
        "Read GGUF weights into memory instead of mapping the file (a mapped file overwritten in "
        "place ends the process with SIGBUS; to update a model, rename a new file over the old one)");
  if (which & kLlamaChatTemplate)
    cmd.add_option("--chat-template-file", f.chat_template_file,
                   "A Jinja chat template instead of the GGUF's own (and the package's)");
  if (which & kLlamaReasoningFormat)
    cmd.add_option(
        "--reasoning-format", f.reasoning_format,
        "auto|deepseek: a thinking model's reasoning in reasoning_content (default); none: left in "
        "the content");
  if (which & kLlamaSpeculative) add_speculative_flags(cmd, f.speculative);
  if (which & kLlamaPromptCache) {
    cmd.add_option("--cache-ram", f.cache_ram,
                   "Host-memory prompt cache per text model: a size (512MiB, 2GiB; a bare number is MiB, as "
                   "llama-server's), 0 off, -1 no limit but the memory budget (default: an eighth of the cpu "
                   "budget, at most 8GiB; charged to the model and given back first under memory pressure)" +
                       short_alias_note("--cache-ram"));
    cmd.add_flag(
        "--no-prompt-cache,--no-cache-prompt", f.no_prompt_cache,
        "Evaluate every prompt whole: no slot reuse of earlier prompts, no host-memory prompt cache");
  }
  if (which & kLlamaKvUnified) {
    cmd.add_flag_callback(
        "--kv-unified", [&f] { f.kv_unified = true; },
        "One KV pool shared by a text model's sequences (a sequence may use the whole --ctx) instead of a "
        "stream of ctx/parallel cells each" +
            short_alias_note("--kv-unified"));
    cmd.add_flag_callback(
        "--no-kv-unified", [&f] { f.kv_unified = false; },
        "A stream of ctx/parallel cells per sequence (the default: attention reads only a sequence's own "
        "cells, faster)");
  }
  if (which & kLlamaPrefillChunk)
    cmd.add_option("--prefill-chunk", f.prefill_chunk,
                   "Prompt tokens a decode step evaluates next to the running sequences' tokens (chunked "
                   "prefill; default: n_ubatch, 512)")
        ->check(CLI::Range(1, 1 << 20));
  if (which & kLlamaRpc)
    cmd.add_option("--rpc", f.rpc,
                   "Spread the model over these RPC servers too (HOST:PORT,...: `gantry rpc-server`): layers "
                   "split over this machine and their devices by free memory")
        ->delimiter(',');
}

void note_default(CLI::App& cmd, const std::string& name, const std::string& text) {
  CLI::Option* o = cmd.get_option(name);
  o->description(o->get_description() + " (default: " + text + ")");
}

Result<int> parse_cache_ram_mib(const std::string& text) {
  if (text == "-1") return -1;
  const bool bare = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  uint64_t bytes = 0;
  if (bare) {
    if (text.size() > 9) return InvalidArgument("'" + text + "' is too large");
    bytes = std::stoull(text) << 20;
  } else {
    GANTRY_ASSIGN_OR_RETURN(bytes, memory::parse_byte_size(text));
  }
  const uint64_t mib = (bytes + (1u << 20) - 1) >> 20;
  if (mib > (1u << 24)) return InvalidArgument("'" + text + "' is more than 16 TiB");
  return static_cast<int>(mib);
}

Status apply(const LlamaFlags& f, model::LlamaOptions& o, uint32_t which) {
  auto text = [](auto v) { return std::to_string(v); };
  if ((which & kLlamaCtx) && f.ctx) GANTRY_RETURN_IF_ERROR(set(o, "n_ctx", text(*f.ctx), "--ctx"));
  if ((which & kLlamaParallel) && f.parallel)
    GANTRY_RETURN_IF_ERROR(set(o, "parallel", text(*f.parallel), "--parallel"));
  if ((which & kLlamaBatch) && f.batch)
    GANTRY_RETURN_IF_ERROR(set(o, "n_batch", text(*f.batch), "--batch-size"));
  if ((which & kLlamaUbatch) && f.ubatch)
    GANTRY_RETURN_IF_ERROR(set(o, "n_ubatch", text(*f.ubatch), "--ubatch-size"));
  if ((which & kLlamaGpuLayers) && f.gpu_layers)
    GANTRY_RETURN_IF_ERROR(set(o, "n_gpu_layers", text(*f.gpu_layers), "--n-gpu-layers"));
  if ((which & kLlamaKvType) && !f.kv_type.empty())
    GANTRY_RETURN_IF_ERROR(set(o, "kv_type", f.kv_type, "--kv-type"));
  if ((which & kLlamaFlashAttn) && !f.flash_attn.empty())
    GANTRY_RETURN_IF_ERROR(set(o, "flash_attn", f.flash_attn, "--flash-attn"));
  if ((which & kLlamaMmap) && f.no_mmap) o.mmap = false;
  if ((which & kLlamaChatTemplate) && !f.chat_template_file.empty())
    GANTRY_RETURN_IF_ERROR(set(o, "chat_template_file", f.chat_template_file, "--chat-template-file"));
  if ((which & kLlamaReasoningFormat) && !f.reasoning_format.empty())
    GANTRY_RETURN_IF_ERROR(set(o, "reasoning_format", f.reasoning_format, "--reasoning-format"));
  if (which & kLlamaPromptCache) {
    if (!f.cache_ram.empty()) {
      auto mib = parse_cache_ram_mib(f.cache_ram);
      if (!mib.ok()) return InvalidArgument("--cache-ram: " + mib.status().message());
      o.cache_ram = *mib;
    }
    if (f.no_prompt_cache) o.cache_prompt = false;
  }
  if ((which & kLlamaKvUnified) && f.kv_unified) o.kv_unified = *f.kv_unified;
  if ((which & kLlamaPrefillChunk) && f.prefill_chunk)
    GANTRY_RETURN_IF_ERROR(set(o, "prefill_chunk", text(*f.prefill_chunk), "--prefill-chunk"));
  if ((which & kLlamaRpc) && !f.rpc.empty()) {
    std::string joined;
    for (const auto& v : f.rpc) joined += (joined.empty() ? "" : ",") + v;
    GANTRY_RETURN_IF_ERROR(set(o, "rpc", joined, "--rpc"));
  }
  if (which & kLlamaSpeculative) return apply_speculative_flags(f.speculative, o);
  return model::validate_llama_options(o);
}

const char* llama_cpp_alias(const char* arg) {
  for (const auto& [short_name, name] : kShortAliases)
    if (std::strcmp(arg, short_name) == 0) return name;
  return arg;
}

}  // namespace gantry::cli
