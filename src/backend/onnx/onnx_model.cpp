#include "gantry/backend/onnx/onnx_model.h"

#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <system_error>

#include "backend/onnx/ort_status.h"
#include "backend/onnx/ort_values.h"
#include "backend/onnx/pool_allocator.h"
#include "backend/onnx/run_terminator.h"
#include "backend/onnx/session_providers.h"
#include "gantry/backend/onnx/ort_env.h"
#include "gantry/backend/threads.h"
#include "gantry/core/log.h"
#include "gantry/memory/owner_scope.h"

namespace gantry::onnx {

using backend::ModelMetadata;
using backend::NamedTensor;
using backend::TensorInfo;

namespace {

const OrtApi& api() { return Ort::GetApi(); }

std::string shape_text(DType dt, const Shape& s) { return std::string(dtype_name(dt)) + " " + s.to_string(); }

std::string names_of(const std::vector<TensorInfo>& infos) {
  std::string s;
  for (const auto& t : infos) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

Result<TensorInfo> read_info(const std::string& name, const Ort::TypeInfo& type_info, const char* what) {
  TensorInfo info;
  info.name = name;
  const ONNXType kind = type_info.GetONNXType();
  if (kind != ONNX_TYPE_TENSOR) {
    const char* k = kind == ONNX_TYPE_SEQUENCE   ? "a sequence"
                    : kind == ONNX_TYPE_MAP      ? "a map"
                    : kind == ONNX_TYPE_OPTIONAL ? "an optional"
                                                 : "not a tensor";
    return Unsupported(std::string(what) + " '" + name + "' is " + k +
                       "; Gantry feeds and returns tensors only");
  }
  // The shape info is a view into type_info, which the caller keeps alive (DESIGN.md "Traps").
  auto t = type_info.GetTensorTypeAndShapeInfo();
  auto dt = dtype_from_ort(t.GetElementType());
  if (!dt)
    return Unsupported(std::string(what) + " '" + name + "' has ONNX element type " +
                       std::to_string(static_cast<int>(t.GetElementType())) +
                       ", which Gantry does not carry");
  info.dtype = *dt;
  std::vector<int64_t> dims = t.GetShape();
  std::vector<const char*> sym(dims.size(), nullptr);
  if (!dims.empty()) t.GetSymbolicDimensions(sym.data(), sym.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) dims[i] = Shape::kDynamic;
    info.dim_names.emplace_back(sym[i] ? sym[i] : "");
  }
  info.shape = Shape(std::move(dims));
  return info;
}

// Bytes at the largest shapes: static dims, and dynamic ones at their bound in `bounds` (by dim name); 0
// (unbounded) when a dynamic dim has no bound or a dtype has no fixed size.
uint64_t max_bytes(const std::vector<TensorInfo>& infos, const std::map<std::string, int64_t>& bounds) {
  uint64_t total = 0;
  for (const auto& t : infos) {
    if (t.dtype == DType::kString) return 0;
    uint64_t n = dtype_size(t.dtype);
    for (size_t d = 0; d < t.shape.rank(); ++d) {
      int64_t v = t.shape[d];
      if (v == Shape::kDynamic) {
        auto it = bounds.find(t.dim_names[d]);
        if (t.dim_names[d].empty() || it == bounds.end()) return 0;
        v = it->second;
      }
      if (v > 0 && n > UINT64_MAX / static_cast<uint64_t>(v)) return 0;
      n *= static_cast<uint64_t>(v);
    }
    if (total > UINT64_MAX - n) return 0;
    total += n;
  }
  return total;
}

GraphOptimizationLevel ort_level(model::GraphOptimizationLevel g) {
  switch (g) {
    case model::GraphOptimizationLevel::kDisable:
      return ORT_DISABLE_ALL;
    case model::GraphOptimizationLevel::kBasic:
      return ORT_ENABLE_BASIC;
    case model::GraphOptimizationLevel::kExtended:
      return ORT_ENABLE_EXTENDED;
    case model::GraphOptimizationLevel::kAll:
      return ORT_ENABLE_ALL;
  }
  return ORT_ENABLE_ALL;
}

// Session options from the placement's ONNX Runtime options (threads, optimisation, memory pattern, arena,
// env allocators); the provider is appended by the caller.
Ort::SessionOptions base_session_options(const backend::Placement& placement,
                                         const OnnxModelOptions& options) {
  Ort::SessionOptions so;
  so.SetGraphOptimizationLevel(
      ort_level(placement.onnx.graph_optimization.value_or(model::GraphOptimizationLevel::kAll)));
  if (placement.intra_op_threads > 0)
    so.SetIntraOpNumThreads(backend::cap_threads(placement.intra_op_threads, "intra_op_threads"));
  if (placement.inter_op_threads > 0)
    so.SetInterOpNumThreads(backend::cap_threads(placement.inter_op_threads, "inter_op_threads"));
  // ORT uses inter-op threads only when independent nodes may run at once: asking for more than one
  // asks for that (the parallel execution mode).
  if (placement.inter_op_threads > 1) so.SetExecutionMode(ExecutionMode::ORT_PARALLEL);
  if (placement.onnx.memory_pattern.value_or(true))
    so.EnableMemPattern();
  else
    so.DisableMemPattern();
  if (placement.onnx.cpu_arena.value_or(true))
    so.EnableCpuMemArena();
  else
    so.DisableCpuMemArena();
  if (options.use_env_allocators) so.AddConfigEntry(kUseEnvAllocators, "1");
  return so;
}

// Session options for `placement` with the provider appended; for a session bucket (`bucket` with the
// model's `inputs`), its shapes fixed as free-dimension overrides.
Result<Ort::SessionOptions> session_options(const backend::Placement& placement,
                                            const OnnxModelOptions& options,
                                            const model::SessionBucket* bucket = nullptr,
                                            const std::vector<TensorInfo>* inputs = nullptr) {
  Ort::SessionOptions so = base_session_options(placement, options);
  if (bucket && inputs) {
    for (const auto& [input, shape] : *bucket) {
      const TensorInfo* info = nullptr;
      for (const auto& t : *inputs)
        if (t.name == input) info = &t;
      if (!info) return InvalidArgument("session bucket names input '" + input + "', which the model lacks");
      if (!info->shape.accepts(shape) || shape.is_dynamic())
        return InvalidArgument("session bucket shape " + shape.to_string() + " for input '" + input +
                               "' does not fit the model's " + info->shape.to_string());
      for (size_t d = 0; d < shape.rank(); ++d)
        if (info->shape[d] == Shape::kDynamic && !info->dim_names[d].empty())
          so.AddFreeDimensionOverrideByName(info->dim_names[d].c_str(), shape[d]);
    }
  }
  GANTRY_RETURN_IF_ERROR(append_provider(so, placement));
  return so;
}

// A session creation that failed: with env allocators, a refused pool allocation says so with the pool's
// numbers (ResourceExhausted); else status_from_ort.
Status session_error(const Ort::Exception& e, const std::string& what, const OnnxModelOptions& options) {
  if (options.use_env_allocators && !PoolAllocator::last_failure().empty())
    return ResourceExhausted(what + ": " + e.what() + " (memory refused: " + PoolAllocator::last_failure() +
                             ")");
  return status_from_ort(e, what);
}

Status check_model_file(const std::filesystem::path& model_file) {
  namespace fs = std::filesystem;
  const std::string file = model_file.string();
  std::error_code ec;
  if (!fs::exists(model_file, ec)) return NotFound("model file " + file + " does not exist");
  if (!fs::is_regular_file(model_file, ec))
    return InvalidArgument("model " + file + " is not a regular file");
  if (fs::file_size(model_file, ec) == 0) return Corrupt("model file " + file + " is empty (0 bytes)");
  return Status::Ok();
}

}  // namespace

int ort_element_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    case DType::kFloat16:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
    case DType::kBFloat16:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16;
    case DType::kFloat64:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;
    case DType::kInt8:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
    case DType::kInt16:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16;
    case DType::kInt32:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
    case DType::kInt64:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
    case DType::kUInt8:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;
    case DType::kUInt16:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16;
    case DType::kUInt32:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32;
    case DType::kUInt64:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64;
    case DType::kBool:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL;
    case DType::kFloat8E4M3:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN;
    case DType::kFloat8E5M2:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2;
    case DType::kString:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING;
  }
  return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

