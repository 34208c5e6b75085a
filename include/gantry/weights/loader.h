// The weight loader: lists and loads named tensors from any WeightSource in any supported format.
//
//   auto src = WeightSource::open("ckpt/");                // file, directory or URL
//   auto loader = WeightLoader::open(*src);                // parses headers only
//   loader->metadata().tensors                             // names, types, shapes, bytes
//   auto w = loader->load({"lm_head.weight", DType::kFloat16});
//
// Contract: every header is untrusted (sizes capped, offsets checked against the file and each other,
// shape products checked for overflow, dtype x shape == bytes); errors name the file and the tensor.
// metadata() reads no tensor data. A weight loaded with no transformation from a file or memory source
// is a zero-copy, read-only view into the mapping (unless LoadOptions say otherwise); a URL source
// downloads just that tensor's bytes. PyTorch pickles are refused, never executed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/weights/source.h"
#include "gantry/weights/transform.h"
#include "gantry/weights/weight.h"

namespace gantry::weights {

enum class WeightFormat { kSafetensors, kSafetensorsIndex, kNpy, kNpz, kOnnx, kGguf };
std::string_view weight_format_name(WeightFormat f);

// Largest safetensors header accepted (the reference implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeader = uint64_t{100} << 20;

struct TensorInfo {
  std::string name;
  WeightType type = DType::kFloat32;
  Shape shape;
  uint64_t bytes = 0;
  std::string shard;  // the file holding it (sharded checkpoints, ONNX external data), else ""
};

struct WeightMetadata {
  WeightFormat format = WeightFormat::kSafetensors;
  std::string source;                           // label of the source
  std::vector<TensorInfo> tensors;              // in file order
  std::map<std::string, std::string> metadata;  // safetensors __metadata__, GGUF key/values (as text), ...
  // Keys of `metadata` whose value is a text rendering of a non-string value (GGUF numbers and
  // arrays): shown, but not carried into a converted file as if they were strings.
  std::vector<std::string> rendered_keys;
  std::vector<std::string> shards;  // files beyond the first (sharded / external data)
  std::string config_json;          // a checkpoint directory's config.json, verbatim
  uint64_t total_bytes = 0;
  const TensorInfo* find(std::string_view name) const;
};

// Memory for a loaded weight, given by the caller (e.g. from the Runtime's memory budget): `data`
// must hold `bytes` bytes and stay valid while `owner` lives.
struct Allocation {
  void* data = nullptr;
  std::shared_ptr<void> owner;
};
using Allocator = std::function<Result<Allocation>(uint64_t bytes, const std::string& tensor_name)>;

struct LoadOptions {
  // Views into the source where nothing is transformed; false copies into owned memory.
  bool zero_copy = true;
  // When set, every loaded weight's bytes are in memory from here (zero_copy is then ignored).
  Allocator allocate;
  HttpOptions http;
};

// A tensor to load: `target` converts at the end (a block-quantised source with a plain target is
// dequantised first, so the transformations see f32; a ggml block target quantises).
struct TensorSpec {
  TensorSpec() = default;
  TensorSpec(std::string n, std::optional<WeightType> t = std::nullopt,
             std::vector<Transform> ts = {})  // NOLINT
      : name(std::move(n)), target(t), transforms(std::move(ts)) {}
  std::string name;
  std::optional<WeightType> target;
  std::vector<Transform> transforms;
};

class WeightLoader {
 public:
  // Parses the source's headers (for a directory: the index, every shard's header and config.json).
  static Result<WeightLoader> open(const WeightSource& source, LoadOptions options = {});

  WeightLoader(WeightLoader&&) noexcept;
  WeightLoader& operator=(WeightLoader&&) noexcept;
  ~WeightLoader();

  const WeightMetadata& metadata() const;
  Result<Weight> load(const TensorSpec& spec) const;
  Result<std::vector<Weight>> load_many(const std::vector<TensorSpec>& specs) const;
  // Readahead of every mapped file behind the source.
  Status preload() const;

  struct State;

 private:
  explicit WeightLoader(std::unique_ptr<State> s);
  std::unique_ptr<State> state_;
};

// One-shot helpers.
Result<WeightMetadata> metadata(const WeightSource& source);
Result<Weight> load(const WeightSource& source, const TensorSpec& spec, LoadOptions options = {});
Status preload(const WeightSource& source);

struct Capabilities {
  std::vector<std::string> formats;
  std::vector<std::string> sources;
  std::vector<std::string> transforms;
  std::vector<std::string> safetensors_dtypes;
};
Capabilities capabilities();

}  // namespace gantry::weights
