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

// Device memory the CUDA EP takes outside the pool per model (cuBLAS's and cuDNN's workspaces).
inline constexpr uint64_t kCudaEpUnpooledBytes = 64ull << 20;

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
  // CPU EP: fp32, fp64, int8 (QDQ/QLinear kernels), int4 (MatMulNBits); fp16 only on ARM64 (MLAS's fp16
  // kernels), bf16 never. CUDA/TensorRT: fp16 from compute capability 5.3, int8 from 6.1, bf16 from 8.0.
  // Other providers: yes (not checked).
  backend::Support precision_support(std::string_view provider, model::Precision precision,
                                     const hw::Device* device) const override;
  Result<std::unique_ptr<backend::Model>> load(const model::Package& package,
                                               const backend::Placement& placement) override;
  Result<double> measure(const model::Package& package, const backend::Placement& placement,
                         double budget_ms) override;
  // The default estimate; on a CUDA device plus kCudaEpUnpooledBytes for what the CUDA EP allocates
  // outside the pool (cuBLAS and cuDNN workspaces), so that the budget still holds it.
  Result<backend::MemoryEstimate> estimate_memory(const model::Package& package,
                                                  const backend::Placement& placement) override;

  const OnnxBackendOptions& options() const { return options_; }

 private:
  Status register_pools(const backend::Placement& placement, bool& use_pools);

  backend::Capabilities caps_;
  OnnxBackendOptions options_;
};

std::unique_ptr<backend::Backend> make_onnx_backend();
std::unique_ptr<backend::Backend> make_onnx_backend(OnnxBackendOptions options);

}  // namespace gantry::onnx
