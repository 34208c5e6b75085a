#include "gantry/backend/onnx/onnx_backend.h"

#include <algorithm>

#include "gantry/backend/onnx/onnx_model.h"
#include "gantry/backend/onnx/ort_env.h"
#include "gantry/backend/onnx/ort_info.h"
#include "gantry/backend/onnx/providers.h"
#include "gantry/backend/synthesize.h"
#include "gantry/core/version.h"
#include "gantry/model/manifest.h"
#include "gantry/model/memory_image.h"
#include "gantry/model/package.h"

namespace gantry::onnx {

using backend::Support;

OnnxBackend::OnnxBackend() : OnnxBackend(OnnxBackendOptions{}) {}

OnnxBackend::OnnxBackend(OnnxBackendOptions options) : options_(std::move(options)) {
  caps_.dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
                  DType::kInt16,   DType::kInt32,   DType::kInt64,    DType::kUInt8,   DType::kUInt16,
                  DType::kUInt32,  DType::kUInt64,  DType::kBool,     DType::kString};
  caps_.families = {std::string(hw::kFamilyCpu)};
  for (const auto& p : known_providers()) {
    const std::string family(provider_family(p));
    if (family != hw::kFamilyCpu && provider_available(p).ok &&
        std::find(caps_.families.begin(), caps_.families.end(), family) == caps_.families.end())
      caps_.families.push_back(family);
  }
  caps_.max_batch = 0;
  caps_.dynamic_shapes = true;
  caps_.streams = false;
  caps_.text_generation = false;
  caps_.formats = {"onnx"};
  caps_.model_parallel = false;
}

std::string OnnxBackend::version() const { return ort_version(); }

Support OnnxBackend::supports(const hw::Device& device) const {
  if (device.family == hw::kFamilyCpu) return Support::yes("CPU EP built in");
  for (const auto& p : known_providers())
    if (provider_family(p) == device.family && provider_available(p).ok)
      return Support::yes("via the " + p + " execution provider");
  std::string why;
  for (const auto& p : known_providers())
    if (provider_family(p) == device.family)
      why += (why.empty() ? "" : "; ") + p + ": " + provider_available(p).reason;
  return Support::no("no execution provider for " + device.family + " devices" +
                     (why.empty() ? "" : " (" + why + ")"));
}

std::vector<std::string> OnnxBackend::providers() const { return known_providers(); }

Support OnnxBackend::provider_available(std::string_view provider) const {
  return onnx::provider_available(provider);
}

std::string_view OnnxBackend::provider_family(std::string_view provider) const {
  return onnx::provider_family(provider);
}

Support OnnxBackend::precision_support(std::string_view provider, model::Precision precision,
                                       const hw::Device* device) const {
  using model::Precision;
  const std::string name(model::precision_name(precision));
  const std::string_view family = provider_family(provider);
  if (family == hw::kFamilyCpu) {
    const std::string arch = device && device->arch ? *device->arch : "this CPU";
    switch (precision) {
      case Precision::kFp32:
      case Precision::kFp64:
      case Precision::kInt8:
      case Precision::kInt4:
        return Support::yes();
      case Precision::kFp16:
        if (arch == "aarch64" || arch == "arm64") return Support::yes("MLAS fp16 kernels on ARM64");
        return Support::no(
            "ONNX Runtime's CPU EP has fp16 kernels only on ARM64; on " + arch +
            " an fp16 model's MatMul/Conv run as fp32 behind inserted casts (use a GPU provider, "
            "or declare fp32)");
      case Precision::kBf16:
        return Support::no("ONNX Runtime's CPU EP has no bf16 MatMul/Conv kernels");
    }
  }
  if (family == hw::kFamilyCuda) {
    if (!device || !device->compute_capability)
      return Support::yes("compute capability unknown: not checked");
    auto cc = Version::parse(*device->compute_capability);
    if (!cc.ok()) return Support::yes("compute capability unknown: not checked");
    auto needs = [&](const char* min, const char* what) {
      auto v = Version::parse(min);
      if (v.ok() && *cc < *v)
        return Support::no(name + " " + what + " needs compute capability " + min + " or newer; " +
                           device->id + " (" + device->name + ") has " + *device->compute_capability);
      return Support::yes();
    };
    switch (precision) {
      case Precision::kFp16:
        return needs("5.3", "arithmetic");
      case Precision::kInt8:
        return needs("6.1", "dot products (dp4a)");
      case Precision::kBf16:
        return needs("8.0", "arithmetic");
      default:
        return Support::yes();
    }
  }
  return Support::yes();
}

