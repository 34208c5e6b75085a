#include "gantry/backend/onnx/providers.h"

#include <dlfcn.h>
#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <filesystem>

#include "backend/onnx/session_providers.h"
#include "gantry/backend/factory.h"
#include "gantry/backend/onnx/ort_env.h"
#include "gantry/backend/onnx/ort_info.h"

namespace gantry::onnx {

using backend::Support;

namespace {

struct ProviderEntry {
  const char* name;
  const char* ort_name;
  std::string_view family;  // hw::kFamily*
};

// In the order the `fastest` policy tries them (TensorRT before plain CUDA; the CPU last).
constexpr ProviderEntry kProviders[] = {
    {"tensorrt", "TensorrtExecutionProvider", hw::kFamilyCuda},
    {"cuda", "CUDAExecutionProvider", hw::kFamilyCuda},
    {"rocm", "ROCMExecutionProvider", hw::kFamilyRocm},
    {"migraphx", "MIGraphXExecutionProvider", hw::kFamilyRocm},
    {"openvino", "OpenVINOExecutionProvider", hw::kFamilyIntelGpu},
    {"coreml", "CoreMLExecutionProvider", hw::kFamilyApple},
    {"directml", "DmlExecutionProvider", hw::kFamilyDirectX},
    {"cpu", "CPUExecutionProvider", hw::kFamilyCpu},
};

const ProviderEntry* find_entry(std::string_view provider) {
  const std::string p = backend::canonical_provider(provider);
  for (const auto& e : kProviders)
    if (p == e.name) return &e;
  return nullptr;
}

bool builtin(const char* ort_name) {
  auto all = ort_builtin_providers();
  return std::find(all.begin(), all.end(), ort_name) != all.end();
}

std::string builtin_list() {
  std::string s;
  for (const auto& p : ort_builtin_providers()) s += (s.empty() ? "" : ", ") + p;
  return s;
}

std::string ort_library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&OrtGetApiBase), &info) && info.dli_fname)
    return std::filesystem::path(info.dli_fname).parent_path().string();
  return {};
}

}  // namespace

Result<std::vector<Ort::ConstEpDevice>> cuda_ep_devices() {
  const std::string path = cuda_plugin_path();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return Unavailable(
        "the CUDA EP plugin " + path +
        " is not installed (run the set-up with GANTRY_WITH_CUDA_EP=1 on a machine with an NVIDIA GPU)");
  GANTRY_ASSIGN_OR_RETURN(OrtRuntime * rt, OrtRuntime::get());
  GANTRY_ASSIGN_OR_RETURN(auto devices, rt->plugin_devices("gantry-cuda", path, "CUDAExecutionProvider"));
  return std::vector<Ort::ConstEpDevice>(devices.begin(), devices.end());
}

const std::vector<std::string>& known_providers() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v;
    for (const auto& e : kProviders) v.emplace_back(e.name);
    return v;
  }();
  return kNames;
}

std::string ort_provider_name(std::string_view provider) {
  const auto* e = find_entry(provider);
  return e ? e->ort_name : "";
}

std::string_view provider_family(std::string_view provider) {
  const auto* e = find_entry(provider);
  return e ? e->family : std::string_view{};
}

std::string cuda_plugin_path() {
  if (const char* p = std::getenv("GANTRY_ORT_CUDA_EP"); p && *p) return p;
  return (std::filesystem::path(ort_library_dir()) / "libonnxruntime_providers_cuda.so").string();
}

Support provider_available(std::string_view provider) {
  const auto* e = find_entry(provider);
  if (!e) {
    std::string names;
    for (const auto& k : kProviders) names += (names.empty() ? "" : ", ") + std::string(k.name);
    return Support::no("unknown execution provider '" + std::string(provider) + "' (known: " + names + ")");
  }
  if (builtin(e->ort_name))
    return Support::yes(std::string(e->ort_name) + " built into ONNX Runtime " + ort_version());
  const std::string p = e->name;
  if (p == "cuda") {
    auto devs = cuda_ep_devices();
    if (!devs.ok()) return Support::no(devs.status().message());
    return Support::yes("CUDA EP plugin " + cuda_plugin_path() + " (" + std::to_string(devs->size()) +
                        " device(s))");
  }
  if (p == "tensorrt") {
    std::string why =
        "the TensorRT EP is not built into this ONNX Runtime and needs libnvinfer 10, which no package "
        "registry reachable here provides";
    if (void* h = dlopen("libnvinfer.so.10", RTLD_LAZY | RTLD_LOCAL)) {
      dlclose(h);
      why = "the TensorRT EP is not built into this ONNX Runtime " + ort_version() +
            " (libnvinfer.so.10 is installed, but no TensorRT EP library is)";
    }
    return Support::no(why);
  }
  return Support::no(std::string(e->ort_name) + " is not built into this ONNX Runtime " + ort_version() +
                     " (it has: " + builtin_list() + ")");
}

Status append_provider(Ort::SessionOptions& options, const backend::Placement& placement) {
  const auto* e = find_entry(placement.provider);
  if (!e) return Unsupported("unknown execution provider '" + placement.provider + "'");
  if (std::string_view(e->name) == "cpu") return Status::Ok();
  if (std::string_view(e->name) == "cuda" && !builtin(e->ort_name)) {
    auto devs = cuda_ep_devices();
    if (!devs.ok()) return devs.status();
    const int id = placement.primary_device();
    if (id < 0 || static_cast<size_t>(id) >= devs->size())
      return NotFound("CUDA device " + std::to_string(id) + " requested but the CUDA EP sees " +
                      std::to_string(devs->size()));
    GANTRY_ASSIGN_OR_RETURN(OrtRuntime * rt, OrtRuntime::get());
    try {
      std::unordered_map<std::string, std::string> ep_options;
      options.AppendExecutionProvider_V2(rt->env(), {(*devs)[static_cast<size_t>(id)]}, ep_options);
    } catch (const Ort::Exception& ex) {
      return Unavailable(std::string("adding the CUDA EP to the session failed: ") + ex.what());
    }
    return Status::Ok();
  }
  if (!builtin(e->ort_name)) return Unavailable(provider_available(e->name).reason);
  try {
    std::unordered_map<std::string, std::string> opts;
    if (e->family != hw::kFamilyCpu) opts["device_id"] = std::to_string(placement.primary_device());
    options.AppendExecutionProvider(e->ort_name, opts);
  } catch (const Ort::Exception& ex) {
    return Unavailable(std::string("adding ") + e->ort_name + " to the session failed: " + ex.what());
  }
  return Status::Ok();
}

}  // namespace gantry::onnx
