#include "gantry/hw/query.h"

#include <algorithm>

#include "gantry/core/version.h"

namespace gantry::hw {
namespace {

double family_weight(const Device& d) {
  if (d.kind == DeviceKind::kCpu) return 1;
  if (d.family == kFamilyCuda || d.family == kFamilyRocm) return 10;
  if (d.kind == DeviceKind::kTpu) return 9;
  if (d.kind == DeviceKind::kAsic) return 8;
  if (d.family == kFamilyIntelGpu) return 6;
  if (d.kind == DeviceKind::kGpu) return 5;  // seen only through Vulkan
  return 4;                                  // NPUs
}

// Does the device's version field reach `min`? A missing or unparsable device value does not.
Result<bool> at_least(const std::optional<std::string>& have, const std::string& min, std::string_view what) {
  auto want = Version::parse(min);
  if (!want.ok()) return want.status().with_context(std::string("requirement ") + std::string(what));
  if (!have) return false;
  auto got = Version::parse(*have);
  return got.ok() && *got >= *want;
}

}  // namespace

double device_rank(const Device& d) {
  double rank = family_weight(d) * 1e12;
  if (d.kind != DeviceKind::kCpu && d.memory_total_bytes)
    rank += static_cast<double>(*d.memory_total_bytes) / 1e3;
  if (d.compute_capability) {
    if (auto v = Version::parse(*d.compute_capability); v.ok()) {
      rank += v->major() * 10.0 + (v->parts().size() > 1 ? v->parts()[1] : 0);
    }
  }
  return rank;
}

std::vector<const Device*> family_devices(const Registry& registry, std::string_view family) {
  std::vector<const Device*> out;
  for (const auto& d : registry.devices)
    if (d.family == family) out.push_back(&d);
  return out;
}

const Device* find_device(const Registry& registry, std::string_view family, int index) {
  for (const auto& d : registry.devices)
    if (d.family == family && family_index(d) == index) return &d;
  return nullptr;
}

const Device* best_device(const Registry& registry) {
  const Device* best = nullptr;
  for (const Device& d : registry.devices) {
    if (best == nullptr || device_rank(d) > device_rank(*best)) best = &d;
  }
  return best;
}

Result<std::vector<const Device*>> find_devices(const Registry& registry, const Requirement& req) {
  std::vector<const Device*> out;
  for (const Device& d : registry.devices) {
    if (req.kind && d.kind != *req.kind) continue;
    if (req.family && d.family != *req.family) continue;
    if (req.min_memory_bytes && (!d.memory_total_bytes || *d.memory_total_bytes < *req.min_memory_bytes))
      continue;
    bool ok = true;
    if (req.min_compute_capability) {
      GANTRY_ASSIGN_OR_RETURN(
          bool meets, at_least(d.compute_capability, *req.min_compute_capability, "compute capability"));
      ok = ok && meets;
    }
    if (req.min_driver_version) {
      GANTRY_ASSIGN_OR_RETURN(bool meets,
                              at_least(d.driver_version, *req.min_driver_version, "driver version"));
      ok = ok && meets;
    }
    if (req.min_cuda_version) {
      GANTRY_ASSIGN_OR_RETURN(bool meets,
                              at_least(d.cuda_driver_version, *req.min_cuda_version, "CUDA version"));
      ok = ok && meets;
    }
    if (ok) out.push_back(&d);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Device* a, const Device* b) { return device_rank(*a) > device_rank(*b); });
  return out;
}

}  // namespace gantry::hw
