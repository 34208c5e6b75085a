// GGUF v3 writer: header (magic, version 3, tensor count, key/value count), the metadata as string
// key/values, the tensor infos (name, ggml dims = the row-major shape reversed, ggml type id, data offset),
// padding to the alignment (32, GGUF's default, so no general.alignment key is written), then each
// tensor's bytes, each padded to the alignment. All integers little-endian, as GGUF is.
#include <bit>
#include <string>

#include "gantry/core/file_io.h"
#include "gantry/weights/writer.h"
#include "weights/writer_common.h"

namespace gantry::weights {
namespace {

constexpr uint64_t kAlignment = 32;
constexpr uint32_t kGgufTypeString = 8;
constexpr int kMaxDims = 4;  // GGML_MAX_DIMS

static_assert(std::endian::native == std::endian::little,
              "GGUF is little-endian; this writer assumes a little-endian host");

// A plain type's ggml id, or -1 when ggml has none.
int64_t ggml_plain_id(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 0;
    case DType::kFloat16:
      return 1;
    case DType::kInt8:
      return 24;
    case DType::kInt16:
      return 25;
    case DType::kInt32:
      return 26;
    case DType::kInt64:
      return 27;
    case DType::kFloat64:
      return 28;
    case DType::kBFloat16:
      return 30;
    default:
      return -1;
  }
}

class Buffer {
 public:
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void str(std::string_view s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void pad_to(uint64_t alignment) {
    bytes_.append((alignment - bytes_.size() % alignment) % alignment, '\0');
  }
  const std::string& bytes() const { return bytes_; }

 private:
  void raw(const void* p, size_t n) { bytes_.append(static_cast<const char*>(p), n); }
  std::string bytes_;
};

}  // namespace

Status write_gguf(const std::filesystem::path& path, const std::vector<Weight>& weights,
                  const std::map<std::string, std::string>& metadata) {
  const std::string where = "writing GGUF " + path.string();
  std::vector<uint32_t> type_ids;
  for (const Weight& w : weights) {
    if (const auto* d = std::get_if<DType>(&w.type)) {
      const int64_t id = ggml_plain_id(*d);
      if (id < 0)
        return InvalidArgument(where + ": '" + w.name + "' is " + weight_type_name(w.type) +
                               ", which GGUF has no type for (cast it to f32, f16, bf16, f64 or i8..i64)");
      type_ids.push_back(static_cast<uint32_t>(id));
    } else {
      type_ids.push_back(static_cast<uint32_t>(std::get<model::GgmlType>(w.type)));
    }
    if (w.shape.rank() > static_cast<size_t>(kMaxDims))
      return InvalidArgument(where + ": '" + w.name + "' has rank " + std::to_string(w.shape.rank()) +
                             ", GGUF (ggml) allows at most " + std::to_string(kMaxDims) + " dimensions");
  }
  if (Status s = detail::check_weights(weights, "GGUF"); !s.ok()) return s.with_context(where);

  Buffer head;
  head.u32(0x46554747);  // "GGUF"
  head.u32(3);
  head.u64(weights.size());
  head.u64(metadata.size());
  for (const auto& [k, v] : metadata) {
    head.str(k);
    head.u32(kGgufTypeString);
    head.str(v);
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const Weight& w = weights[i];
    head.str(w.name);
    const auto& dims = w.shape.dims();
    if (dims.empty()) {  // a scalar: ggml has no rank 0, one dimension of 1 holds it
      head.u32(1);
      head.u64(1);
    } else {
      head.u32(static_cast<uint32_t>(dims.size()));
      for (size_t d = dims.size(); d-- > 0;) head.u64(static_cast<uint64_t>(dims[d]));
    }
    head.u32(type_ids[i]);
    head.u64(offset);
    offset += (w.data.byte_size() + kAlignment - 1) / kAlignment * kAlignment;
  }
  head.pad_to(kAlignment);

  auto file = AtomicFile::create(path);
  if (!file.ok()) return file.status().with_context(where);
  GANTRY_RETURN_IF_ERROR(file->write(head.bytes()));
  const std::string zeros(kAlignment, '\0');
  for (const Weight& w : weights) {
    const size_t n = w.data.byte_size();
    if (n) GANTRY_RETURN_IF_ERROR(file->write(std::span(static_cast<const std::byte*>(w.data.data()), n)));
    GANTRY_RETURN_IF_ERROR(
        file->write(std::string_view(zeros).substr(0, (kAlignment - n % kAlignment) % kAlignment)));
  }
  return file->commit();
}

}  // namespace gantry::weights
