// GGUF parsing over untrusted bytes. Layout (little-endian):
//   "GGUF" u32 version, u64 n_tensors, u64 n_kv, n_kv x (string key, u32 type, value),
//   n_tensors x (string name, u32 n_dims, u64 dims[n_dims], u32 ggml type, u64 offset),
//   padding to general.alignment, tensor data.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "gantry/model/gguf.h"

namespace gantry::model {

struct GgufFile::Storage {
  void* map = nullptr;
  size_t map_size = 0;
  std::vector<uint8_t> copy;
  ~Storage() {
    if (map != nullptr) munmap(map, map_size);
  }
};

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

namespace {

constexpr uint32_t kMaxDims = 4;              // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;             // nested arrays deeper than this are refused
constexpr uint64_t kMinKvBytes = 13;          // key length (8) + type (4) + smallest value (1)
constexpr uint64_t kMinTensorInfoBytes = 24;  // name length (8) + n_dims (4) + type (4) + offset (8)

// Reads little-endian values from the file, failing with the byte offset instead of reading past the end.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& label) : bytes_(bytes), label_(label) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  Status error(uint64_t at, std::string_view what) const {
    return Corrupt(fmt::format("GGUF file {}: at byte {}: {}", label_, at, what));
  }

  template <typename T>
  Status read(T& out, std::string_view what) {
    if (remaining() < sizeof(T)) {
      return error(pos_, fmt::format("file ends while reading {} ({} bytes needed, {} left)", what, sizeof(T),
                                     remaining()));
    }
    std::memcpy(&out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status read_string(std::string& out, std::string_view what) {
    const uint64_t start = pos_ + sizeof(uint64_t);
    GANTRY_RETURN_IF_ERROR(skip_string(what));
    out.assign(reinterpret_cast<const char*>(bytes_.data() + start), pos_ - start);
    return Status::Ok();
  }

  // Skips a u64 length + bytes, checking both against the end.
  Status skip_string(std::string_view what) {
    const uint64_t at = pos_;
    uint64_t len = 0;
    GANTRY_RETURN_IF_ERROR(read(len, fmt::format("the length of {}", what)));
    if (len > remaining()) {
      return error(at,
                   fmt::format("{} claims {} bytes but only {} remain in the file", what, len, remaining()));
    }
    pos_ += len;
    return Status::Ok();
  }

  std::span<const uint8_t> bytes_from(uint64_t at) const { return bytes_.subspan(at); }
  void advance(uint64_t n) { pos_ += n; }  // n <= remaining(), checked by the caller

  // Refuses `count` items of at least `min_size` bytes each when the rest of the file cannot hold them.
  Status check_count(uint64_t count, uint64_t min_size, uint64_t at, std::string_view what) const {
    if (min_size > 0 && count > remaining() / min_size) {
      return error(at, fmt::format("{} count {} is larger than the remaining {} bytes could hold", what,
                                   count, remaining()));
    }
    return Status::Ok();
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& label_;
  uint64_t pos_ = 0;
};

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

uint64_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::kUInt8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUInt16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUInt32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kString:
    case GgufType::kUInt64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kArray:
      return 12;
  }
  return 1;
}

Status read_value(Cursor& c, GgufType type, int depth, GgufValue& out);

template <typename T>
Status read_scalar(Cursor& c, GgufType type, GgufValue& out) {
  T v{};
  GANTRY_RETURN_IF_ERROR(c.read(v, fmt::format("a {} value", gguf_type_name(type))));
  if constexpr (std::is_floating_point_v<T>) {
    out = GgufValue::from_float(type, static_cast<double>(v));
  } else if constexpr (std::is_signed_v<T>) {
    out = GgufValue::from_int(type, static_cast<int64_t>(v));
  } else {
    out = GgufValue::from_uint(type, static_cast<uint64_t>(v));
  }
  return Status::Ok();
}

Status read_array(Cursor& c, int depth, GgufValue& out) {
  const uint64_t at = c.pos();
  if (depth >= kMaxArrayDepth)
    return c.error(at, fmt::format("arrays nested deeper than {}", kMaxArrayDepth));
  uint32_t elem = 0;
  GANTRY_RETURN_IF_ERROR(c.read(elem, "an array element type"));
  if (!valid_value_type(elem)) return c.error(at, fmt::format("unknown array element type {}", elem));
  uint64_t count = 0;
  GANTRY_RETURN_IF_ERROR(c.read(count, "an array length"));
  const auto elem_type = static_cast<GgufType>(elem);
  GANTRY_RETURN_IF_ERROR(c.check_count(count, min_value_bytes(elem_type), at + 4, "array element"));
  // Numbers, bools and strings are not decoded here: the array views the file's bytes (see GgufArray).
  if (elem_type == GgufType::kString) {
    std::vector<uint64_t> offsets;
    offsets.reserve(count);
    const uint64_t first = c.pos();
    for (uint64_t i = 0; i < count; ++i) {
      offsets.push_back(c.pos() - first);
      GANTRY_RETURN_IF_ERROR(c.skip_string("an array string"));
    }
    out = GgufValue::from_array(GgufArray::of_strings(c.bytes_from(first), std::move(offsets)));
    return Status::Ok();
  }
  if (elem_type != GgufType::kArray) {
    const uint64_t first = c.pos();
    const uint64_t size = count * min_value_bytes(elem_type);  // check_count: size <= remaining()
    std::span<const uint8_t> elements = c.bytes_from(first).first(size);
    if (elem_type == GgufType::kBool) {
      for (uint64_t i = 0; i < count; ++i) {
        if (elements[i] > 1)
          return c.error(first + i, fmt::format("bool value {} is neither 0 nor 1", elements[i]));
      }
    }
    c.advance(size);
    out = GgufValue::from_array(GgufArray::of_fixed(elem_type, count, elements));
    return Status::Ok();
  }
  // Parsed arrays cost ~100 bytes each for 12 in the file; llama.cpp reads no nested arrays at all.
  constexpr uint64_t kMaxNestedArrays = 1u << 16;
  if (count > kMaxNestedArrays) {
    return c.error(at, fmt::format("an array of {} arrays is more than the {} Gantry reads", count,
                                   kMaxNestedArrays));
  }
  std::vector<GgufValue> values(count);
  for (auto& item : values) GANTRY_RETURN_IF_ERROR(read_value(c, elem_type, depth + 1, item));
  out = GgufValue::from_array(GgufArray::of_values(elem_type, std::move(values)));
  return Status::Ok();
}

Status read_value(Cursor& c, GgufType type, int depth, GgufValue& out) {
  switch (type) {
    case GgufType::kUInt8:
      return read_scalar<uint8_t>(c, type, out);
    case GgufType::kInt8:
      return read_scalar<int8_t>(c, type, out);
    case GgufType::kUInt16:
      return read_scalar<uint16_t>(c, type, out);
    case GgufType::kInt16:
      return read_scalar<int16_t>(c, type, out);
    case GgufType::kUInt32:
      return read_scalar<uint32_t>(c, type, out);
    case GgufType::kInt32:
      return read_scalar<int32_t>(c, type, out);
    case GgufType::kFloat32:
      return read_scalar<float>(c, type, out);
    case GgufType::kUInt64:
      return read_scalar<uint64_t>(c, type, out);
    case GgufType::kInt64:
      return read_scalar<int64_t>(c, type, out);
    case GgufType::kFloat64:
      return read_scalar<double>(c, type, out);
    case GgufType::kBool: {
      const uint64_t at = c.pos();
      uint8_t b = 0;
      GANTRY_RETURN_IF_ERROR(c.read(b, "a bool value"));
      if (b > 1) return c.error(at, fmt::format("bool value {} is neither 0 nor 1", b));
      out = GgufValue::from_bool(b != 0);
      return Status::Ok();
    }
    case GgufType::kString: {
      std::string s;
      GANTRY_RETURN_IF_ERROR(c.read_string(s, "a string value"));
      out = GgufValue::from_string(std::move(s));
      return Status::Ok();
    }
    case GgufType::kArray:
      return read_array(c, depth, out);
  }
  return c.error(c.pos(), "unknown value type");
}

}  // namespace