std::optional<DType> dtype_from_ort(int t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
      return DType::kFloat32;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
      return DType::kFloat16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16:
      return DType::kBFloat16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
      return DType::kFloat64;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
      return DType::kInt8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
      return DType::kInt16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
      return DType::kInt32;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
      return DType::kInt64;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
      return DType::kUInt8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16:
      return DType::kUInt16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32:
      return DType::kUInt32;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64:
      return DType::kUInt64;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL:
      return DType::kBool;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN:
      return DType::kFloat8E4M3;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2:
      return DType::kFloat8E5M2;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING:
      return DType::kString;
    default:
      return std::nullopt;
  }
}

Result<std::unique_ptr<OnnxModel>> OnnxModel::open(const std::filesystem::path& model_file,
                                                   const backend::Placement& placement, std::string name,
                                                   const OnnxModelOptions& options) {
  GANTRY_RETURN_IF_ERROR(check_model_file(model_file));
  std::unique_ptr<OnnxModel> m(new OnnxModel());
  m->model_file_ = model_file;
  if (name.empty()) name = model_file.stem().string();
  return open_source(std::move(m), model_file.string(), placement, std::move(name), options);
}

Result<std::unique_ptr<OnnxModel>> OnnxModel::open_bytes(std::span<const std::byte> bytes,
                                                         std::shared_ptr<const void> owner, std::string label,
                                                         const backend::Placement& placement,
                                                         std::string name, const OnnxModelOptions& options) {
  if (bytes.empty()) return Corrupt("model " + label + " is empty (0 bytes)");
  std::unique_ptr<OnnxModel> m(new OnnxModel());
  m->bytes_ = bytes;
  m->bytes_owner_ = std::move(owner);
  if (name.empty()) name = std::filesystem::path(label).stem().string();
  return open_source(std::move(m), label, placement, std::move(name), options);
}

