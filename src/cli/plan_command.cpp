// `gantry plan MODEL`: how much memory a model takes at a context size, layer by layer over the devices.
// GGUF models get llama.cpp's exact rules (gantry/plan/planner.h); ONNX models go to cli/plan_onnx.h
// (measured in Gantry's memory pool with --measure, a cached profile, else a labelled estimate).
// `--explain` shows the backend factory's provider choice (ONNX); `--measure` also loads a GGUF model
// with llama.cpp and reports the bytes it really allocated next to the prediction. A Hugging Face checkpoint
// (directory, index, .safetensors, URL) or `--params 70B` goes to cli/plan_checkpoint.h.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/llama_flags.h"
#include "cli/plan_checkpoint.h"
#include "cli/plan_explain.h"
#include "cli/plan_onnx.h"
#include "gantry/backend/llama/cpu_model_speed.h"
#include "gantry/backend/llama/measure.h"
#include "gantry/backend/llama/remote_speed.h"
#include "gantry/hw/detect.h"
#include "gantry/hw/loader.h"
#include "gantry/hw/machine.h"
#include "gantry/hw/query.h"
#include "gantry/hw/rpc.h"
#include "gantry/model/onnx_info.h"
#include "gantry/model/package.h"
#include "gantry/plan/checkpoint_source.h"
#include "gantry/plan/gguf_profile.h"
#include "gantry/plan/plan_json.h"
#include "gantry/plan/planner.h"
#include "gantry/plan/speed.h"
#include "gantry/plan/what_if.h"

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

// This machine as a what-if target: the registry's devices, its CPU's ISA-derived FLOP/s with a measured
// (triad) memory bandwidth when planning for the local machine; for GPUs the registry's memory bandwidth
// (hw's known-device table, the one table of device bandwidths) and the catalogue's FLOP/s for GPUs it
// recognises; the load time from the block device holding the model file (local machine only).
plan::WhatIfTarget this_machine(const hw::Registry& r, const std::vector<plan::Device>& devices,
                                const plan::Catalogue* catalogue, int threads, bool local,
                                const std::string& model_path, std::string& storage_note,
                                const plan::ModelProfile* gguf = nullptr) {
  plan::WhatIfTarget t;
  t.id = "this";
  t.description = "this machine: " + (r.cpu.model.empty() ? std::string("CPU") : r.cpu.model);
  t.devices = devices;
  const double ghz = plan::cpu_ghz(r.environment.sysroot).value_or(0);
  const bool any_remote =
      std::any_of(devices.begin(), devices.end(), [](const plan::Device& d) { return d.remote.has_value(); });
  for (const auto& d : devices) {
    if (!plan::is_gpu(d)) {
      Result<plan::DeviceSpeed> timed = Unavailable("not timed");
      if (local && any_remote) {
        // Next to remote devices (timed on one generic product), this CPU is timed on the same product.
        timed = llama::measure_cpu_speed(threads, gguf ? gguf->weight_type : "q8_0");
      } else if (local && gguf) {
        // Timed on the model's own matrices (gantry/backend/llama/cpu_model_speed.h).
        timed = llama::measure_cpu_model_speed(model_path, *gguf, r.cpu, ghz, {.threads = threads});
        if (!timed.ok()) {
          storage_note += (storage_note.empty() ? "" : "; ") + std::string("cpu: not timed on the model (") +
                          timed.status().message() + "), so a memory triad and the ISA instead";
        }
      }
      if (!timed.ok()) {
        const double bandwidth = local ? plan::measure_memory_bandwidth(threads) : 0;
        const double barrier = local ? plan::measure_thread_barrier(threads) : 0;  // the per-node overhead
        timed = plan::cpu_speed(r.cpu, threads, ghz, bandwidth, barrier);
      }
      t.speeds.push_back(*timed);
      continue;
    }
    if (d.remote) {  // another host's device: timed through RPC (the protocol does not say what it is)
      t.description += ", " + d.id + " (" + d.remote->endpoint + ")";
      auto e = hw::parse_rpc_endpoint(d.remote->endpoint);
      auto s =
          e.ok() ? llama::measure_remote_speed(*e, d.remote->device_index, gguf ? gguf->weight_type : "q8_0",
                                               d.remote->round_trip_s.value_or(0))
                 : Result<plan::DeviceSpeed>(e.status());
      if (!s.ok()) {
        storage_note += (storage_note.empty() ? "" : "; ") + d.id + ": no speed: " + s.status().message();
        t.speeds.push_back({});
      } else {
        t.speeds.push_back(*s);
      }
      continue;
    }
    t.description += ", " + d.name;
    const plan::Accelerator* a = catalogue ? catalogue->match_device(d.name) : nullptr;
    plan::DeviceSpeed s =
        a ? plan::gpu_speed(a->memory_bandwidth_gb_s, a->fp16_dense_tflops, a->name) : plan::DeviceSpeed{};
    for (const auto& hd : r.devices) {
      if (hd.id != d.id || !hd.memory_bandwidth_bytes_per_s) continue;
      s.memory_bandwidth = static_cast<double>(*hd.memory_bandwidth_bytes_per_s);
      s.bandwidth_efficiency = plan::kPeakBandwidthEfficiency;
      s.bandwidth_source = hd.memory_bandwidth_source.value_or("catalogue");
    }
    t.speeds.push_back(s);
  }
  std::string load_note;
  if (!local) {
    load_note = "load time unknown: a captured --sysroot has no model file on its disks";
  } else if (auto b = hw::storage_for_path(model_path); b.ok()) {
    const plan::StorageBandwidth sb = plan::storage_read_bandwidth(*b);
    t.storage_bytes_per_s = sb.bytes_per_s;
    load_note = sb.bytes_per_s > 0 ? "load: " + sb.description : "load time unknown: " + sb.description;
  } else {
    load_note = "load time unknown: " + b.status().message();
  }
  storage_note = storage_note.empty() ? load_note : load_note + "; " + storage_note;
  return t;
}

