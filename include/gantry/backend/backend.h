// Backend: one inference engine (ONNX Runtime, llama.cpp) behind a common interface.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/backend/capabilities.h"
#include "gantry/backend/model.h"
#include "gantry/backend/placement.h"
#include "gantry/core/status.h"
#include "gantry/hw/registry.h"

namespace gantry::model {
class Package;         // gantry/model/package.h
enum class Precision;  // gantry/model/manifest.h
}  // namespace gantry::model

namespace gantry::backend {

// Whether something can be used, and if not, why (a sentence a user can act on).
struct Support {
  bool ok = false;
  std::string reason;

  static Support yes(std::string why = {}) { return {true, std::move(why)}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
};

// What a model will hold once loaded, per device id ("cpu", "cuda:0"; see hw::memory_device_id()), known
// before it is loaded, so that a memory budget can refuse it or make room first.
struct MemoryEstimate {
  std::map<std::string, uint64_t> bytes;  // device id -> bytes
  bool exact = false;                     // from the engine's own dry run, not a rule of thumb
  std::string basis;                      // how it was obtained, for messages ("llama.cpp dry run")
  uint64_t total() const;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;  // "onnxruntime", "llama.cpp"
  virtual std::string version() const = 0;    // the engine's version, e.g. "1.29.0"
  virtual const Capabilities& capabilities() const = 0;

  // Whether this backend (as built) can run models on `device`.
  virtual Support supports(const hw::Device& device) const = 0;

  // Providers this backend knows, by canonical name ("tensorrt", "cuda", ..., "cpu"), in the order the
  // `fastest` policy tries them: the fastest first.
  virtual std::vector<std::string> providers() const = 0;

  // Whether `provider` can be used in this process: built in, or its plugin library present and
  // loadable. Unknown providers are unavailable with a reason naming the known ones.
  virtual Support provider_available(std::string_view provider) const = 0;

  // The device family a provider runs on (hw::kFamily*: cpu -> "cpu", cuda and tensorrt -> "cuda", ...).
  virtual std::string_view provider_family(std::string_view provider) const = 0;

  // Whether `provider` computes at `precision` (a manifest's hardware_requirements.required_precision) on
  // `device` (nullptr: unknown), and if not, why: e.g. ONNX Runtime's CPU EP on x86 has no fp16 kernels
  // for the heavy operators. The default: yes.
  virtual Support precision_support(std::string_view provider, model::Precision precision,
                                    const hw::Device* device) const;

  virtual Result<std::unique_ptr<Model>> load(const model::Package& package, const Placement& placement) = 0;

  // For the `measured` provider policy: loads the model under `placement`, runs a few warm inferences on
  // inputs synthesised from its metadata (spending about `budget_ms` on timed runs) and returns the
  // median latency in µs. The default says the backend cannot be measured.
  virtual Result<double> measure(const model::Package& package, const Placement& placement, double budget_ms);

  // Memory the model will take under `placement`, per device. The default: the model file's size on
  // the placement's device plus a quarter for activations (labelled as an estimate).
  virtual Result<MemoryEstimate> estimate_memory(const model::Package& package, const Placement& placement);
};

}  // namespace gantry::backend