std::unique_ptr<Ort::Session> OnnxModel::new_session(const Ort::SessionOptions& so) const {
  Ort::Env& env = OrtRuntime::get().value()->env();  // open_source() checked it is there
  if (!bytes_.empty()) return std::make_unique<Ort::Session>(env, bytes_.data(), bytes_.size(), so);
  return std::make_unique<Ort::Session>(env, model_file_.c_str(), so);
}

Result<std::unique_ptr<OnnxModel>> OnnxModel::open_source(std::unique_ptr<OnnxModel> m,
                                                          const std::string& label,
                                                          const backend::Placement& placement,
                                                          std::string name, const OnnxModelOptions& options) {
  GANTRY_RETURN_IF_ERROR(OrtRuntime::get().status());
  m->label_ = label;
  m->placement_ = placement;
  m->options_ = options;
  m->meta_.name = std::move(name);
  m->allocator_ = Ort::AllocatorWithDefaultOptions();
  // Initializers and whatever session creation allocates belong to this model.
  std::optional<memory::OwnerScope> owner;
  if (options.use_env_allocators) {
    owner.emplace(m->meta_.name);
    PoolAllocator::clear_last_failure();
  }
  m->meta_.backend = "onnxruntime";
  m->meta_.format = "onnx";
  m->meta_.platform = "onnx_onnxv1";
  m->meta_.provider = placement.provider;

  GANTRY_RETURN_IF_ERROR(m->open_main_session());
  GANTRY_RETURN_IF_ERROR(m->read_signature());
  GANTRY_RETURN_IF_ERROR(m->describe());
  GANTRY_RETURN_IF_ERROR(m->plan_shape_buckets());
  m->index_inputs();
  m->cpu_memory_.reset(Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault).release());
  if (!options.use_env_allocators) m->plan_output_reuse();
  GANTRY_RETURN_IF_ERROR(m->open_session_buckets());
  return m;
}

Status OnnxModel::open_main_session() {
  const std::string& file = label_;
  try {
    GANTRY_ASSIGN_OR_RETURN(Ort::SessionOptions so, session_options(placement_, options_));
    BucketSession main;
    main.session = new_session(so);
    sessions_.push_back(std::move(main));
  } catch (const Ort::Exception& e) {
    return session_error(e, "cannot load ONNX model " + file, options_);
  }
  return Status::Ok();
}

