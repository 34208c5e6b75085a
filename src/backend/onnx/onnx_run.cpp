// OnnxModel's Run (see onnx_model.h): binding the inputs, the Run with output buffers reused from the
// model's cache, and unpacking the outputs into Tensors.
#include <onnxruntime_cxx_api.h>

#include <atomic>
#include <cstdlib>
#include <optional>

#include "backend/onnx/ort_status.h"
#include "backend/onnx/ort_values.h"
#include "backend/onnx/pool_allocator.h"
#include "gantry/backend/onnx/onnx_model.h"
#include "gantry/core/log.h"
#include "gantry/memory/owner_scope.h"

namespace gantry::onnx {

using backend::NamedTensor;
using backend::TensorInfo;

namespace {

const OrtApi& api() { return Ort::GetApi(); }

// For calls that cannot fail on a valid tensor (its info getters).
void release(OrtStatus* s) {
  if (s) api().ReleaseStatus(s);
}

}  // namespace

// What a Run took from the output cache: per output, the cached buffer ORT writes into (null when ORT
// allocates that output itself) and the shape predicted for it.
struct OnnxModel::ReusedOutputs {
  explicit ReusedOutputs(size_t outputs) : held(outputs), dims(outputs) {}
  SmallArray<std::shared_ptr<std::byte[]>> held;
  SmallArray<std::vector<int64_t>> dims;
  bool any = false;
};

void OnnxModel::plan_output_reuse() {
  // Only CPU sessions: other EPs' outputs are copied back by ORT, and stay ORT's business.
  if (placement_.provider != "cpu") return;
  output_dims_.assign(meta_.outputs.size(), {});
  slots_.assign(meta_.outputs.size(), {});
  bool any = false;
  for (size_t o = 0; o < meta_.outputs.size(); ++o) {
    const TensorInfo& out = meta_.outputs[o];
    // Strings have no fixed size; rank 0 may also mean "shape unknown", which a scalar would mispredict.
    if (out.dtype == DType::kString || out.shape.rank() == 0) continue;
    std::vector<DimSource> dims(out.shape.rank());
    bool ok = true;
    for (size_t d = 0; d < out.shape.rank() && ok; ++d) {
      if (out.shape[d] != Shape::kDynamic) {
        dims[d].value = out.shape[d];
        continue;
      }
      ok = false;
      const std::string& name = out.dim_names[d];
      for (size_t i = 0; i < meta_.inputs.size() && !ok && !name.empty(); ++i)
        for (size_t j = 0; j < meta_.inputs[i].dim_names.size() && !ok; ++j)
          if (meta_.inputs[i].dim_names[j] == name) {
            dims[d].input = static_cast<int>(i);
            dims[d].dim = static_cast<int>(j);
            ok = true;
          }
    }
    if (!ok) continue;
    output_dims_[o] = std::move(dims);
    any = true;
  }
  reuse_outputs_ = any;
}

OrtValue* OnnxModel::take_slot(size_t o, const std::vector<int64_t>& dims,
                               std::shared_ptr<std::byte[]>& held) {
  constexpr size_t kMaxSlots = 4;  // per output: enough for callers that keep a few results alive
  std::lock_guard lock(slots_mu_);
  auto& cache = slots_[o];
  for (auto& slot : cache) {
    if (slot.dims == dims && slot.buffer.use_count() == 1) {
      // Every former holder has dropped its copy; see their reads before ORT writes again.
      std::atomic_thread_fence(std::memory_order_acquire);
      held = slot.buffer;
      return slot.value;
    }
  }
  // Evict a free slot of another shape, or add one while there is room.
  OutputSlot* slot = nullptr;
  for (auto& s : cache)
    if (s.buffer.use_count() == 1) slot = &s;
  if (!slot) {
    if (cache.size() >= kMaxSlots) return nullptr;
    slot = &cache.emplace_back();
  } else if (slot->value) {
    api().ReleaseValue(slot->value);
    slot->value = nullptr;
  }
  const DType dt = meta_.outputs[o].dtype;
  size_t count = 1;
  for (int64_t d : dims) count *= static_cast<size_t>(d);
  slot->dims = dims;
  slot->bytes = count * dtype_size(dt);
  const size_t rounded = (std::max<size_t>(slot->bytes, 1) + 63) / 64 * 64;
  slot->buffer = std::shared_ptr<std::byte[]>(static_cast<std::byte*>(std::aligned_alloc(64, rounded)),
                                              [](std::byte* p) { std::free(p); });
  if (!slot->buffer.get()) {
    slot->buffer.reset();
    return nullptr;
  }
  if (OrtStatus* st = api().CreateTensorWithDataAsOrtValue(
          cpu_memory_.get(), slot->buffer.get(), slot->bytes, dims.data(), dims.size(),
          static_cast<ONNXTensorElementDataType>(ort_element_type(dt)), &slot->value)) {
    api().ReleaseStatus(st);
    slot->value = nullptr;
    slot->buffer.reset();
    slot->dims.clear();
    return nullptr;
  }
  held = slot->buffer;
  return slot->value;
}

Result<std::vector<NamedTensor>> OnnxModel::run(const NamedTensor* const* ordered, Ort::Session* chosen,
                                                const OrtRunOptions* run_options) {
  GANTRY_ASSIGN_OR_RETURN(OrtValues inputs, bind_inputs(ordered));
  Ort::Session* session = chosen                 ? chosen
                          : sessions_.size() > 1 ? pick_session(ordered)
                                                 : sessions_.front().session.get();
  std::optional<memory::OwnerScope> owner;  // activations and outputs belong to this model
  if (options_.use_env_allocators) {
    owner.emplace(meta_.name);
    PoolAllocator::clear_last_failure();
  }
  OrtValues outputs(meta_.outputs.size());
  ReusedOutputs reused(meta_.outputs.size());
  GANTRY_RETURN_IF_ERROR(run_session(*session, ordered, inputs, outputs, reused, run_options));
  return unpack_outputs(outputs, reused);
}

Result<OrtValues> OnnxModel::bind_inputs(const NamedTensor* const* ordered) const {
  OrtValues in(meta_.inputs.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = ordered[i]->tensor;
    const auto& dims = t.shape().dims();
    OrtStatus* st = nullptr;
    if (t.dtype() == DType::kString) {
      st = api().CreateTensorAsOrtValue(allocator_, dims.data(), dims.size(),
                                        ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING, &in[i]);
      if (!st) {
        std::vector<const char*> ptrs;
        ptrs.reserve(t.strings().size());
        for (const auto& s : t.strings()) ptrs.push_back(s.c_str());
        st = api().FillStringTensor(in[i], ptrs.data(), ptrs.size());
      }
    } else {
      // Zero-copy: ORT reads the caller's memory and never writes to an input.
      st = api().CreateTensorWithDataAsOrtValue(
          cpu_memory_.get(), const_cast<void*>(t.data()), t.byte_size(), dims.data(), dims.size(),
          static_cast<ONNXTensorElementDataType>(input_ort_types_[i]), &in[i]);
    }
    if (st) return Internal("binding input '" + meta_.inputs[i].name + "': " + take_message(st));
  }
  return in;
}

void OnnxModel::preallocate_outputs(const NamedTensor* const* ordered, OrtValues& outputs,
                                    ReusedOutputs& reused) {
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (output_dims_[o].empty()) continue;  // not predictable
    auto& dims = reused.dims[o];
    dims.resize(output_dims_[o].size());
    for (size_t d = 0; d < dims.size(); ++d) {
      const DimSource& src = output_dims_[o][d];
      dims[d] = src.value >= 0 ? src.value : ordered[src.input]->tensor.shape()[static_cast<size_t>(src.dim)];
    }
    outputs[o] = take_slot(o, dims, reused.held[o]);
    reused.any = reused.any || outputs[o] != nullptr;
  }
}

