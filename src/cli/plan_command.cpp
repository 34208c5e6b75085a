// `gantry plan MODEL`: how much memory a model takes at a context size, layer by layer over the devices.
// This file parses the flags, refuses the combinations that make no sense, finds the machine planned for
// (gantry/plan/machine.h) and hands over: GGUF models to cli/plan_gguf.h (llama.cpp's exact rules, --what-if,
// --speed, --measure), ONNX models to cli/plan_onnx.h (measured in Gantry's memory pool with --measure, a
// cached profile, else a labelled estimate), a Hugging Face checkpoint (directory, index, .safetensors, URL)
// or `--params 70B` to cli/plan_checkpoint.h, and `--explain` (the backend factory's provider choice) to
// cli/plan_explain.h. This machine's devices are timed by llama.cpp's products (gantry/backend/llama).
#include <algorithm>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/llama_flags.h"
#include "cli/plan_checkpoint.h"
#include "cli/plan_explain.h"
#include "cli/plan_gguf.h"
#include "cli/plan_onnx.h"
#include "gantry/backend/llama/cpu_model_speed.h"
#include "gantry/backend/llama/remote_speed.h"
#include "gantry/hw/rpc.h"
#include "gantry/model/onnx_info.h"
#include "gantry/model/package.h"
#include "gantry/plan/checkpoint_source.h"
#include "gantry/plan/gguf_profile.h"
#include "gantry/plan/machine.h"
#include "gantry/plan/planner.h"