Status OnnxModel::read_signature() {
  const std::string& file = label_;
  Ort::Session& s = *sessions_.front().session;
  try {
    for (size_t i = 0; i < s.GetInputCount(); ++i) {
      std::string n = s.GetInputNameAllocated(i, allocator_).get();
      Ort::TypeInfo ti = s.GetInputTypeInfo(i);
      auto info = read_info(n, ti, "input");
      if (!info.ok()) return info.status().with_context("model " + file);
      meta_.inputs.push_back(std::move(info).value());
    }
    for (size_t i = 0; i < s.GetOutputCount(); ++i) {
      std::string n = s.GetOutputNameAllocated(i, allocator_).get();
      Ort::TypeInfo ti = s.GetOutputTypeInfo(i);
      auto info = read_info(n, ti, "output");
      if (!info.ok()) return info.status().with_context("model " + file);
      meta_.outputs.push_back(std::move(info).value());
    }
    Ort::ModelMetadata md = s.GetModelMetadata();
    meta_.properties["producer"] = md.GetProducerNameAllocated(allocator_).get();
    meta_.properties["graph"] = md.GetGraphNameAllocated(allocator_).get();
    meta_.properties["domain"] = md.GetDomainAllocated(allocator_).get();
    meta_.properties["model_version"] = std::to_string(md.GetVersion());
    std::erase_if(meta_.properties, [](const auto& kv) { return kv.second.empty(); });
  } catch (const Ort::Exception& e) {
    return status_from_ort(e, "cannot read the inputs/outputs of " + file);
  }
  return Status::Ok();
}

Status OnnxModel::describe() {
  const std::string& file = label_;
  const auto& bounds = placement_.onnx.bucket_max_dims;
  meta_.max_input_bytes = max_bytes(meta_.inputs, bounds);
  meta_.max_output_bytes = max_bytes(meta_.outputs, bounds);
  for (const auto& [dim, size] : bounds) {
    bool known = false;
    for (const auto* list : {&meta_.inputs, &meta_.outputs})
      for (const auto& t : *list)
        for (size_t d = 0; d < t.shape.rank(); ++d)
          known = known || (t.shape[d] == Shape::kDynamic && t.dim_names[d] == dim);
    if (!known)
      return InvalidArgument("runtime.bucket_max_dims names dimension '" + dim +
                             "', which no dynamic input or "
                             "output of " +
                             file + " has");
  }
  bool batchable = !meta_.inputs.empty() && !meta_.outputs.empty();
  for (const auto* list : {&meta_.inputs, &meta_.outputs})
    for (const auto& t : *list) batchable = batchable && t.shape.rank() > 0 && t.shape[0] == Shape::kDynamic;
  meta_.batchable = batchable;
  meta_.preferred_memory = MemoryClass::kHost;
  return Status::Ok();
}

Status OnnxModel::plan_shape_buckets() {
  const std::string& file = label_;
  const auto& bucket_dims = placement_.onnx.bucket_dims;
  if (!bucket_dims.empty() && !placement_.onnx.bucket_dim_granularity)
    return InvalidArgument("io bucket_dims of " + file +
                           " pad to shape buckets, which need runtime.bucket_dim_granularity");
  if (!placement_.onnx.bucket_dim_granularity) return Status::Ok();
  rules_.granularity = *placement_.onnx.bucket_dim_granularity;
  rules_.max_dims = placement_.onnx.bucket_max_dims;
  for (const auto& [tensor, dims] : bucket_dims)
    if (meta_.input_index(tensor) < 0 && meta_.output_index(tensor) < 0)
      return InvalidArgument("io bucket_dims names tensor '" + tensor + "', which " + file +
                             " does not have");
  auto dims_of = [&](const TensorInfo& t, const char* what) -> Result<std::set<std::string>> {
    std::set<std::string> out;
    auto it = bucket_dims.find(t.name);
    if (it == bucket_dims.end()) return out;
    for (const auto& dim : it->second) {
      bool dynamic = false;
      for (size_t d = 0; d < t.shape.rank(); ++d)
        dynamic = dynamic || (t.shape[d] == Shape::kDynamic && t.dim_names[d] == dim);
      if (!dynamic)
        return InvalidArgument(std::string("io.") + what + " '" + t.name + "' bucket_dims names '" + dim +
                               "', which is not a dynamic dimension of it (" + t.shape.to_string() + ")");
      out.insert(dim);
    }
    return out;
  };
  for (const auto& t : meta_.inputs) {
    GANTRY_ASSIGN_OR_RETURN(auto dims, dims_of(t, "inputs"));
    rules_.input_dims.push_back(std::move(dims));
  }
  for (const auto& t : meta_.outputs) {
    GANTRY_ASSIGN_OR_RETURN(auto dims, dims_of(t, "outputs"));
    rules_.output_dims.push_back(std::move(dims));
  }
  return Status::Ok();
}

