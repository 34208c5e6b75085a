// GgufFile: a parsed, memory-mapped GGUF model file (versions 2 and 3).
//
// Contract: the bytes are untrusted. open()/parse() check every count, length and offset against the file
// size, refuse counts the file could not hold before allocating, and return kCorrupt naming the file and byte
// offset (or kUnsupported for an unknown tensor type / version); they never crash on malformed input. Tensor
// data stays in the mapping: tensor_data() views are valid while the GgufFile lives.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/model/gguf_types.h"

namespace gantry::model {

// Metadata value types, numbered as in the GGUF specification.
enum class GgufType : uint32_t {
  kUInt8 = 0,
  kInt8 = 1,
  kUInt16 = 2,
  kInt16 = 3,
  kUInt32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUInt64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view gguf_type_name(GgufType t);

class GgufValue;

// An array value, decoded on demand. Numbers and bools stay in the parsed bytes and strings are indexed into
// them (8 bytes per string), so a 100 MB metadata array costs no parsed copy; nested arrays are parsed
// (their count is bounded by the file). Valid while the GgufFile that parsed it lives.
class GgufArray {
 public:
  // `elements`: count fixed-size elements of `type` back to back (not kString / kArray).
  static GgufArray of_fixed(GgufType type, uint64_t count, std::span<const uint8_t> elements);
  // `offsets[i]`: where string i (u64 length + bytes, already bounds-checked) starts in `bytes`.
  static GgufArray of_strings(std::span<const uint8_t> bytes, std::vector<uint64_t> offsets);
  static GgufArray of_values(GgufType type, std::vector<GgufValue> values);

  GgufType element_type() const { return element_type_; }
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  GgufValue at(uint64_t i) const;  // requires i < size()

 private:
  GgufType element_type_ = GgufType::kUInt8;
  uint64_t size_ = 0;
  std::span<const uint8_t> bytes_;
  std::vector<uint64_t> string_offsets_;
  std::vector<GgufValue> values_;
};

class GgufValue {
 public:
  GgufValue() = default;
  static GgufValue from_uint(GgufType t, uint64_t v);
  static GgufValue from_int(GgufType t, int64_t v);
  static GgufValue from_float(GgufType t, double v);
  static GgufValue from_bool(bool v);
  static GgufValue from_string(std::string v);
  // Arrays are shared, not copied, between copies of a value.
  static GgufValue from_array(GgufArray v);

  GgufType type() const { return type_; }
  // Integer value of any integer type when it is representable (negative values have no as_uint()).
  std::optional<uint64_t> as_uint() const;
  std::optional<int64_t> as_int() const;
  // Any numeric value as a double.
  std::optional<double> as_float() const;
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const GgufArray* as_array() const;

  // A short human-readable rendering; arrays show at most `max_items` items.
  std::string to_string(size_t max_items = 8) const;

 private:
  GgufType type_ = GgufType::kUInt8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<const GgufArray>> v_{
      uint64_t{0}};
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the contiguous (row) dimension
  GgmlTypeTraits type;
  uint64_t offset = 0;  // relative to the data section
  uint64_t n_elements = 0;
  uint64_t size_bytes = 0;
};

class GgufFile {
 public:
  static constexpr uint32_t kDefaultAlignment = 32;

  // Maps and parses a file.
  static Result<GgufFile> open(const std::filesystem::path& path);
  // Parses bytes held in memory (copied); `label` names them in errors.
  static Result<GgufFile> parse(std::span<const uint8_t> bytes, std::string label = "<memory>");

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& label() const { return label_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return bytes_.size(); }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;

  // general.architecture, or "" when missing.
  std::string architecture() const;
  // "<architecture>.<suffix>", e.g. arch_key("block_count") == "llama.block_count".
  std::string arch_key(std::string_view suffix) const { return architecture() + "." + std::string(suffix); }

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  std::span<const uint8_t> tensor_data(const GgufTensorInfo& t) const;

 private:
  struct Storage;
  GgufFile() = default;
  Status parse_all();

  std::string label_;
  std::unique_ptr<Storage> storage_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace gantry::model
