// OnnxBackend: ONNX Runtime as a gantry::backend::Backend.
#pragma once

#include <memory>

#include "gantry/backend/backend.h"

namespace gantry::onnx {

class OnnxBackend final : public backend::Backend {
 public:
  OnnxBackend();

  std::string_view name() const override { return "onnxruntime"; }
  std::string version() const override;
  const backend::Capabilities& capabilities() const override { return caps_; }
  backend::Support supports(const backend::DeviceInfo& device) const override;
  std::vector<std::string> providers() const override;
  backend::Support provider_available(std::string_view provider) const override;
  backend::DeviceKind provider_device_kind(std::string_view provider) const override;
  Result<std::unique_ptr<backend::Model>> load(const model::Package& package,
                                               const backend::Placement& placement) override;
  Result<double> measure(const model::Package& package, const backend::Placement& placement,
                         double budget_ms) override;

 private:
  backend::Capabilities caps_;
};

std::unique_ptr<backend::Backend> make_onnx_backend();

}  // namespace gantry::onnx