void OnnxModel::index_inputs() {
  for (const auto& t : meta_.inputs) {
    input_names_.push_back(t.name.c_str());
    input_ort_types_.push_back(ort_element_type(t.dtype));
  }
  for (const auto& t : meta_.outputs) output_names_.push_back(t.name.c_str());
  std::map<std::string, std::vector<std::pair<size_t, size_t>>> by_dim_name;
  for (size_t i = 0; i < meta_.inputs.size(); ++i) {
    const TensorInfo& t = meta_.inputs[i];
    for (size_t d = 0; d < t.shape.rank(); ++d)
      if (t.shape[d] == Shape::kDynamic && !t.dim_names[d].empty())
        by_dim_name[t.dim_names[d]].emplace_back(i, d);
  }
  for (auto& [name, positions] : by_dim_name)
    if (positions.size() > 1) shared_dims_.push_back(std::move(positions));
}

Status OnnxModel::open_session_buckets() {
  const std::string& file = label_;
  for (const auto& bucket : placement_.onnx.session_buckets) {
    try {
      auto so = session_options(placement_, options_, &bucket, &meta_.inputs);
      if (!so.ok()) return so.status().with_context("model " + file);
      BucketSession b;
      b.shapes = bucket;
      b.session = new_session(*so);
      sessions_.push_back(std::move(b));
    } catch (const Ort::Exception& e) {
      return session_error(e, "cannot create a session bucket for " + file, options_);
    }
  }
  return Status::Ok();
}

void OnnxModel::ReleaseMemoryInfo::operator()(OrtMemoryInfo* info) const { api().ReleaseMemoryInfo(info); }

Ort::Session& OnnxModel::session() { return *sessions_.front().session; }

OnnxModel::~OnnxModel() {
  for (auto& per_output : slots_)
    for (auto& slot : per_output)
      if (slot.value) api().ReleaseValue(slot.value);
}

Status OnnxModel::check_input(size_t i, const Tensor& t) const {
  const TensorInfo& want = meta_.inputs[i];
  if (t.dtype() != want.dtype || !want.shape.accepts(t.shape()))
    return InvalidArgument("model '" + meta_.name + "' input '" + want.name + "': expected " +
                           shape_text(want.dtype, want.shape) + ", got " + shape_text(t.dtype(), t.shape()));
  if (t.dtype() != DType::kString && t.empty() && t.element_count() > 0)
    return InvalidArgument("model '" + meta_.name + "' input '" + want.name + "' has no data");
  // An empty batch (or any empty dynamic dim) can make an ONNX Runtime kernel call std::terminate.
  // A dim the model itself declares as 0 is its author's intent (the ONNX node tests have such).
  for (size_t d = 0; d < want.shape.rank(); ++d) {
    if (want.shape[d] != Shape::kDynamic || placement_.onnx.bucket_max_dims.empty()) continue;
    auto it = placement_.onnx.bucket_max_dims.find(want.dim_names[d]);
    if (it != placement_.onnx.bucket_max_dims.end() && t.shape()[d] > it->second)
      return InvalidArgument("model '" + meta_.name + "' input '" + want.name + "': dimension '" + it->first +
                             "' is " + std::to_string(t.shape()[d]) +
                             ", more than runtime.bucket_max_dims' " + std::to_string(it->second));
  }
  for (size_t d = 0; d < want.shape.rank(); ++d)
    if (want.shape[d] == Shape::kDynamic && t.shape()[d] == 0)
      return InvalidArgument("model '" + meta_.name + "' input '" + want.name + "': dimension " +
                             std::to_string(d) + " is 0 (shape " + t.shape().to_string() +
                             "); an empty input cannot run: every dynamic dimension must be at least 1");
  if (t.memory_class() == MemoryClass::kDevice)
    return Unsupported("model '" + meta_.name + "' input '" + want.name + "' is in device memory; the " +
                       placement_.provider + " session takes host tensors");
  return Status::Ok();
}

Status OnnxModel::check_shared_dims(const NamedTensor* const* ordered) const {
  for (const auto& positions : shared_dims_) {
    const auto [i0, d0] = positions[0];
    const int64_t want = ordered[i0]->tensor.shape()[d0];
    for (size_t k = 1; k < positions.size(); ++k) {
      const auto [i, d] = positions[k];
      const int64_t got = ordered[i]->tensor.shape()[d];
      if (got == want) continue;
      return InvalidArgument(
          "model '" + meta_.name + "': inputs '" + meta_.inputs[i0].name + "' and '" + meta_.inputs[i].name +
          "' disagree on dimension '" + meta_.inputs[i0].dim_names[d0] + "': " + std::to_string(want) +
          " (dim " + std::to_string(d0) + " of '" + meta_.inputs[i0].name + "') vs " + std::to_string(got) +
          " (dim " + std::to_string(d) + " of '" + meta_.inputs[i].name + "')");
    }
  }
  return Status::Ok();
}

