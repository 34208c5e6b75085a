// `gantry plan MODEL`: how much memory a model takes at a context size, layer by layer over the devices.
// GGUF models get llama.cpp's exact rules (gantry/plan/planner.h); other files a labelled estimate.
// Extension points kept for the integrator: `--explain` (provider choice) and `--measure` (llama.cpp's
// measured buffers) would add keys to the JSON from plan_to_json() and lines after plan_to_text().
#include <fstream>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "gantry/hw/detect.h"
#include "gantry/hw/loader.h"
#include "gantry/hw/machine.h"
#include "gantry/plan/plan_json.h"
#include "gantry/plan/planner.h"
#include "gantry/runtime/model_profile.h"

namespace gantry::cli {
namespace {

namespace fs = std::filesystem;

struct PlanArgs {
  std::string model;
  uint32_t ctx = 0;
  uint32_t parallel = 1;
  uint32_t batch = 2048;
  uint32_t ubatch = 512;
  std::string kv_type = "f16";
  std::string flash_attn = "auto";
  int gpu_layers = -1;
  bool json = false;
  std::string sysroot;
};

bool is_gguf(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::string(magic, 4) == "GGUF";
}

hw::Registry detect_devices(const std::string& sysroot) {
  if (sysroot.empty()) return hw::detect_local();
  auto machine = hw::make_disk_machine(sysroot);
  auto loader = hw::make_null_loader();
  return hw::detect(*machine, *loader);
}

int run_plan(const PlanArgs& a) {
  const fs::path path(a.model);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    std::cerr << "gantry: plan: " << a.model << " is not a model file (expected a .gguf or .onnx file)\n";
    return 1;
  }
  const auto kv = plan::parse_kv_type(a.kv_type);
  if (!kv) {
    std::cerr << "gantry: plan: unknown --kv-type " << a.kv_type
              << " (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl)\n";
    return 2;
  }
  const std::vector<plan::Device> devices = runtime::devices_from_registry(detect_devices(a.sysroot));

  plan::Plan result;
  if (is_gguf(path)) {
    auto profile = runtime::profile_from_gguf(path);
    if (!profile.ok()) {
      std::cerr << "gantry: plan: " << profile.status().to_string() << "\n";
      return 1;
    }
    plan::PlanOptions o;
    o.n_ctx = a.ctx;
    o.n_parallel = a.parallel;
    o.n_batch = a.batch;
    o.n_ubatch = a.ubatch;
    o.kv_type = *kv;
    o.flash_attn = a.flash_attn != "off";
    o.n_gpu_layers = a.gpu_layers;
    auto p = plan::plan_gguf(*profile, o, devices);
    if (!p.ok()) {
      std::cerr << "gantry: plan: " << p.status().to_string() << "\n";
      return p.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    result = std::move(*p);
    result.model = path.filename().string() + " (" + profile->architecture + ", " +
                   std::to_string(profile->n_layer()) + " layers, " + profile->weight_type + ")";
  } else {
    result = plan::estimate_generic(path.filename().string(), fs::file_size(path, ec), devices);
  }
  if (a.json) {
    std::cout << plan::plan_to_json(result).dump(2) << "\n";
  } else {
    std::cout << plan::plan_to_text(result);
  }
  return 0;
}

}  // namespace

void register_plan_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd =
      app.add_subcommand("plan", "Predict the memory a model needs and how its layers split over devices");
  cmd->add_option("model", args->model, "Model file (.gguf: exact llama.cpp rules; .onnx: estimate)")
      ->required();
  cmd->add_option("--ctx", args->ctx, "Context size in tokens (default: the model's training context)");
  cmd->add_option("--parallel", args->parallel, "Sequences decoded together")->check(CLI::Range(1, 256));
  cmd->add_option("--batch", args->batch, "Logical batch size (llama.cpp n_batch)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--ubatch", args->ubatch, "Physical batch size (llama.cpp n_ubatch)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--kv-type", args->kv_type, "KV cache type: f16, q8_0, q4_0, ...");
  cmd->add_option("--flash-attn", args->flash_attn, "Flash attention: on, off or auto (auto = on)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  cmd->add_option("--gpu-layers", args->gpu_layers,
                  "Layers to offload to GPUs (-1: all, with the output layer)");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->add_option("--sysroot", args->sysroot, "Describe the machine captured under this directory");
  cmd->callback([args, &exit_code] { exit_code = run_plan(*args); });
}

}  // namespace gantry::cli
