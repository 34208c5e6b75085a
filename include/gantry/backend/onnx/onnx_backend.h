// OnnxBackend: ONNX Runtime as a gantry::backend::Backend.
#pragma once

#include <memory>
#include <vector>

#include "gantry/backend/backend.h"
#include "gantry/memory/block_pool.h"

namespace gantry::onnx {

// Where the backend's sessions get memory. The default is ORT's own arena (per session). With pools,
// the backend registers them on the process's ORT env (OrtRuntime::use_pool, process-wide) and every
// session it creates allocates from them, attributed to the model (see OnnxModelOptions). Pools are
// borrowed and must outlive every model the backend loads.
struct OnnxBackendOptions {
  memory::BlockPool* cpu_pool = nullptr;         // host memory (device "cpu")
  std::vector<memory::BlockPool*> device_pools;  // accelerator memory, by their device ("cuda:0")
};

class OnnxBackend final : public backend::Backend {
 public:
  OnnxBackend();
  explicit OnnxBackend(OnnxBackendOptions options);

  std::string_view name() const override { return "onnxruntime"; }
  std::string version() const override;
  const backend::Capabilities& capabilities() const override { return caps_; }
  backend::Support supports(const hw::Device& device) const override;
  std::vector<std::string> providers() const override;
  backend::Support provider_available(std::string_view provider) const override;
  std::string_view provider_family(std::string_view provider) const override;
  Result<std::unique_ptr<backend::Model>> load(const model::Package& package,
                                               const backend::Placement& placement) override;
  Result<double> measure(const model::Package& package, const backend::Placement& placement,
                         double budget_ms) override;

  const OnnxBackendOptions& options() const { return options_; }

 private:
  Status register_pools(const backend::Placement& placement, bool& use_pools);

  backend::Capabilities caps_;
  OnnxBackendOptions options_;
};

std::unique_ptr<backend::Backend> make_onnx_backend();
std::unique_ptr<backend::Backend> make_onnx_backend(OnnxBackendOptions options);

}  // namespace gantry::onnx