Result<std::unique_ptr<backend::Model>> OnnxBackend::load(const model::Package& package,
                                                          const backend::Placement& placement) {
  const auto& mf = package.manifest();
  if (mf.format != model::ModelFormat::kOnnx)
    return InvalidArgument("package " + package.source().string() + " holds a " +
                           std::string(model::model_format_name(mf.format)) + " model, not ONNX");
  OnnxModelOptions model_options;
  GANTRY_RETURN_IF_ERROR(register_pools(placement, model_options.use_env_allocators));
  const std::string model_name = placement.model_name.empty() ? mf.name : placement.model_name;
  // A model in memory: ONNX Runtime reads the bytes of its sealed image, which the model keeps.
  const auto& image = package.image();
  auto m = image ? OnnxModel::open_bytes(image->bytes(), image, package.source().string(), placement,
                                         model_name, model_options)
                 : OnnxModel::open(package.model_path(), placement, model_name, model_options);
  if (!m.ok()) return m.status();
  // A manifest that declares io must agree with the model.
  if (mf.io) {
    const auto& meta = (*m)->metadata();
    auto check = [&](const std::vector<model::TensorSpec>& specs, bool inputs) -> Status {
      for (const auto& spec : specs) {
        const int i = inputs ? meta.input_index(spec.name) : meta.output_index(spec.name);
        const char* what = inputs ? "inputs" : "outputs";
        if (i < 0)
          return InvalidArgument("manifest io." + std::string(what) + " names '" + spec.name +
                                 "', which model " + package.model_path().string() + " does not have");
        const auto& info = inputs ? meta.inputs[i] : meta.outputs[i];
        if (spec.dtype && *spec.dtype != info.dtype)
          return InvalidArgument("manifest io." + std::string(what) + " '" + spec.name + "' says dtype " +
                                 std::string(dtype_name(*spec.dtype)) + ", the model has " +
                                 std::string(dtype_name(info.dtype)));
        // A declared shape: the same rank, and every dim both give as a number the same.
        bool same = !spec.shape || spec.shape->rank() == info.shape.rank();
        for (size_t d = 0; same && spec.shape && d < spec.shape->rank(); ++d)
          same = (*spec.shape)[d] == Shape::kDynamic || info.shape[d] == Shape::kDynamic ||
                 (*spec.shape)[d] == info.shape[d];
        if (!same)
          return InvalidArgument("manifest io." + std::string(what) + " '" + spec.name + "' says shape " +
                                 spec.shape->to_string() + ", the model has " + info.shape.to_string());
      }
      return Status::Ok();
    };
    GANTRY_RETURN_IF_ERROR(check(mf.io->inputs, true));
    GANTRY_RETURN_IF_ERROR(check(mf.io->outputs, false));
  }
  return std::unique_ptr<backend::Model>(std::move(m).value());
}

Result<double> OnnxBackend::measure(const model::Package& package, const backend::Placement& placement,
                                    double budget_ms) {
  GANTRY_ASSIGN_OR_RETURN(auto model, load(package, placement));
  const model::SessionBucket* bucket =
      placement.onnx.session_buckets.empty() ? nullptr : &placement.onnx.session_buckets[0];
  GANTRY_ASSIGN_OR_RETURN(auto inputs, backend::synthesize_inputs(model->metadata(), bucket));
  return backend::time_inferences(*model, inputs, budget_ms);
}

Result<backend::MemoryEstimate> OnnxBackend::estimate_memory(const model::Package& package,
                                                             const backend::Placement& placement) {
  GANTRY_ASSIGN_OR_RETURN(backend::MemoryEstimate e, Backend::estimate_memory(package, placement));
  const std::string_view family = onnx::provider_family(placement.provider);
  if (family == hw::kFamilyCuda) {
    e.bytes[hw::memory_device_id(family, placement.primary_device())] += kCudaEpUnpooledBytes;
    e.basis += "; + 64 MiB for the CUDA EP's cuBLAS/cuDNN workspaces, allocated outside the pool";
  }
  return e;
}

Status OnnxBackend::register_pools(const backend::Placement& placement, bool& use_pools) {
  use_pools = false;
  if (!options_.cpu_pool && options_.device_pools.empty()) return Status::Ok();
  GANTRY_ASSIGN_OR_RETURN(OrtRuntime * rt, OrtRuntime::get());
  if (options_.cpu_pool) {
    if (options_.cpu_pool->device() != "cpu")
      return InvalidArgument("the ONNX backend's cpu_pool is a pool for " + options_.cpu_pool->device());
    GANTRY_RETURN_IF_ERROR(rt->use_pool(options_.cpu_pool));
    use_pools = true;
  }
  // A device pool is registered when a session is about to run on its device (the EP plugin must be
  // registered first, which placing on the device does).
  const std::string_view family = onnx::provider_family(placement.provider);
  if (!family.empty() && family != hw::kFamilyCpu) {
    const std::string device = hw::memory_device_id(family, placement.primary_device());
    for (memory::BlockPool* pool : options_.device_pools) {
      if (!pool || pool->device() != device) continue;
      GANTRY_RETURN_IF_ERROR(rt->use_pool(pool));
      use_pools = true;
    }
  }
  return Status::Ok();
}

std::unique_ptr<backend::Backend> make_onnx_backend() { return std::make_unique<OnnxBackend>(); }

std::unique_ptr<backend::Backend> make_onnx_backend(OnnxBackendOptions options) {
  return std::make_unique<OnnxBackend>(std::move(options));
}

}  // namespace gantry::onnx