Status OnnxModel::run_session(Ort::Session& session, const NamedTensor* const* ordered,
                              const OrtValues& inputs, OrtValues& outputs, ReusedOutputs& reused,
                              const OrtRunOptions* run_options) {
  const size_t n = inputs.size();
  const size_t m = outputs.size();
  if (reuse_outputs_.load(std::memory_order_relaxed)) preallocate_outputs(ordered, outputs, reused);
  OrtStatus* run_status = api().Run(session, run_options, input_names_.data(), inputs.data(), n,
                                    output_names_.data(), m, outputs.data());
  if (run_status && reused.any) {
    // Maybe the predicted shapes were wrong: run again the plain way; if that works, stop predicting.
    for (size_t o = 0; o < m; ++o)
      if (reused.held[o]) {
        outputs.forget(o);
        reused.held[o].reset();
      }
    OrtStatus* again = api().Run(session, run_options, input_names_.data(), inputs.data(), n,
                                 output_names_.data(), m, outputs.data());
    if (!again) {
      GANTRY_LOG_DEBUG("model '{}': preallocated outputs rejected ({}); output reuse off", meta_.name,
                       api().GetErrorMessage(run_status));
      reuse_outputs_ = false;
      api().ReleaseStatus(run_status);
      run_status = nullptr;
    } else {
      api().ReleaseStatus(again);
    }
  }
  for (size_t o = 0; o < m; ++o)
    if (reused.held[o]) outputs.forget(o);  // the slot owns its value
  if (OrtStatus* st = run_status) {
    const OrtErrorCode code = api().GetErrorCode(st);
    std::string msg = "model '" + meta_.name + "': ONNX Runtime Run failed: " + take_message(st);
    if (options_.use_env_allocators && !PoolAllocator::last_failure().empty())
      return ResourceExhausted(msg + " (memory refused: " + PoolAllocator::last_failure() + ")");
    // A kernel refusing the inputs' shapes or values says INVALID_ARGUMENT, or FAIL once a control-flow
    // node (If, Loop) wraps its error: the request's fault, as validate() could not see it. A kernel that
    // threw (RUNTIME_EXCEPTION: out of memory, a bug), an execution provider's failure, ...: ours.
    if (code == ORT_INVALID_ARGUMENT || code == ORT_FAIL) return InvalidArgument(std::move(msg));
    return Internal(std::move(msg));
  }
  return Status::Ok();
}