Status OnnxModel::validate(std::span<const NamedTensor> inputs, std::vector<size_t>& order) const {
  const size_t n = meta_.inputs.size();
  order.assign(n, SIZE_MAX);
  for (size_t j = 0; j < inputs.size(); ++j) {
    const int i = meta_.input_index(inputs[j].name);
    if (i < 0)
      return NotFound("model '" + meta_.name + "' has no input '" + inputs[j].name +
                      "' (inputs: " + names_of(meta_.inputs) + ")");
    if (order[i] != SIZE_MAX) return InvalidArgument("input '" + inputs[j].name + "' given twice");
    order[i] = j;
  }
  for (size_t i = 0; i < n; ++i) {
    if (order[i] == SIZE_MAX)
      return InvalidArgument("model '" + meta_.name + "' missing input '" + meta_.inputs[i].name +
                             "' (expected " + shape_text(meta_.inputs[i].dtype, meta_.inputs[i].shape) + ")");
    GANTRY_RETURN_IF_ERROR(check_input(i, inputs[order[i]].tensor));
  }
  if (shared_dims_.empty()) return Status::Ok();
  SmallArray<const NamedTensor*> ordered(n);
  for (size_t i = 0; i < n; ++i) ordered[i] = &inputs[order[i]];
  return check_shared_dims(ordered.data());
}

Ort::Session* OnnxModel::pick_session(const NamedTensor* const* ordered) const {
  for (size_t b = 1; b < sessions_.size(); ++b) {
    bool match = true;
    for (size_t i = 0; i < meta_.inputs.size() && match; ++i) {
      auto it = sessions_[b].shapes.find(meta_.inputs[i].name);
      if (it != sessions_[b].shapes.end() && !(it->second == ordered[i]->tensor.shape())) match = false;
    }
    if (match) return sessions_[b].session.get();
  }
  return sessions_.front().session.get();
}

Status OnnxModel::order_inputs(std::span<const NamedTensor> inputs, const NamedTensor** ordered) const {
  const size_t n = meta_.inputs.size();
  bool in_order = inputs.size() == n;
  for (size_t i = 0; i < n && in_order; ++i) in_order = inputs[i].name == meta_.inputs[i].name;
  if (in_order) {
    for (size_t i = 0; i < n; ++i) {
      GANTRY_RETURN_IF_ERROR(check_input(i, inputs[i].tensor));
      ordered[i] = &inputs[i];
    }
    return check_shared_dims(ordered);
  }
  std::vector<size_t> order;
  GANTRY_RETURN_IF_ERROR(validate(inputs, order));
  for (size_t i = 0; i < n; ++i) ordered[i] = &inputs[order[i]];
  return Status::Ok();
}

Result<std::vector<NamedTensor>> OnnxModel::infer_one(std::span<const NamedTensor> inputs) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  SmallArray<const NamedTensor*> ordered(meta_.inputs.size());
  GANTRY_RETURN_IF_ERROR(order_inputs(inputs, ordered.data()));
  return run_caught(ordered.data());
}

Result<std::vector<NamedTensor>> OnnxModel::infer_cancellable(std::span<const NamedTensor> inputs,
                                                              const backend::CancelCheck& cancelled) {
  if (!cancelled) return infer_one(inputs);
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  SmallArray<const NamedTensor*> ordered(meta_.inputs.size());
  GANTRY_RETURN_IF_ERROR(order_inputs(inputs, ordered.data()));
  auto was_cancelled = [&] {
    return Cancelled("model '" + meta_.name +
                     "': the run was cancelled (its client went away, its deadline "
                     "passed or the server is stopping)");
  };
  if (cancelled()) return was_cancelled();
  GANTRY_ASSIGN_OR_RETURN(auto watch, RunTerminator::get().watch(cancelled));
  auto out = run_caught(ordered.data(), watch->options());
  const bool terminated = watch->terminated();
  watch.reset();  // the check is not called after this
  if (terminated) return was_cancelled();
  return out;
}

Result<std::vector<NamedTensor>> OnnxModel::run_caught(const NamedTensor* const* ordered,
                                                       const OrtRunOptions* run_options) {
  try {
    return rules_.active() ? run_bucketed(ordered, run_options) : run(ordered, nullptr, run_options);
  } catch (const std::exception& e) {
    return Internal("model '" + meta_.name + "': running it threw: " + e.what());
  } catch (...) {
    return Internal("model '" + meta_.name + "': running it threw an unknown exception");
  }
}

