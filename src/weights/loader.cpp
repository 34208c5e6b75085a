#include "gantry/weights/loader.h"

#include <cstring>

#include "weights/apply_hook.h"
#include "weights/catalog.h"

namespace gantry::weights {

struct WeightLoader::State {
  Catalog cat;
  LoadOptions options;
};

namespace {

// The tensor type and shape `bytes` hold: block types as a 1-D u8 tensor.
DType storage_dtype(const WeightType& t) {
  if (const auto* d = std::get_if<DType>(&t)) return *d;
  return DType::kUInt8;
}
Shape storage_shape(const TensorInfo& info) {
  if (std::holds_alternative<DType>(info.type)) return info.shape;
  return Shape{static_cast<int64_t>(info.bytes)};
}

// A tensor over `data` that holds `owner`. Only bytes of a WeightSource::borrowed come without an owner:
// its caller keeps them alive while anything loaded from the source is used (that is its contract), so
// the tensor then holds a token that frees nothing.
Result<Tensor> wrap(const TensorInfo& info, void* data, std::shared_ptr<const void> owner) {
  if (!owner) owner = std::make_shared<const char>('\0');
  return Tensor::adopt(storage_dtype(info.type), storage_shape(info), data, info.bytes,
                       std::const_pointer_cast<void>(std::move(owner)));
}

// Destination memory: the caller's allocator, else an uninitialised owned buffer.
Result<Allocation> allocate(const LoadOptions& o, uint64_t bytes, const std::string& name) {
  if (o.allocate) {
    GANTRY_ASSIGN_OR_RETURN(Allocation a, o.allocate(bytes, name));
    if (a.data == nullptr && bytes > 0) return Internal(name + ": the allocator returned no memory");
    if (!a.owner) a.owner = std::shared_ptr<void>(a.data, [](void*) {});
    return a;
  }
  std::shared_ptr<std::byte[]> buf(new (std::nothrow) std::byte[bytes > 0 ? bytes : 1]);
  if (!buf) return ResourceExhausted(name + ": cannot allocate " + std::to_string(bytes) + " bytes");
  return Allocation{buf.get(), std::shared_ptr<void>(buf, buf.get())};
}

// The transformations a spec implies: a plain target from a block type dequantises first; a target
// type converts at the end.
std::vector<Transform> plan(const TensorInfo& info, const TensorSpec& spec) {
  std::vector<Transform> ts;
  const bool quantised = std::holds_alternative<model::GgmlType>(info.type);
  const bool same = spec.target && *spec.target == info.type;
  if (spec.target && !same && quantised) ts.push_back(Dequantize{});
  ts.insert(ts.end(), spec.transforms.begin(), spec.transforms.end());
  if (spec.target && !same) {
    if (const auto* d = std::get_if<DType>(&*spec.target)) {
      if (!quantised || *d != DType::kFloat32) ts.push_back(Cast{*d});
    } else {
      ts.push_back(Quantize{std::get<model::GgmlType>(*spec.target)});
    }
  }
  return ts;
}

std::string some_names(const Catalog& cat) {
  std::string s;
  for (size_t i = 0; i < cat.entries.size() && i < 5; ++i) s += (i ? ", " : "") + cat.entries[i].info.name;
  if (cat.entries.size() > 5) s += ", ...";
  return s;
}

}  // namespace

WeightLoader::WeightLoader(std::unique_ptr<State> s) : state_(std::move(s)) {}
WeightLoader::WeightLoader(WeightLoader&&) noexcept = default;
WeightLoader& WeightLoader::operator=(WeightLoader&&) noexcept = default;
WeightLoader::~WeightLoader() = default;

Result<WeightLoader> WeightLoader::open(const WeightSource& source, LoadOptions options) {
  auto s = std::make_unique<State>();
  GANTRY_ASSIGN_OR_RETURN(s->cat, parse_source(source, options.http));
  s->options = std::move(options);
  return WeightLoader(std::move(s));
}

const WeightMetadata& WeightLoader::metadata() const { return state_->cat.meta; }

Result<Weight> WeightLoader::load(const TensorSpec& spec) const {
  const Catalog& cat = state_->cat;
  const auto it = cat.by_name.find(spec.name);
  if (it == cat.by_name.end())
    return NotFound(cat.meta.source + ": no tensor \"" + spec.name + "\" (it holds " +
                    std::to_string(cat.entries.size()) + ": " + some_names(cat) + ")");
  const Entry& e = cat.entries[it->second];
  const std::string what = cat.meta.source + ": tensor \"" + e.info.name + "\"";
  const LoadOptions& o = state_->options;
  const auto ts = plan(e.info, spec);

  Weight w;
  w.name = e.info.name;
  w.type = e.info.type;
  w.shape = e.info.shape;
  const bool copy = !ts.empty() ? false : (o.allocate || !o.zero_copy);
  if (copy && !e.materialize) {
    // Straight into the destination: pread for files, one Range download for URLs.
    GANTRY_ASSIGN_OR_RETURN(Allocation a, allocate(o, e.info.bytes, e.info.name));
    const auto& src = cat.sources[e.shard];
    if (auto st = src.read_into(e.offset, std::span(static_cast<std::byte*>(a.data), e.info.bytes)); !st.ok())
      return st.with_context(what);
    GANTRY_ASSIGN_OR_RETURN(w.data, wrap(e.info, a.data, a.owner));
    return w;
  }
  Result<Bytes> raw = e.materialize ? e.materialize() : cat.sources[e.shard].read(e.offset, e.info.bytes);
  if (!raw.ok()) return raw.status().with_context(what);
  if (raw->data.size() != e.info.bytes)
    return Corrupt(what + ": holds " + std::to_string(raw->data.size()) + " bytes, " +
                   weight_type_name(e.info.type) + " " + e.info.shape.to_string() + " needs " +
                   std::to_string(e.info.bytes));
  if (copy) {
    GANTRY_ASSIGN_OR_RETURN(Allocation a, allocate(o, e.info.bytes, e.info.name));
    if (e.info.bytes > 0) std::memcpy(a.data, raw->data.data(), e.info.bytes);
    GANTRY_ASSIGN_OR_RETURN(w.data, wrap(e.info, a.data, a.owner));
    return w;
  }
  // A read-only view (transformations never modify their input).
  GANTRY_ASSIGN_OR_RETURN(w.data, wrap(e.info, const_cast<std::byte*>(raw->data.data()), raw->owner));
  if (ts.empty()) return w;
  auto out = apply_transforms(std::move(w), ts);
  if (!out.ok()) return out.status().with_context(what);
  if (o.allocate) {  // the result into the caller's memory
    const size_t n = out->data.byte_size();
    GANTRY_ASSIGN_OR_RETURN(Allocation a, allocate(o, n, e.info.name));
    if (n > 0) std::memcpy(a.data, out->data.data(), n);
    GANTRY_ASSIGN_OR_RETURN(out->data,
                            Tensor::adopt(out->data.dtype(), out->data.shape(), a.data, n, a.owner));
  }
  return out;
}

Result<std::vector<Weight>> WeightLoader::load_many(const std::vector<TensorSpec>& specs) const {
  std::vector<Weight> out;
  out.reserve(specs.size());
  for (const auto& s : specs) {
    GANTRY_ASSIGN_OR_RETURN(Weight w, load(s));
    out.push_back(std::move(w));
  }
  return out;
}

Status WeightLoader::preload() const {
  for (const auto& s : state_->cat.sources) GANTRY_RETURN_IF_ERROR(s.preload());
  return Status::Ok();
}

Result<WeightMetadata> metadata(const WeightSource& source) {
  GANTRY_ASSIGN_OR_RETURN(Catalog cat, parse_source(source, source.http_options()));
  return std::move(cat.meta);
}

Result<Weight> load(const WeightSource& source, const TensorSpec& spec, LoadOptions options) {
  GANTRY_ASSIGN_OR_RETURN(WeightLoader l, WeightLoader::open(source, std::move(options)));
  return l.load(spec);
}

Status preload(const WeightSource& source) {
  if (source.kind() != WeightSource::Kind::kDirectory) return source.preload();
  GANTRY_ASSIGN_OR_RETURN(WeightLoader l, WeightLoader::open(source));
  return l.preload();
}

Capabilities capabilities() {
  Capabilities c;
  c.formats = {"safetensors", "safetensors-index", "npy", "npz", "onnx", "gguf"};
  c.sources = {"file", "memory", "url", "directory"};
  c.transforms = {"cast", "transpose", "reshape", "slice", "scale", "quantize", "dequantize"};
  c.safetensors_dtypes = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "BOOL", "U8",
                          "I8",  "U16", "I16", "U32",  "I32",     "U64",     "I64"};
  return c;
}

}  // namespace gantry::weights