Result<std::vector<NamedTensor>> OnnxModel::unpack_outputs(OrtValues& outputs, ReusedOutputs& reused) const {
  std::vector<NamedTensor> result(outputs.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    result[o].name = meta_.outputs[o].name;
    if (reused.held[o]) {  // ORT wrote into the preallocated buffer, whose shape it checked
      void* data = reused.held[o].get();
      size_t bytes = dtype_size(meta_.outputs[o].dtype);
      for (int64_t d : reused.dims[o]) bytes *= static_cast<size_t>(d);
      GANTRY_ASSIGN_OR_RETURN(result[o].tensor,
                              Tensor::adopt(meta_.outputs[o].dtype, Shape(std::move(reused.dims[o])), data,
                                            bytes, std::move(reused.held[o])));
      continue;
    }
    OrtTensorTypeAndShapeInfo* info = nullptr;
    if (OrtStatus* st = api().GetTensorTypeAndShape(outputs[o], &info))
      return Internal("reading output '" + meta_.outputs[o].name + "': " + take_message(st));
    ONNXTensorElementDataType et{};
    size_t rank = 0;
    release(api().GetTensorElementType(info, &et));
    release(api().GetDimensionsCount(info, &rank));
    std::vector<int64_t> dims(rank);
    release(api().GetDimensions(info, dims.data(), rank));
    api().ReleaseTensorTypeAndShapeInfo(info);
    auto dt = dtype_from_ort(et);
    if (!dt)
      return Unsupported("output '" + meta_.outputs[o].name + "' has an element type Gantry does not carry");
    Shape shape(std::move(dims));
    if (*dt == DType::kString) {
      size_t count = static_cast<size_t>(shape.element_count().value_or(0));
      size_t total = 0;
      release(api().GetStringTensorDataLength(outputs[o], &total));
      std::string buf(total, '\0');
      std::vector<size_t> offsets(count);
      if (count > 0) {
        if (OrtStatus* st =
                api().GetStringTensorContent(outputs[o], buf.data(), total, offsets.data(), count))
          return Internal("reading string output '" + meta_.outputs[o].name + "': " + take_message(st));
      }
      std::vector<std::string> strings(count);
      for (size_t k = 0; k < count; ++k) {
        const size_t end = k + 1 < count ? offsets[k + 1] : total;
        strings[k] = buf.substr(offsets[k], end - offsets[k]);
      }
      GANTRY_ASSIGN_OR_RETURN(result[o].tensor, Tensor::from_strings(shape, std::move(strings)));
      continue;
    }
    // Zero-copy: the tensor adopts the buffer ONNX Runtime allocated and releases the OrtValue with its
    // last copy.
    const size_t bytes = static_cast<size_t>(shape.element_count().value_or(0)) * dtype_size(*dt);
    void* src = nullptr;
    if (OrtStatus* st = api().GetTensorMutableData(outputs[o], &src))
      return Internal("reading output '" + meta_.outputs[o].name + "': " + take_message(st));
    std::shared_ptr<void> owner(outputs.take(o),
                                [](void* v) { api().ReleaseValue(static_cast<OrtValue*>(v)); });
    GANTRY_ASSIGN_OR_RETURN(result[o].tensor, Tensor::adopt(*dt, shape, src, bytes, std::move(owner)));
  }
  return result;
}

}  // namespace gantry::onnx