bool mentions_this(std::string spec) {
  std::transform(spec.begin(), spec.end(), spec.begin(), [](unsigned char c) { return std::tolower(c); });
  return spec.find("this") != std::string::npos || spec.find("all") != std::string::npos;
}

// The machine to plan for: this one, or one captured under --sysroot. A sysroot that does not exist or
// lacks the memory figures is an error: planning against "0 B free" would only mislead.
Result<hw::Registry> detect_devices(const std::string& sysroot) {
  if (sysroot.empty()) return hw::detect_local();
  std::error_code ec;
  if (!fs::is_directory(sysroot, ec)) {
    return NotFound("--sysroot " + sysroot +
                    " is not a directory (expected a captured machine: proc/, sys/)");
  }
  auto machine = hw::make_disk_machine(sysroot);
  auto loader = hw::make_null_loader();
  hw::Registry r = hw::detect(*machine, *loader);
  if (!r.host.memory_total_bytes) {
    return InvalidArgument(
        "--sysroot " + sysroot +
        " has no readable proc/meminfo, so its memory is unknown and nothing can be planned");
  }
  return r;
}

// Loads the model the way `plan` placed it (through the backend's one Placement translation) and reads
// llama.cpp's real allocations.
Result<llama::MemoryMeasurement> measure_plan(const fs::path& path, const plan::Plan& p) {
  GANTRY_ASSIGN_OR_RETURN(llama::LlamaSettings s,
                          llama::llama_settings(llama::placement_from_plan(p), path.string()));
  return llama::measure_memory(path.string(), s);
}

nlohmann::json measurement_to_json(const llama::MemoryMeasurement& m) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : m.devices) {
    devices.push_back({{"device", d.device},
                       {"measured_bytes",
                        {{"weights", d.model_bytes},
                         {"kv_cache", d.kv_bytes},
                         {"compute", d.compute_bytes},
                         {"output", d.output_bytes},
                         {"total", d.total_bytes}}}});
  }
  return {{"devices", devices},
          {"measured_bytes",
           {{"weights", m.model_bytes},
            {"kv_cache", m.kv_bytes},
            {"compute", m.compute_bytes},
            {"output", m.output_bytes},
            {"total", m.total_bytes}}},
          {"rss_growth_bytes", m.rss_growth_bytes}};
}

