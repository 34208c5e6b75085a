#include "cli/llama_server_args.h"

#include <initializer_list>
#include <optional>
#include <string_view>

namespace gantry::cli {
namespace {

enum class Act {
  kModel,      // FILE/URL -> the model argument, and --any-model-name
  kRename,     // --flag VALUE -> --to VALUE
  kList,       // --flag A,B -> --to A --to B
  kKvType,     // -ctk/-ctv T -> --kv-type T (once; K and V must agree)
  kNPredict,   // -n N -> --max-tokens N (-1, -2: Gantry's default, capped by the context)
  kFlag,       // --flag -> --to (no value)
  kDrop,       // a flag without a value whose meaning Gantry already has
  kDropValue,  // the same, with a value
  kRefuse,     // refused with `text` as the reason
};

struct Spelling {
  std::initializer_list<std::string_view> names;
  Act act;
  std::string_view text;  // kRename/kList: the Gantry flag; kRefuse: the reason
};

constexpr std::string_view kNoDownload =
    "Gantry does not download from Hugging Face: give the model's file (-m FILE) or an http(s) URL";
constexpr std::string_view kNoMultimodal = "Gantry's text models take no images or audio (no mmproj)";
constexpr std::string_view kSampler =
    "Gantry's sampler has temperature, top-k, top-p, min-p and the penalties only";
constexpr std::string_view kCpu = "Gantry places its threads itself (--threads sets how many)";
constexpr std::string_view kLog = "Gantry logs to stderr; GANTRY_LOG_LEVEL sets how much";
constexpr std::string_view kSpec =
    "Gantry's speculative decoding takes --model-draft, --draft-max/-min, --draft-p-min, --spec-type and the "
    "ngram sizes";
constexpr std::string_view kPlacement =
    "Gantry places the model's tensors itself (-ngl, --rpc; `gantry plan` shows where)";
constexpr std::string_view kWebUi = "Gantry serves its own dashboard, not llama.cpp's web UI and its tools";

const Spelling kSpellings[] = {
    // The model, under any name.
    {{"-m", "--model", "-mu", "--model-url"}, Act::kModel, ""},
    {{"-a", "--alias"}, Act::kRename, "--alias"},
    {{"--api-key"}, Act::kList, "--api-key"},
    {{"--cors-origins"}, Act::kList, "--cors-origin"},
    {{"--threads-http"}, Act::kRename, "--http-threads"},
    {{"--no-webui", "--no-ui"}, Act::kFlag, "--no-dashboard"},
    {{"-n", "--predict", "--n-predict"}, Act::kNPredict, ""},
    {{"-ctk", "--cache-type-k", "-ctv", "--cache-type-v"}, Act::kKvType, ""},
    // Gantry's sampling defaults.
    {{"-s", "--seed"}, Act::kRename, "--seed"},
    {{"--temp", "--temperature"}, Act::kRename, "--temp"},
    {{"--top-k"}, Act::kRename, "--top-k"},
    {{"--top-p"}, Act::kRename, "--top-p"},
    {{"--min-p"}, Act::kRename, "--min-p"},
    {{"--repeat-penalty"}, Act::kRename, "--repeat-penalty"},
    {{"--repeat-last-n"}, Act::kRename, "--repeat-last-n"},
    {{"--presence-penalty"}, Act::kRename, "--presence-penalty"},
    {{"--frequency-penalty"}, Act::kRename, "--frequency-penalty"},
    {{"--pooling"}, Act::kRename, "--pooling"},
    {{"-rea", "--reasoning"}, Act::kRename, "--reasoning"},
    // What Gantry does anyway.
    {{"--jinja", "--no-jinja"}, Act::kDrop, ""},
    {{"--embedding", "--embeddings", "--rerank", "--reranking"}, Act::kDrop, ""},
    {{"--metrics",
      "--no-slots",
      "-cb",
      "--cont-batching",
      "--offline",
      "--no-context-shift",
      "--cache-prompt",
      "--warmup",
      "--no-warmup",
      "--no-mmproj",
      "--props",
      "--no-props",
      "-kvo",
      "--kv-offload",
      "--mmap",
      "--no-perf",
      "--perf",
      "--models-autoload",
      "--no-models-autoload",
      "--no-mmproj-offload",
      "--mmproj-auto",
      "--no-mmproj-auto"},
     Act::kDrop,
     ""},
    {{"-sps", "--slot-prompt-similarity", "--keep", "-to", "--timeout"}, Act::kDropValue, ""},
    // Refused, with the reason.
    {{"-hf",
      "-hfr",
      "--hf-repo",
      "-hff",
      "--hf-file",
      "-hft",
      "--hf-token",
      "-hfd",
      "-hfrd",
      "--hf-repo-draft",
      "--spec-draft-hf",
      "-hfv",
      "-hfrv",
      "--hf-repo-v",
      "-hffv",
      "--hf-file-v",
      "-dr",
      "--docker-repo",
      "-cl",
      "--cache-list"},
     Act::kRefuse,
     kNoDownload},
    {{"-mm", "--mmproj", "-mmu", "--mmproj-url", "--mmproj-offload", "--image-min-tokens",
      "--image-max-tokens", "--mtmd-batch-max-tokens", "--video-fps", "--video-timestamp-interval",
      "--video-ffmpeg-dir", "--media-path"},
     Act::kRefuse,
     kNoMultimodal},
    {{"--slots", "--slot-save-path"},
     Act::kRefuse,
     "Gantry has no /slots API: its sequences are the runtime's"},
    {{"--context-shift"}, Act::kRefuse, "Gantry never shifts the context: a prompt longer than it is a 400"},
    {{"--no-cont-batching"}, Act::kRefuse, "Gantry always batches text sequences continuously"},
    {{"--cache-reuse"}, Act::kRefuse, "Gantry reuses a slot's common prefix only (KV shifting is not done)"},
    {{"--lora", "--lora-scaled", "--lora-init-without-apply", "--control-vector", "--control-vector-scaled",
      "--control-vector-layer-range"},
     Act::kRefuse,
     "Gantry applies no LoRA adapters or control vectors"},
    {{"--samplers",           "--sampler-seq",
      "--sampling-seq",       "--top-nsigma",
      "--top-n-sigma",        "--xtc-probability",
      "--xtc-threshold",      "--typical",
      "--typical-p",          "--dry-multiplier",
      "--dry-base",           "--dry-allowed-length",
      "--dry-penalty-last-n", "--dry-sequence-breaker",
      "--adaptive-target",    "--adaptive-decay",
      "--dynatemp-range",     "--dynatemp-exp",
      "--mirostat",           "--mirostat-lr",
      "--mirostat-ent",       "-l",
      "--logit-bias",         "-bs",
      "--backend-sampling",   "--ignore-eos"},
     Act::kRefuse,
     kSampler},
    {{"--grammar", "--grammar-file", "-j", "--json-schema", "-jf", "--json-schema-file"},
     Act::kRefuse,
     "a server-wide grammar is not kept: send grammar or json_schema with each request"},
    {{"-tb", "--threads-batch", "-C", "--cpu-mask", "-Cr", "--cpu-range", "--cpu-strict", "--prio", "--poll",
      "-Cb", "--cpu-mask-batch", "-Crb", "--cpu-range-batch", "--cpu-strict-batch", "--prio-batch",
      "--poll-batch", "--numa"},
     Act::kRefuse,
     kCpu},
    {{"-dev",
      "--device",
      "--list-devices",
      "-ot",
      "--override-tensor",
      "-cmoe",
      "--cpu-moe",
      "-ncmoe",
      "--n-cpu-moe",
      "-ncffn",
      "--n-cpu-ffn",
      "-sm",
      "--split-mode",
      "-ts",
      "--tensor-split",
      "-mg",
      "--main-gpu",
      "-fit",
      "--fit",
      "-fitp",
      "--fit-print",
      "-fitt",
      "--fit-target",
      "-fitc",
      "--fit-ctx",
      "--repack",
      "--no-repack",
      "--no-host",
      "--op-offload",
      "--no-op-offload",
      "--no-kv-offload",
      "-nkvo",
      "--mlock",
      "-lm",
      "--load-mode",
      "-lzm",
      "--lazy-mode",
      "--check-tensors",
      "--override-kv"},
     Act::kRefuse,
     kPlacement},
    {{"--rope-scaling",
      "--rope-scale",
      "--rope-freq-base",
      "--rope-freq-scale",
      "--yarn-orig-ctx",
      "--yarn-ext-factor",
      "--yarn-attn-factor",
      "--yarn-beta-slow",
      "--yarn-beta-fast",
      "--swa-full",
      "-ctxcp",
      "--ctx-checkpoints",
      "--swa-checkpoints",
      "-cms",
      "--checkpoint-min-step",
      "-dt",
      "--defrag-thold",
      "--kv-unified-per-slot",
      "--cache-idle-slots",
      "--no-cache-idle-slots",
      "--embd-normalize",
      "--spm-infill"},
     Act::kRefuse,
     "Gantry takes these from the model's GGUF and its own defaults"},
    {{"--ui", "--webui", "--ui-config", "--webui-config", "--ui-config-file", "--webui-config-file",
      "--ui-mcp-proxy", "--webui-mcp-proxy", "--tools", "--tools-runtime", "--mcp-servers-config",
      "--mcp-servers-json", "-ag", "--agent", "--path"},
     Act::kRefuse,
     kWebUi},
    {{"--models-dir", "--models-preset", "--models-max"},
     Act::kRefuse,
     "router mode: Gantry serves several models itself with --model-repository DIR"},
    {{"--sleep-idle-seconds"},
     Act::kRefuse,
     "Gantry unloads idle models with --load-on-demand and keep-alive"},
    {{"--ssl-key-file", "--ssl-cert-file"},
     Act::kRefuse,
     "Gantry speaks plain HTTP: put TLS in front (deploy/)"},
    {{"--api-prefix"}, Act::kRefuse, "Gantry serves its routes at the root"},
    {{"--reuse-port"}, Act::kRefuse, "Gantry binds its port alone"},
    {{"--cors-methods", "--cors-headers", "--cors-credentials"},
     Act::kRefuse,
     "Gantry's CORS answers name its own methods and headers (--cors-origin sets the origins)"},
    {{"--chat-template", "--chat-template-kwargs", "--skip-chat-parsing", "--prefill-assistant",
      "--no-prefill-assistant", "--reasoning-effort", "--reasoning-budget", "--reasoning-budget-message",
      "--reasoning-preserve"},
     Act::kRefuse,
     "Gantry's chat takes the GGUF's template or --chat-template-file, and --reasoning-format"},
    {{"--tags"}, Act::kRefuse, "Gantry's models carry no tags"},
    {{"-sp",
      "--special",
      "-r",
      "--reverse-prompt",
      "-e",
      "--escape",
      "--no-escape",
      "--in-file",
      "-bf",
      "--binary-file",
      "--context-file",
      "-lcs",
      "--lookup-cache-static",
      "-lcd",
      "--lookup-cache-dynamic",
      "-npp",
      "-ntg",
      "-npl",
      "-co",
      "--color",
      "--completion-bash",
      "-opt",
      "--optimizer"},
     Act::kRefuse,
     "not a server setting"},
    {{"--log-disable", "--log-file", "--log-jsonl", "--log-prompts-dir", "--log-colors", "-v", "--verbose",
      "--log-verbose", "-lv", "--verbosity", "--log-verbosity", "--log-prefix", "--log-timestamps"},
     Act::kRefuse,
     kLog},
    {{"--spec-draft-threads",
      "-td",
      "--threads-draft",
      "--spec-draft-threads-batch",
      "-tbd",
      "--threads-batch-draft",
      "--spec-draft-cpu-mask",
      "-Cd",
      "--cpu-mask-draft",
      "--spec-draft-cpu-range",
      "-Crd",
      "--cpu-range-draft",
      "--spec-draft-cpu-strict",
      "--cpu-strict-draft",
      "--spec-draft-prio",
      "--prio-draft",
      "--spec-draft-poll",
      "--poll-draft",
      "--spec-draft-type-k",
      "-ctkd",
      "--cache-type-k-draft",
      "--spec-draft-type-v",
      "-ctvd",
      "--cache-type-v-draft",
      "--spec-draft-override-tensor",
      "-otd",
      "--override-tensor-draft",
      "--spec-draft-cpu-moe",
      "-cmoed",
      "--cpu-moe-draft",
      "--spec-draft-n-cpu-moe",
      "-ncmoed",
      "--n-cpu-moe-draft",
      "--spec-synth-len",
      "--spec-synth-rates",
      "--spec-draft-p-split",
      "--draft-p-split",
      "--spec-draft-backend-sampling",
      "--spec-draft-device",
      "-devd",
      "--device-draft",
      "--spec-draft-ngl",
      "-ngld",
      "--gpu-layers-draft",
      "--n-gpu-layers-draft",
      "--spec-default"},
     Act::kRefuse,
     kSpec},
    {{"--embd-gemma-default", "--fim-qwen-1.5b-default", "--fim-qwen-3b-default", "--fim-qwen-7b-default",
      "--fim-qwen-7b-spec", "--fim-qwen-14b-spec", "--fim-qwen-30b-default", "--gpt-oss-20b-default",
      "--gpt-oss-120b-default", "--vision-gemma-4b-default", "--vision-gemma-12b-default"},
     Act::kRefuse,
     kNoDownload},
};

const Spelling* find_spelling(std::string_view flag) {
  for (const auto& s : kSpellings)
    for (auto n : s.names)
      if (n == flag) return &s;
  return nullptr;
}

}  // namespace

Result<std::vector<std::string>> respell_llama_server_args(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  std::string kv_type;
  bool any_model = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inline_value;
    if (flag.size() > 1 && flag[0] == '-' && flag != "--") {
      if (auto eq = flag.find('='); eq != std::string::npos) {
        inline_value = flag.substr(eq + 1);
        flag.resize(eq);
      }
    }
    const Spelling* s = flag.size() > 1 && flag[0] == '-' ? find_spelling(flag) : nullptr;
    if (!s) {
      out.push_back(args[i]);
      continue;
    }
    auto value = [&]() -> Result<std::string> {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) return InvalidArgument(flag + " needs a value");
      return args[++i];
    };
    switch (s->act) {
      case Act::kModel: {
        GANTRY_ASSIGN_OR_RETURN(std::string v, value());
        out.push_back(std::move(v));
        any_model = true;
        break;
      }
      case Act::kRename: {
        GANTRY_ASSIGN_OR_RETURN(std::string v, value());
        out.emplace_back(s->text);
        out.push_back(std::move(v));
        break;
      }
      case Act::kList: {
        GANTRY_ASSIGN_OR_RETURN(std::string v, value());
        for (size_t a = 0; a <= v.size();) {
          size_t b = v.find(',', a);
          if (b == std::string::npos) b = v.size();
          // --to=VALUE: a list option of CLI11 would take the arguments after VALUE too (a model).
          if (b > a) out.push_back(std::string(s->text) + "=" + v.substr(a, b - a));
          a = b + 1;
        }
        break;
      }
      case Act::kKvType: {
        GANTRY_ASSIGN_OR_RETURN(std::string v, value());
        if (kv_type.empty()) {
          kv_type = v;
          out.emplace_back("--kv-type");
          out.push_back(v);
        } else if (kv_type != v) {
          return InvalidArgument(flag + " " + v +
                                 ": Gantry's KV cache has one type for K and V (--kv-type), here " + kv_type);
        }
        break;
      }
      case Act::kNPredict: {
        GANTRY_ASSIGN_OR_RETURN(std::string v, value());
        if (v == "-1" || v == "-2") break;  // until the end of generation or the context: the default
        out.emplace_back("--max-tokens");
        out.push_back(std::move(v));
        break;
      }
      case Act::kFlag:
        out.emplace_back(s->text);
        break;
      case Act::kDrop:
        break;
      case Act::kDropValue: {
        GANTRY_ASSIGN_OR_RETURN(std::string v, value());
        (void)v;
        break;
      }
      case Act::kRefuse:
        return InvalidArgument("llama-server's " + flag + " is not supported: " + std::string(s->text));
    }
  }
  if (any_model) out.emplace_back("--any-model-name");
  return out;
}

}  // namespace gantry::cli
