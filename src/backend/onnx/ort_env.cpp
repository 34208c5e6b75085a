#include "gantry/backend/onnx/ort_env.h"

#include <fstream>

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

OrtRuntime::OrtRuntime() : env_(ORT_LOGGING_LEVEL_WARNING, "gantry", ort_log, nullptr) {}

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

Result<std::vector<Ort::ConstEpDevice>> OrtRuntime::plugin_devices(const std::string& registration_name,
                                                                   const std::string& library_path,
                                                                   const std::string& ep_name) {
  std::lock_guard lock(mu_);
  const Plugin* found = nullptr;
  for (const auto& p : plugins_)
    if (p.name == registration_name) found = &p;
  if (!found) {
    Status s;
    try {
      env_.RegisterExecutionProviderLibrary(registration_name.c_str(), library_path);
    } catch (const Ort::Exception& e) {
      s = Unavailable("registering " + library_path + " failed: " + e.what());
    }
    plugins_.push_back({registration_name, s});
    found = &plugins_.back();
  }
  if (!found->status.ok()) return found->status;
  std::vector<Ort::ConstEpDevice> out;
  try {
    for (const auto& d : env_.GetEpDevices())
      if (ep_name == d.EpName()) out.push_back(d);
  } catch (const Ort::Exception& e) {
    return Unavailable(std::string("listing EP devices failed: ") + e.what());
  }
  if (out.empty())
    return Unavailable(ep_name + " registered from " + library_path +
                       " but it reports no device (no GPU or driver)");
  return out;
}

}  // namespace gantry::onnx