std::string measurement_to_text(const llama::MemoryMeasurement& m, uint64_t predicted_total) {
  auto mib = [](double b) { return fmt::format("{:.1f} MiB", b / (1 << 20)); };
  std::string out = "\nmeasured (llama.cpp's allocations):\n";
  for (const auto& d : m.devices) {
    out += fmt::format("  {:<8} weights {}  kv {}  compute {}  output {}  total {}\n", d.device,
                       mib(d.model_bytes), mib(d.kv_bytes), mib(d.compute_bytes), mib(d.output_bytes),
                       mib(d.total_bytes));
  }
  const double err =
      m.total_bytes ? (static_cast<double>(predicted_total) - m.total_bytes) / m.total_bytes : 0;
  out += fmt::format("  predicted {} vs measured {}: error {:+.2f}%; process RSS grew {}\n",
                     mib(predicted_total), mib(m.total_bytes), 100.0 * err,
                     mib(static_cast<double>(m.rss_growth_bytes)));
  return out;
}

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

int run_plan(const PlanArgs& a) {
  if (a.explain) return run_plan_explain(a.model, a.json, a.provider_policy, std::cout);
  const fs::path path(a.model);
  std::error_code ec;
  const bool checkpoint = !a.params.params.empty() || (!a.model.empty() && plan::is_checkpoint_spec(a.model));
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
  const std::string kv_name = a.llama.kv_type.empty() ? "f16" : a.llama.kv_type;
  const auto kv = parse_kv_type(kv_name);
  if (!kv) {
    std::cerr << "gantry: plan: unknown --kv-type " << kv_name
              << " (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl)\n";
    return 2;
  }
  auto registry = detect_devices(a.sysroot);
  if (!registry.ok()) {
    std::cerr << "gantry: plan: " << registry.status().message() << "\n";
    return 2;
  }
  if (!a.llama.rpc.empty()) {
    auto servers = hw::parse_rpc_endpoints(a.llama.rpc);
    if (!servers.ok()) {
      std::cerr << "gantry: plan: --rpc: " << servers.status().message() << "\n";
      return 2;
    }
    hw::RpcProbeOptions po;
    po.measure_link = a.speed;  // the network counts only in the speed prediction
    if (Status s = hw::add_rpc_devices(*registry, *servers, po); !s.ok()) {
      std::cerr << "gantry: plan: " << s.message() << "\n";
      return 1;
    }
  }
  const std::vector<plan::Device> devices = plan::devices_from_registry(*registry);
  const int threads = a.llama.threads > 0
                          ? a.llama.threads
                          : std::max(1, registry->cpu.physical_cores > 0 ? registry->cpu.physical_cores
                                                                         : registry->cpu.logical_cores);
  std::optional<plan::Catalogue> catalogue;
  const bool any_gpu =
      std::any_of(devices.begin(), devices.end(), [](const plan::Device& d) { return plan::is_gpu(d); });
  if (!a.what_if.empty() || !a.catalogue.empty() || (a.speed && any_gpu)) {
    auto c =
        plan::load_catalogue(a.catalogue.empty() ? plan::default_catalogue_path() : fs::path(a.catalogue));
    if (!c.ok()) {
      std::cerr << "gantry: plan: " << c.status().message() << "\n";
      return 2;
    }
    catalogue = std::move(*c);
  }
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
    q.catalogue = catalogue ? &*catalogue : nullptr;
    q.devices = devices;
    const plan::Catalogue* cat = q.catalogue;
    const hw::Registry& reg = *registry;
    q.this_machine = [&reg, &devices, cat, threads, &a] {
      std::string storage_note;
      return this_machine(reg, devices, cat, threads, a.sysroot.empty(), a.model, storage_note);
    };
    return run_checkpoint_plan(q, std::cout, std::cerr);
  }
  std::optional<plan::ModelProfile> gguf_profile;

  plan::Plan result;
  // GGUF by magic, or by extension (then the GGUF reader explains what is wrong with the file).
  const auto format = model::detect_model_format(path);
  if ((format.ok() && *format == model::ModelFormat::kGguf) || path.extension() == ".gguf") {
    auto profile = plan::profile_from_gguf(path);
    if (!profile.ok()) {
      std::cerr << "gantry: plan: " << profile.status().to_string() << "\n";
      return 1;
    }
    plan::PlanOptions o = plan_options(a.llama, *kv);
    // Remote devices and no local GPU: this CPU takes its share of the layers next to them.
    o.cpu_takes_share = std::any_of(devices.begin(), devices.end(),
                                    [](const plan::Device& d) { return d.remote.has_value(); }) &&
                        std::none_of(devices.begin(), devices.end(),
                                     [](const plan::Device& d) { return plan::is_gpu(d) && !d.remote; });
    auto p = plan::plan_gguf(*profile, o, devices);
    if (!p.ok()) {
      std::cerr << "gantry: plan: " << p.status().to_string() << "\n";
      return p.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    result = std::move(*p);
    gguf_profile = *profile;
    result.model = path.filename().string() + " (" + profile->architecture + ", " +
                   std::to_string(profile->n_layer()) + " layers, " + profile->weight_type + ")";
  } else if (format.ok() && *format == model::ModelFormat::kOnnx) {
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
    q.machine = &*registry;
    q.local = a.sysroot.empty();
    q.devices = devices;
    return run_onnx_plan(q, std::cout, std::cerr);
  } else {
    std::cerr << "gantry: plan: " << a.model << " is neither a GGUF nor an ONNX model"
              << (format.ok() ? "" : " (" + format.status().message() + ")") << "\n";
    return 1;
  }
  if ((a.speed || !a.what_if.empty()) && !gguf_profile) {
    std::cerr << "gantry: plan: --speed and --what-if need a GGUF model (ONNX plans are estimates)\n";
    return 2;
  }
  if (!a.what_if.empty()) {
    std::optional<plan::WhatIfTarget> self;
    if (mentions_this(a.what_if)) {
      std::string storage_note;
      self = this_machine(*registry, devices, &*catalogue, threads, a.sysroot.empty(), a.model, storage_note,
                          &*gguf_profile);
    }
    auto targets = plan::resolve_targets(*catalogue, a.what_if, self);
    if (!targets.ok()) {
      std::cerr << "gantry: plan: " << targets.status().message() << "\n";
      return 2;
    }
    plan::PlanOptions o = result.options;
    gguf_profile->name = path.filename().string();
    auto report = plan::what_if(*gguf_profile, o, *catalogue, *targets);
    if (!report.ok()) {
      std::cerr << "gantry: plan: " << report.status().to_string() << "\n";
      return 2;
    }
    std::cout << (a.json ? plan::what_if_to_json(*report).dump(2) + "\n" : plan::what_if_to_text(*report));
    return 0;
  }
  std::optional<plan::SpeedPrediction> speed;
  if (a.speed) {
    std::string storage_note;
    const plan::WhatIfTarget self =
        this_machine(*registry, devices, catalogue ? &*catalogue : nullptr, threads, a.sysroot.empty(),
                     a.model, storage_note, &*gguf_profile);
    auto s = plan::predict_speed(*gguf_profile, result, self.speeds, self.storage_bytes_per_s);
    if (!s.ok()) {
      std::cerr << "gantry: plan: --speed: " << s.status().to_string() << "\n";
      return 1;
    }
    s->assumptions.push_back(storage_note);
    speed = std::move(*s);
  }
  std::optional<llama::MemoryMeasurement> measured;
  if (a.measure) {
    if (result.estimate) {
      std::cerr << "gantry: plan: --measure needs a GGUF model (ONNX plans are estimates)\n";
      return 2;
    }
    auto m = measure_plan(path, result);
    if (!m.ok()) {
      std::cerr << "gantry: plan: --measure: " << m.status().to_string() << "\n";
      return 1;
    }
    measured = std::move(*m);
  }
  if (a.json) {
    nlohmann::json j = plan::plan_to_json(result);
    if (measured) j["measured"] = measurement_to_json(*measured);
    if (speed) j["speed"] = plan::speed_to_json(*speed);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << plan::plan_to_text(result);
    if (measured) std::cout << measurement_to_text(*measured, result.totals.total());
    if (speed) std::cout << plan::speed_to_text(*speed);
  }
  return 0;
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
