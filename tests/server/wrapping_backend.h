// A real backend whose every model comes wrapped in `Wrapper` (a test's fault or probe around a real
// model: `Wrapper(std::unique_ptr<backend::Model>)`); everything else is the real backend's answer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gantry/backend/backend.h"

namespace gantry::testutil {

template <class Wrapper>
class WrappingBackend final : public backend::Backend {
 public:
  explicit WrappingBackend(std::unique_ptr<backend::Backend> inner) : inner_(std::move(inner)) {}
  std::string_view name() const override { return inner_->name(); }
  std::string version() const override { return inner_->version(); }
  const backend::Capabilities& capabilities() const override { return inner_->capabilities(); }
  backend::Support supports(const hw::Device& d) const override { return inner_->supports(d); }
  std::vector<std::string> providers() const override { return inner_->providers(); }
  backend::Support provider_available(std::string_view p) const override {
    return inner_->provider_available(p);
  }
  std::string_view provider_family(std::string_view p) const override { return inner_->provider_family(p); }
  backend::Support precision_support(std::string_view p, model::Precision precision,
                                     const hw::Device* d) const override {
    return inner_->precision_support(p, precision, d);
  }
  Result<std::unique_ptr<backend::Model>> load(const model::Package& package,
                                               const backend::Placement& placement) override {
    auto m = inner_->load(package, placement);
    if (!m.ok()) return m;
    return std::unique_ptr<backend::Model>(std::make_unique<Wrapper>(std::move(*m)));
  }
  Result<double> measure(const model::Package& package, const backend::Placement& p,
                         double budget_ms) override {
    return inner_->measure(package, p, budget_ms);
  }
  Result<backend::MemoryEstimate> estimate_memory(const model::Package& package,
                                                  const backend::Placement& p) override {
    return inner_->estimate_memory(package, p);
  }

 private:
  std::unique_ptr<backend::Backend> inner_;
};

}  // namespace gantry::testutil