Result<GgufFile> GgufFile::open(const std::filesystem::path& path) {
  const std::string label = path.string();
  // O_NONBLOCK: a FIFO planted as the model fails the regular-file check below instead of blocking.
  const int fd = ::open(label.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(fmt::format("GGUF file {} does not exist", label));
    return IoError(fmt::format("cannot open GGUF file {}: {}", label, std::strerror(err)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(fmt::format("{} is not a regular file", label));
  }
  GgufFile f;
  f.label_ = label;
  f.storage_ = std::make_unique<Storage>();
  const auto size = static_cast<size_t>(st.st_size);
  if (size > 0) {
    void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return IoError(fmt::format("cannot map GGUF file {}: {}", label, std::strerror(err)));
    }
    f.storage_->map = map;
    f.storage_->map_size = size;
    f.bytes_ = std::span<const uint8_t>(static_cast<const uint8_t*>(map), size);
  }
  ::close(fd);
  GANTRY_RETURN_IF_ERROR(f.parse_all());
  return f;
}

Result<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, std::string label) {
  GgufFile f;
  f.label_ = std::move(label);
  f.storage_ = std::make_unique<Storage>();
  f.storage_->copy.assign(bytes.begin(), bytes.end());
  f.bytes_ = std::span<const uint8_t>(f.storage_->copy.data(), f.storage_->copy.size());
  GANTRY_RETURN_IF_ERROR(f.parse_all());
  return f;
}