namespace gantry::cli {
namespace {

namespace fs = std::filesystem;

struct PlanArgs {
  std::string model;
  // The llama.cpp flags shared with the other commands (kPlanLlamaFlags). ONNX: --batch is the model's batch
  // size (default 1).
  LlamaFlags llama;
  std::vector<std::string> shapes;  // ONNX: --shape NAME=D0,D1,...
  std::string provider;             // ONNX: --provider
  bool json = false;
  std::string sysroot;
  bool explain = false;
  std::string provider_policy;
  bool measure = false;
  bool speed = false;
  std::string what_if;
  std::string catalogue;
  std::string quant;        // checkpoints: a llama-quantize type or "all"
  plan::ParamsSpec params;  // --params 70B [--layers ...]
};

// The planner's options from the shared llama.cpp flags, with plan's defaults (the model's training context,
// one sequence, llama.cpp's batch sizes, an f16 cache, flash attention on, every layer on the GPUs).
plan::PlanOptions plan_options(const LlamaFlags& f, KvType kv) {
  plan::PlanOptions o;
  o.n_ctx = f.ctx.value_or(0);
  o.n_parallel = f.parallel.value_or(1);
  o.n_batch = f.batch.value_or(2048);
  o.n_ubatch = f.ubatch.value_or(512);
  o.kv_type = kv;
  o.flash_attn = f.flash_attn != "off";
  o.n_gpu_layers = f.gpu_layers.value_or(-1);
  return o;
}

// llama.cpp's timings of this machine's devices (the policy of which runs when is plan/machine.h's).
plan::DeviceTimers llama_timers() {
  plan::DeviceTimers t;
  t.cpu_product = [](int threads, const std::string& weight_type) {
    return llama::measure_cpu_speed(threads, weight_type);
  };
  t.cpu_on_model = [](const std::string& path, const plan::ModelProfile& model, const hw::CpuInfo& cpu,
                      double ghz, int threads) {
    return llama::measure_cpu_model_speed(path, model, cpu, ghz, {.threads = threads});
  };
  t.remote = [](const hw::RpcEndpoint& server, int device_index, const std::string& weight_type,
                double round_trip_s) {
    return llama::measure_remote_speed(server, device_index, weight_type, round_trip_s);
  };
  return t;
}

// The flag combinations `plan` refuses, before anything is read; 0 when none.
int check_flags(const PlanArgs& a, bool checkpoint) {
  const fs::path path(a.model);
  std::error_code ec;
  if (a.model.empty() == a.params.params.empty()) {
    std::cerr
        << "gantry: plan: name a model (a .gguf/.onnx file, a checkpoint directory, index, .safetensors "
           "or URL) or give --params, not both\n";
    return 2;
  }
  if (checkpoint && a.measure) {
    std::cerr << "gantry: plan: --measure loads a GGUF file; a checkpoint is planned from its headers\n";
    return 2;
  }
  if ((!a.shapes.empty() || !a.provider.empty()) && (checkpoint || path.extension() == ".gguf")) {
    std::cerr << "gantry: plan: --shape and --provider are for ONNX models\n";
    return 2;
  }
  if (!checkpoint && !a.quant.empty()) {
    std::cerr << "gantry: plan: --quant plans a checkpoint at a type; a GGUF file has its own (--what-if "
                 "shows what smaller quantisations would fit)\n";
    return 2;
  }
  if (!checkpoint && !fs::is_regular_file(path, ec)) {
    std::cerr << "gantry: plan: " << a.model << " is not a model file (expected a .gguf or .onnx file)\n";
    return 1;
  }
  return 0;
}

// The machine planned for, its devices (RPC servers' included) and what planning it needs besides.
struct PlanMachine {
  hw::Registry registry;
  std::vector<plan::Device> devices;
  int threads = 1;
  std::optional<plan::Catalogue> catalogue;
};

// Fills `m`; returns 0, or the exit code of what went wrong (said on stderr).
int find_machine(const PlanArgs& a, PlanMachine& m) {
  auto registry = plan::machine_to_plan_for(a.sysroot);
  if (!registry.ok()) {
    std::cerr << "gantry: plan: " << registry.status().message() << "\n";
    return 2;
  }
  m.registry = std::move(*registry);
  if (!a.llama.rpc.empty()) {
    auto servers = hw::parse_rpc_endpoints(a.llama.rpc);
    if (!servers.ok()) {
      std::cerr << "gantry: plan: --rpc: " << servers.status().message() << "\n";
      return 2;
    }
    hw::RpcProbeOptions po;
    po.measure_link = a.speed;  // the network counts only in the speed prediction
    if (Status s = hw::add_rpc_devices(m.registry, *servers, po); !s.ok()) {
      std::cerr << "gantry: plan: " << s.message() << "\n";
      return 1;
    }
  }
  m.devices = plan::devices_from_registry(m.registry);
  m.threads = plan::speed_threads(m.registry.cpu, a.llama.threads);
  const bool any_gpu =
      std::any_of(m.devices.begin(), m.devices.end(), [](const plan::Device& d) { return plan::is_gpu(d); });
  if (!a.what_if.empty() || !a.catalogue.empty() || (a.speed && any_gpu)) {
    auto c =
        plan::load_catalogue(a.catalogue.empty() ? plan::default_catalogue_path() : fs::path(a.catalogue));
    if (!c.ok()) {
      std::cerr << "gantry: plan: " << c.status().message() << "\n";
      return 2;
    }
    m.catalogue = std::move(*c);
  }
  return 0;
}

// This machine, timed (for a GGUF, on `gguf`'s own matrices).
plan::ThisMachine time_this_machine(const PlanArgs& a, const PlanMachine& m, const plan::ModelProfile* gguf) {
  plan::ThisMachineRequest r;
  r.registry = &m.registry;
  r.devices = m.devices;
  r.catalogue = m.catalogue ? &*m.catalogue : nullptr;
  r.threads = m.threads;
  r.local = a.sysroot.empty();
  r.model_path = a.model;
  r.gguf = gguf;
  return plan::this_machine(r, llama_timers());
}

int run_plan(const PlanArgs& a) {
  if (a.explain) return run_plan_explain(a.model, a.json, a.provider_policy, std::cout);
  const bool checkpoint = !a.params.params.empty() || (!a.model.empty() && plan::is_checkpoint_spec(a.model));
  if (int rc = check_flags(a, checkpoint); rc != 0) return rc;
  const std::string kv_name = a.llama.kv_type.empty() ? "f16" : a.llama.kv_type;
  const auto kv = parse_kv_type(kv_name);
  if (!kv) {
    std::cerr << "gantry: plan: unknown --kv-type " << kv_name
              << " (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl)\n";
    return 2;
  }
  PlanMachine m;
  if (int rc = find_machine(a, m); rc != 0) return rc;
  if (checkpoint) {
    CheckpointPlanRequest q;
    q.spec = a.model;
    q.params = a.params;
    q.quant = a.quant;
    q.ctx_given = a.llama.ctx.value_or(0) != 0;
    q.options = plan_options(a.llama, *kv);
    q.json = a.json;
    q.speed = a.speed;
    q.what_if = a.what_if;
    q.catalogue = m.catalogue ? &*m.catalogue : nullptr;
    q.devices = m.devices;
    q.this_machine = [&a, &m] { return time_this_machine(a, m, nullptr).target; };
    return run_checkpoint_plan(q, std::cout, std::cerr);
  }
  // GGUF by magic, or by extension (then the GGUF reader explains what is wrong with the file).
  const fs::path path(a.model);
  const auto format = model::detect_model_format(path);
  if ((format.ok() && *format == model::ModelFormat::kGguf) || path.extension() == ".gguf") {
    GgufPlanRequest q;
    q.model = a.model;
    q.options = plan_options(a.llama, *kv);
    q.json = a.json;
    q.speed = a.speed;
    q.measure = a.measure;
    q.what_if = a.what_if;
    q.catalogue = m.catalogue ? &*m.catalogue : nullptr;
    q.devices = m.devices;
    q.this_machine = [&a, &m](const plan::ModelProfile& model) { return time_this_machine(a, m, &model); };
    return run_gguf_plan(q, std::cout, std::cerr);
  }
  if (format.ok() && *format == model::ModelFormat::kOnnx) {
    if (a.speed || !a.what_if.empty()) {
      std::cerr << "gantry: plan: --speed and --what-if need a GGUF model\n";
      return 2;
    }
    auto policy = backend::resolve_provider_policy(a.provider_policy);
    if (!policy.ok()) {
      std::cerr << "gantry: plan: " << policy.status().message() << "\n";
      return 2;
    }
    OnnxPlanRequest q;
    q.model = a.model;
    if (a.llama.batch) q.batch = *a.llama.batch;
    q.shapes = a.shapes;
    q.measure = a.measure;
    q.json = a.json;
    q.policy = *policy;
    q.provider = a.provider;
    q.machine = &m.registry;
    q.local = a.sysroot.empty();
    q.devices = m.devices;
    return run_onnx_plan(q, std::cout, std::cerr);
  }
  std::cerr << "gantry: plan: " << a.model << " is neither a GGUF nor an ONNX model"
            << (format.ok() ? "" : " (" + format.status().message() + ")") << "\n";
  return 1;
}

}  // namespace

void register_plan_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd =
      app.add_subcommand("plan", "Predict the memory a model needs and how its layers split over devices");
  cmd->add_option(
      "model", args->model,
      "Model: .gguf (exact llama.cpp rules), .onnx (measured with --measure, else a cached profile or an "
      "estimate), or a Hugging Face checkpoint "
      "(directory, model.safetensors.index.json, .safetensors, or an http(s) URL of one; planned "
      "from config.json and the safetensors headers alone)");
  cmd->add_option("--quant", args->quant,
                  "Checkpoints: plan at this llama-quantize type (q4_k_m, q8_0, bf16, ...), or 'all' for the "
                  "largest that fits at --ctx (default 4096) and the context it leaves");
  cmd->add_option("--params", args->params.params,
                  "Plan a model known only by its size (70B, 7.6B, 500M): an ESTIMATE with a llama shape");
  cmd->add_option("--layers", args->params.layers, "With --params: layers")->check(CLI::Range(1, 512));
  cmd->add_option("--heads", args->params.heads, "With --params: attention heads")
      ->check(CLI::Range(1, 16384));
  cmd->add_option("--kv-heads", args->params.kv_heads, "With --params: KV heads")
      ->check(CLI::Range(1, 16384));
  cmd->add_option("--embd", args->params.embd, "With --params: embedding width")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--ff", args->params.ff, "With --params: feed-forward width")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--vocab", args->params.vocab, "With --params: vocabulary")->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--ctx-train", args->params.ctx_train, "With --params: training context")
      ->check(CLI::Range(1, 1 << 28));
  add_llama_flags(*cmd, args->llama, kPlanLlamaFlags);
  note_default(*cmd, "--ctx", "the model's training context");
  note_default(*cmd, "--parallel", "1");
  cmd->get_option("--batch-size")
      ->description(
          "GGUF: logical batch size (llama.cpp n_batch; default 2048). ONNX: the model's batch size "
          "(default 1; measured with --measure, else predicted from the cached profile)");
  note_default(*cmd, "--ubatch-size", "512");
  note_default(*cmd, "--kv-type", "f16");
  note_default(*cmd, "--flash-attn", "auto");
  note_default(*cmd, "--n-gpu-layers", "-1, all");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->add_option("--sysroot", args->sysroot, "Describe the machine captured under this directory");
  cmd->add_flag("--explain", args->explain,
                "Show which execution provider the backend factory picks, and why the others were not");
  cmd->add_option("--provider-policy", args->provider_policy,
                  "With --explain: fastest|manifest|measured (default: $GANTRY_PROVIDER_POLICY or fastest)");
  cmd->add_flag(
      "--measure", args->measure,
      "GGUF: also load the model with this plan and report llama.cpp's real allocations. ONNX: load "
      "it in Gantry's memory pool and run it once at batch 1, 2 and --batch; the profile is cached "
      "and the runtime's budget reserves from it");
  cmd->add_option("--provider", args->provider,
                  "ONNX: plan (and --measure) on this execution provider only (cpu, cuda, ...)");
  cmd->add_option("--shape", args->shapes,
                  "ONNX: an input's full shape for --measure, NAME=D0,D1,... (its batch dims follow --batch; "
                  "dynamic dims not given are 1)");
  cmd->add_flag("--speed", args->speed,
                "Also predict prompt/generation tokens/s on this machine (times a ~150 ms memory triad)");
  cmd->add_option(
      "--what-if", args->what_if,
      "Plan for catalogue hardware: comma-separated ids (h100-80gb,8xa100-80gb,aws-g6.xlarge,this) "
      "or all; prints fit, quantisation, split, tokens/s and $ per million tokens");
  cmd->add_option("--catalogue", args->catalogue,
                  "Accelerator and instance catalogue (default: data/catalogue.json or $GANTRY_CATALOGUE)");
  cmd->get_option("--rpc")->description(
      "Plan over these RPC servers' devices too (HOST:PORT,...: `gantry rpc-server`): layers split "
      "by free memory; --speed also times each device and the link to it");
  cmd->get_option("--threads")
      ->description("CPU threads the speed prediction assumes (default: physical cores)");
  cmd->callback([args, &exit_code] { exit_code = run_plan(*args); });
}

}  // namespace gantry::cli