std::vector<std::map<std::string, int64_t>> OnnxModel::bucket_sessions() const {
  std::lock_guard lock(buckets_mu_);
  std::vector<std::map<std::string, int64_t>> out;
  for (const auto& b : dynamic_) out.push_back(b.sizes);
  return out;
}

Result<std::shared_ptr<Ort::Session>> OnnxModel::bucket_session(const std::map<std::string, int64_t>& sizes) {
  std::lock_guard lock(buckets_mu_);
  for (auto& b : dynamic_) {
    if (b.sizes != sizes) continue;
    ++b.uses;
    return b.session;
  }
  if (dynamic_.size() >= kMaxDynamicBuckets) {
    // The least used bucket goes; Runs still on it keep its session until they end.
    auto victim =
        std::min_element(dynamic_.begin(), dynamic_.end(),
                         [](const DynamicBucket& a, const DynamicBucket& b) { return a.uses < b.uses; });
    dynamic_.erase(victim);
  }
  GANTRY_RETURN_IF_ERROR(OrtRuntime::get().status());
  std::optional<memory::OwnerScope> owner;
  if (options_.use_env_allocators) owner.emplace(meta_.name);
  std::string what;
  for (const auto& [dim, size] : sizes) what += (what.empty() ? "" : ", ") + dim + "=" + std::to_string(size);
  try {
    Ort::SessionOptions so = base_session_options(placement_, options_);
    for (const auto& [dim, size] : sizes) so.AddFreeDimensionOverrideByName(dim.c_str(), size);
    GANTRY_RETURN_IF_ERROR(append_provider(so, placement_));
    std::shared_ptr<Ort::Session> session = new_session(so);
    dynamic_.push_back({sizes, session, 1});
    GANTRY_LOG_DEBUG("model '{}': a session for shape bucket {}", meta_.name, what);
    return session;
  } catch (const Ort::Exception& e) {
    return session_error(e, "model '" + meta_.name + "': a session for shape bucket " + what, options_);
  }
}

Result<std::vector<NamedTensor>> OnnxModel::run_bucketed(const NamedTensor* const* ordered,
                                                         const OrtRunOptions* run_options) {
  GANTRY_ASSIGN_OR_RETURN(Bucket b, bucket_for(rules_, meta_.inputs, ordered));
  if (b.sizes.empty()) return run(ordered, nullptr, run_options);
  GANTRY_ASSIGN_OR_RETURN(std::shared_ptr<Ort::Session> session, bucket_session(b.sizes));
  const size_t n = meta_.inputs.size();
  std::vector<NamedTensor> padded;
  padded.reserve(n);  // `order` points into it
  std::vector<const NamedTensor*> order(ordered, ordered + n);
  if (b.pads()) {
    for (size_t i = 0; i < n; ++i) {
      if (rules_.input_dims[i].empty()) continue;
      const Shape& have = ordered[i]->tensor.shape();
      const Shape want = bucket_shape(meta_.inputs[i], rules_.input_dims[i], have, b.sizes);
      if (want == have) continue;
      GANTRY_ASSIGN_OR_RETURN(Tensor t, pad_to(ordered[i]->tensor, want));
      padded.push_back({ordered[i]->name, std::move(t)});
      order[i] = &padded.back();
    }
  }
  GANTRY_ASSIGN_OR_RETURN(auto out, run(order.data(), session.get(), run_options));
  if (!b.pads()) return out;
  for (size_t o = 0; o < out.size() && o < rules_.output_dims.size(); ++o) {
    if (rules_.output_dims[o].empty()) continue;
    const Shape& have = out[o].tensor.shape();
    const Shape want = bucket_shape(meta_.outputs[o], rules_.output_dims[o], have, b.request);
    if (want == have) continue;
    GANTRY_ASSIGN_OR_RETURN(out[o].tensor, trim_to(out[o].tensor, want));
  }
  return out;
}