Status GgufFile::parse_all() {
  Cursor c(bytes_, label_);
  char magic[4] = {};
  GANTRY_RETURN_IF_ERROR(c.read(magic, "the magic \"GGUF\""));
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    return c.error(0, "bad magic: this is not a GGUF file (it does not start with \"GGUF\")");
  }
  GANTRY_RETURN_IF_ERROR(c.read(version_, "the version"));
  if (version_ == 1) {
    return Unsupported(
        fmt::format("GGUF file {}: version 1 is not supported (only 2 and 3); re-convert the model", label_));
  }
  if (version_ != 2 && version_ != 3) {
    return c.error(4, fmt::format("unknown GGUF version {} (only 2 and 3 are supported)", version_));
  }
  uint64_t n_tensors = 0, n_kv = 0;
  const uint64_t n_tensors_at = c.pos();
  GANTRY_RETURN_IF_ERROR(c.read(n_tensors, "the tensor count"));
  const uint64_t n_kv_at = c.pos();
  GANTRY_RETURN_IF_ERROR(c.read(n_kv, "the metadata count"));
  GANTRY_RETURN_IF_ERROR(c.check_count(n_kv, kMinKvBytes, n_kv_at, "metadata key/value"));
  GANTRY_RETURN_IF_ERROR(c.check_count(n_tensors, kMinTensorInfoBytes, n_tensors_at, "tensor"));

  kv_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t at = c.pos();
    std::string key;
    GANTRY_RETURN_IF_ERROR(c.read_string(key, fmt::format("metadata key #{}", i)));
    if (kv_index_.count(key)) return c.error(at, fmt::format("duplicate metadata key \"{}\"", key));
    const uint64_t type_at = c.pos();
    uint32_t type = 0;
    GANTRY_RETURN_IF_ERROR(c.read(type, fmt::format("the type of \"{}\"", key)));
    if (!valid_value_type(type)) {
      return c.error(type_at, fmt::format("metadata \"{}\" has unknown value type {}", key, type));
    }
    GgufValue value;
    Status st = read_value(c, static_cast<GgufType>(type), 0, value);
    if (!st.ok()) return st.with_context(fmt::format("reading metadata \"{}\"", key));
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(value));
  }

  if (const GgufValue* a = find("general.alignment")) {
    const auto v = a->as_uint();
    if (a->type() != GgufType::kUInt32 || !v || *v == 0 || (*v & (*v - 1)) != 0) {
      return Corrupt(fmt::format("GGUF file {}: general.alignment must be a u32 power of two, got {}", label_,
                                 a->to_string()));
    }
    alignment_ = static_cast<uint32_t>(*v);
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const uint64_t at = c.pos();
    GgufTensorInfo t;
    GANTRY_RETURN_IF_ERROR(c.read_string(t.name, fmt::format("the name of tensor #{}", i)));
    if (tensor_index_.count(t.name)) return c.error(at, fmt::format("duplicate tensor name \"{}\"", t.name));
    const uint64_t dims_at = c.pos();
    uint32_t n_dims = 0;
    GANTRY_RETURN_IF_ERROR(c.read(n_dims, fmt::format("the rank of tensor \"{}\"", t.name)));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return c.error(
          dims_at, fmt::format("tensor \"{}\" has {} dimensions (1..{} allowed)", t.name, n_dims, kMaxDims));
    }
    t.dims.resize(n_dims);
    t.n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim_at = c.pos();
      GANTRY_RETURN_IF_ERROR(c.read(t.dims[d], fmt::format("dimension {} of tensor \"{}\"", d, t.name)));
      const uint64_t dim = t.dims[d];
      // ggml holds dims as int64_t; the element count must stay below INT64_MAX too.
      if (dim > static_cast<uint64_t>(INT64_MAX) ||
          (dim != 0 && t.n_elements > static_cast<uint64_t>(INT64_MAX) / dim)) {
        return c.error(dim_at, fmt::format("tensor \"{}\" dimension {} = {} overflows the element count",
                                           t.name, d, dim));
      }
      t.n_elements *= dim;
    }
    const uint64_t type_at = c.pos();
    uint32_t type_id = 0;
    GANTRY_RETURN_IF_ERROR(c.read(type_id, fmt::format("the type of tensor \"{}\"", t.name)));
    const auto traits = ggml_type_traits(type_id);
    if (!traits) {
      return Unsupported(
          fmt::format("GGUF file {}: at byte {}: tensor \"{}\" has unknown ggml type id {}; this "
                      "build knows ids 0-3, 6-30, 34, 35, 39-42",
                      label_, type_at, t.name, type_id));
    }
    t.type = *traits;
    if (t.dims[0] % t.type.block_size != 0) {
      return c.error(dims_at,
                     fmt::format("tensor \"{}\" row length {} is not a multiple of the {} block size {}",
                                 t.name, t.dims[0], t.type.name, t.type.block_size));
    }
    t.size_bytes =
        ggml_row_bytes(t.type, t.n_elements);  // n_elements <= INT64_MAX, type_size/block <= 8: no overflow
    const uint64_t off_at = c.pos();
    GANTRY_RETURN_IF_ERROR(c.read(t.offset, fmt::format("the data offset of tensor \"{}\"", t.name)));
    if (t.offset % alignment_ != 0) {
      return c.error(off_at, fmt::format("tensor \"{}\" data offset {} is not a multiple of the alignment {}",
                                         t.name, t.offset, alignment_));
    }
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  const uint64_t end_of_infos = c.pos();
  data_offset_ = end_of_infos + (alignment_ - end_of_infos % alignment_) % alignment_;
  const uint64_t size = bytes_.size();
  if (n_tensors > 0 && data_offset_ > size) {
    return c.error(end_of_infos,
                   fmt::format("the data section would start at byte {}, past the end of the {}-byte file",
                               data_offset_, size));
  }
  const uint64_t data_size = size - std::min(size, data_offset_);
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const auto& t : tensors_) {
    if (t.offset > data_size || t.size_bytes > data_size - t.offset) {
      return Corrupt(
          fmt::format("GGUF file {}: tensor \"{}\" data [{}, {}) runs past the end of the file ({} bytes; "
                      "the file is truncated or corrupt)",
                      label_, t.name, data_offset_ + t.offset, data_offset_ + t.offset + t.size_bytes, size));
    }
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo* prev = by_offset[i - 1];
    if (prev->size_bytes > 0 && by_offset[i]->offset < prev->offset + prev->size_bytes) {
      return Corrupt(fmt::format("GGUF file {}: tensors \"{}\" and \"{}\" overlap at byte {}", label_,
                                 prev->name, by_offset[i]->name, data_offset_ + by_offset[i]->offset));
    }
  }
  return Status::Ok();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->as_uint() : std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->as_float() : std::nullopt;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->as_string() == nullptr) return std::nullopt;
  return *v->as_string();
}

std::string GgufFile::architecture() const { return get_string("general.architecture").value_or(""); }

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> GgufFile::tensor_data(const GgufTensorInfo& t) const {
  return bytes_.subspan(data_offset_ + t.offset, t.size_bytes);
}

}  // namespace gantry::model
