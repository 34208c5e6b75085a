#include "gantry/backend/registry.h"

#include <algorithm>
#include <filesystem>

#include "gantry/model/memory_rule.h"
#include "gantry/model/package.h"

namespace gantry::backend {

Status BackendRegistry::add(std::unique_ptr<Backend> backend) {
  if (!backend) return InvalidArgument("cannot register a null backend");
  if (find(backend->name()))
    return InvalidArgument("a backend named '" + std::string(backend->name()) + "' is already registered");
  backends_.push_back(std::move(backend));
  return Status::Ok();
}

Backend* BackendRegistry::find(std::string_view name) const {
  for (const auto& b : backends_)
    if (b->name() == name) return b.get();
  return nullptr;
}

Result<Backend*> BackendRegistry::for_format(std::string_view format) const {
  std::string names;
  for (const auto& b : backends_) {
    const auto& f = b->capabilities().formats;
    if (std::find(f.begin(), f.end(), format) != f.end()) return b.get();
    names += (names.empty() ? "" : ", ") + std::string(b->name());
  }
  return NotFound("no registered backend loads '" + std::string(format) +
                  "' models (registered: " + (names.empty() ? "none" : names) + ")");
}

BackendRegistry::Match BackendRegistry::match(const Requirements& req) const {
  Match m;
  for (const auto& b : backends_) {
    auto why = mismatches(b->capabilities(), req);
    if (why.empty())
      m.suitable.push_back(b.get());
    else
      m.rejected.emplace_back(std::string(b->name()), std::move(why));
  }
  return m;
}

std::vector<Backend*> BackendRegistry::all() const {
  std::vector<Backend*> out;
  for (const auto& b : backends_) out.push_back(b.get());
  return out;
}

}  // namespace gantry::backend

namespace gantry::backend {

Support Backend::precision_support(std::string_view, model::Precision, const hw::Device*) const {
  return Support::yes();
}

Result<double> Backend::measure(const model::Package&, const Placement& placement, double) {
  return Unsupported("backend " + std::string(name()) + " cannot time provider '" + placement.provider + "'");
}

uint64_t MemoryEstimate::total() const {
  uint64_t t = 0;
  for (const auto& [device, b] : bytes) t += b;
  return t;
}

Result<MemoryEstimate> Backend::estimate_memory(const model::Package& package, const Placement& placement) {
  std::error_code ec;
  const uint64_t file = std::filesystem::file_size(package.model_path(), ec);
  if (ec) return IoError("cannot size " + package.model_path().string() + ": " + ec.message());
  MemoryEstimate e;
  e.bytes[hw::memory_device_id(provider_family(placement.provider), placement.primary_device())] =
      model::rule_of_thumb_bytes(file);
  e.basis = "estimate: " + std::string(model::kRuleOfThumbBasis);
  return e;
}

}  // namespace gantry::backend