Result<std::vector<std::vector<NamedTensor>>> OnnxModel::infer_batch(
    std::span<const std::vector<NamedTensor>> requests) {
  if (requests.empty()) return std::vector<std::vector<NamedTensor>>{};
  if (!meta_.batchable || requests.size() == 1) return Model::infer_batch(requests);
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  const size_t n = meta_.inputs.size();
  // Validate every request and check that all agree on the non-batch dims.
  std::vector<std::vector<size_t>> orders(requests.size());
  std::vector<int64_t> rows(requests.size());
  int64_t total_rows = 0;
  for (size_t r = 0; r < requests.size(); ++r) {
    if (Status s = validate(requests[r], orders[r]); !s.ok())
      return s.with_context("request " + std::to_string(r));
    rows[r] = requests[r][orders[r][0]].tensor.shape()[0];
    for (size_t i = 0; i < n; ++i) {
      const Shape& s = requests[r][orders[r][i]].tensor.shape();
      const Shape& s0 = requests[0][orders[0][i]].tensor.shape();
      if (s[0] != rows[r])
        return InvalidArgument("request " + std::to_string(r) + ": inputs disagree on the batch size (" +
                               std::to_string(rows[r]) + " vs " + std::to_string(s[0]) + " for '" +
                               meta_.inputs[i].name + "')");
      if (!std::equal(s.dims().begin() + 1, s.dims().end(), s0.dims().begin() + 1, s0.dims().end()))
        return InvalidArgument("request " + std::to_string(r) + " input '" + meta_.inputs[i].name +
                               "' has shape " + s.to_string() +
                               ", which cannot be batched with request 0's " + s0.to_string());
    }
    total_rows += rows[r];
  }
  // Concatenate along dim 0.
  std::vector<NamedTensor> merged(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor& first = requests[0][orders[0][i]].tensor;
    std::vector<int64_t> dims = first.shape().dims();
    dims[0] = total_rows;
    merged[i].name = meta_.inputs[i].name;
    if (first.dtype() == DType::kString) {
      std::vector<std::string> all;
      for (size_t r = 0; r < requests.size(); ++r) {
        const auto& s = requests[r][orders[r][i]].tensor.strings();
        all.insert(all.end(), s.begin(), s.end());
      }
      GANTRY_ASSIGN_OR_RETURN(merged[i].tensor, Tensor::from_strings(Shape(dims), std::move(all)));
      continue;
    }
    GANTRY_ASSIGN_OR_RETURN(merged[i].tensor, Tensor::allocate(first.dtype(), Shape(dims)));
    auto* dst = static_cast<std::byte*>(merged[i].tensor.data());
    for (size_t r = 0; r < requests.size(); ++r) {
      const Tensor& t = requests[r][orders[r][i]].tensor;
      if (t.byte_size()) std::memcpy(dst, t.data(), t.byte_size());
      dst += t.byte_size();
    }
  }
  std::vector<const NamedTensor*> ordered(n);
  for (size_t i = 0; i < n; ++i) ordered[i] = &merged[i];
  GANTRY_ASSIGN_OR_RETURN(auto outputs, run_caught(ordered.data()));
  // Split along dim 0.
  std::vector<std::vector<NamedTensor>> result(requests.size());
  for (const auto& out : outputs) {
    const Shape& s = out.tensor.shape();
    if (s.rank() == 0 || s[0] != total_rows)
      return Internal("model '" + meta_.name + "' output '" + out.name + "' has shape " + s.to_string() +
                      ", not a leading batch of " + std::to_string(total_rows) +
                      "; it cannot be split per request");
    const int64_t per_row = total_rows > 0 ? out.tensor.element_count() / total_rows : 0;
    int64_t row = 0;
    for (size_t r = 0; r < requests.size(); ++r) {
      std::vector<int64_t> dims = s.dims();
      dims[0] = rows[r];
      NamedTensor part;
      part.name = out.name;
      if (out.tensor.dtype() == DType::kString) {
        const auto& all = out.tensor.strings();
        std::vector<std::string> mine(all.begin() + row * per_row, all.begin() + (row + rows[r]) * per_row);
        GANTRY_ASSIGN_OR_RETURN(part.tensor, Tensor::from_strings(Shape(dims), std::move(mine)));
      } else {
        GANTRY_ASSIGN_OR_RETURN(part.tensor, Tensor::allocate(out.tensor.dtype(), Shape(dims)));
        const size_t row_bytes = static_cast<size_t>(per_row) * dtype_size(out.tensor.dtype());
        if (part.tensor.byte_size())
          std::memcpy(part.tensor.data(), static_cast<const std::byte*>(out.tensor.data()) + row * row_bytes,
                      part.tensor.byte_size());
      }
      result[r].push_back(std::move(part));
      row += rows[r];
    }
  }
  return result;
}

}  // namespace gantry::onnx
