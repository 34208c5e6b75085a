#include "gantry/backend/onnx/ort_env.h"

#include <onnxruntime_cxx_api.h>

#include <fstream>

#include "backend/onnx/pool_allocator.h"
#include "backend/onnx/session_providers.h"
#include "gantry/core/log.h"

namespace gantry::onnx {

namespace {

void ort_log(void* /*param*/, OrtLoggingLevel severity, const char* category, const char* /*logid*/,
             const char* code_location, const char* message) {
  auto& log = logger();
  switch (severity) {
    case ORT_LOGGING_LEVEL_WARNING:
      log.warn("onnxruntime [{}] {} ({})", category, message, code_location);
      break;
    case ORT_LOGGING_LEVEL_ERROR:
      log.error("onnxruntime [{}] {} ({})", category, message, code_location);
      break;
    case ORT_LOGGING_LEVEL_FATAL:
      log.critical("onnxruntime [{}] {} ({})", category, message, code_location);
      break;
    default:
      log.debug("onnxruntime [{}] {}", category, message);
      break;
  }
}

}  // namespace

size_t process_cmdline_bytes() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  if (!in) return 0;
  size_t n = 0;
  char buf[4096];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) n += static_cast<size_t>(in.gcount());
  return n;
}

OrtRuntime::OrtRuntime()
    : env_(std::make_unique<Ort::Env>(ORT_LOGGING_LEVEL_WARNING, "gantry", ort_log, nullptr)) {}

OrtRuntime::~OrtRuntime() = default;

Result<OrtRuntime*> OrtRuntime::get() {
  static Result<OrtRuntime*> instance = []() -> Result<OrtRuntime*> {
    if (size_t n = process_cmdline_bytes(); n > kMaxOrtCmdlineBytes)
      return FailedPrecondition(
          "the process command line is " + std::to_string(n / 1024) +
          " KB; ONNX Runtime overflows its stack above ~30 KB. Pass fewer arguments (e.g. a "
          "parent directory instead of each model)");
    try {
      return new OrtRuntime();  // lives for the whole process: ORT must outlive every session
    } catch (const Ort::Exception& e) {
      return Internal(std::string("cannot initialise ONNX Runtime: ") + e.what());
    }
  }();
  return instance;
}

Result<std::vector<const OrtEpDevice*>> OrtRuntime::plugin_devices(const std::string& registration_name,
                                                                   const std::string& library_path,
                                                                   const std::string& ep_name) {
  std::lock_guard lock(mu_);
  const Plugin* found = nullptr;
  for (const auto& p : plugins_)
    if (p.name == registration_name) found = &p;
  if (!found) {
    Status s;
    try {
      env_->RegisterExecutionProviderLibrary(registration_name.c_str(), library_path);
    } catch (const Ort::Exception& e) {
      s = Unavailable("registering " + library_path + " failed: " + e.what());
    }
    plugins_.push_back({registration_name, s});
    found = &plugins_.back();
  }
  if (!found->status.ok()) return found->status;
  std::vector<const OrtEpDevice*> out;
  try {
    for (const auto& d : env_->GetEpDevices())
      if (ep_name == d.EpName()) out.push_back(d);
  } catch (const Ort::Exception& e) {
    return Unavailable(std::string("listing EP devices failed: ") + e.what());
  }
  if (out.empty())
    return Unavailable(ep_name + " registered from " + library_path +
                       " but it reports no device (no GPU or driver)");
  return out;
}

Status OrtRuntime::use_pool(memory::BlockPool* pool) {
  if (!pool) return InvalidArgument("no memory pool given");
  const std::string device = pool->device();
  // The memory info ORT will look the allocator up by.
  Ort::MemoryInfo cpu_info{nullptr};
  const OrtMemoryInfo* info = nullptr;
  if (device == "cpu") {
    cpu_info = Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault);
    info = cpu_info;
  } else if (device.rfind("cuda:", 0) == 0) {
    const int ordinal = std::atoi(device.c_str() + 5);
    GANTRY_ASSIGN_OR_RETURN(auto devices, cuda_ep_devices());
    if (ordinal < 0 || static_cast<size_t>(ordinal) >= devices.size())
      return NotFound("memory pool for " + device + " but the CUDA EP sees " +
                      std::to_string(devices.size()) + " device(s)");
    const OrtMemoryInfo* mi =
        Ort::GetApi().EpDevice_MemoryInfo(devices[static_cast<size_t>(ordinal)], OrtDeviceMemoryType_DEFAULT);
    if (!mi) return Unavailable("the CUDA EP reports no device memory for " + device);
    info = mi;  // lives with the plugin, which stays registered for the process
  } else {
    return Unsupported("no ONNX Runtime memory for pool device '" + device +
                       "' (cpu and cuda:N are supported)");
  }
  std::lock_guard lock(mu_);
  auto it = registered_.find(device);
  if (it != registered_.end() && it->second->pool() == pool) return Status::Ok();
  auto adapter = cpu_info ? std::make_unique<PoolAllocator>(pool, std::move(cpu_info))
                          : std::make_unique<PoolAllocator>(pool, info);
  const OrtApi& api = Ort::GetApi();
  OrtStatus* st = api.RegisterAllocator(*env_, adapter->ort());
  if (st) {
    // Something (our earlier pool, or the default shared allocator of an EP device) holds the slot.
    api.ReleaseStatus(st);
    if (OrtStatus* u = api.UnregisterAllocator(*env_, adapter->info())) api.ReleaseStatus(u);
    st = api.RegisterAllocator(*env_, adapter->ort());
  }
  if (st) {
    std::string msg = api.GetErrorMessage(st);
    api.ReleaseStatus(st);
    return Internal("registering the memory pool for " + device + " with ONNX Runtime failed: " + msg);
  }
  if (it != registered_.end())
    // kapsl refuses a second pool for a device; Gantry replaces it for sessions created from now on (two
    // runtimes in one process each bring their own pool, and each session keeps the pool it took), and says
    // so.
    GANTRY_LOG_INFO(
        "ONNX Runtime's {} allocator: a second memory pool replaces the first for sessions created "
        "from now on (earlier sessions keep theirs)",
        device);
  registered_[device] = adapter.get();
  allocators_.push_back(std::move(adapter));
  GANTRY_LOG_DEBUG("ONNX Runtime allocates {} memory from Gantry's pool", device);
  return Status::Ok();
}

void OrtRuntime::release_pool(memory::BlockPool* pool) {
  std::lock_guard lock(mu_);
  for (auto it = registered_.begin(); it != registered_.end(); ++it) {
    if (it->second->pool() != pool) continue;
    if (OrtStatus* st = Ort::GetApi().UnregisterAllocator(*env_, it->second->info()))
      Ort::GetApi().ReleaseStatus(st);
    registered_.erase(it);
    return;
  }
}

memory::BlockPool* OrtRuntime::pool_for(const std::string& device) {
  std::lock_guard lock(mu_);
  auto it = registered_.find(device);
  return it == registered_.end() ? nullptr : it->second->pool();
}

}  // namespace gantry::onnx
