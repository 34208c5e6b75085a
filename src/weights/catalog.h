// The parsed table of contents of a weight source (internal to src/weights): where each tensor's bytes
// are, produced by one parser per format and consumed by the loader.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/weights/loader.h"

namespace gantry::weights {

struct Entry {
  TensorInfo info;
  size_t shard = 0;     // index into Catalog::sources
  uint64_t offset = 0;  // of the bytes in that source
  // Formats whose bytes are not a plain range of a source (compressed .npz members, ONNX typed
  // fields): produces them. Set => shard/offset unused.
  std::function<Result<Bytes>()> materialize;
};

struct Catalog {
  WeightMetadata meta;
  std::vector<WeightSource> sources;
  std::vector<Entry> entries;
  std::map<std::string, size_t, std::less<>> by_name;
  std::shared_ptr<const void> keepalive;  // parsed state the entries point into

  // Adds an entry; Corrupt when the name is taken.
  Status add(Entry e);
  // Fills meta.tensors and meta.total_bytes from the entries.
  void finish();
};

// Parsers: each reads only headers. `label` names the file in errors.
// safetensors: `shard_name` is recorded in TensorInfo::shard (empty for a single file).
Result<Catalog> parse_safetensors(const WeightSource& src);
Status add_safetensors(Catalog& cat, const WeightSource& src, size_t source_index,
                       const std::string& shard_name, const std::function<bool(const std::string&)>& wanted);
// model.safetensors.index.json (from a file or URL); shards resolve beside it.
Result<Catalog> parse_safetensors_index(const WeightSource& index, const HttpOptions& http);
Result<Catalog> parse_npy(const WeightSource& src);
Result<Catalog> parse_npz(const WeightSource& src);
Result<Catalog> parse_onnx(const WeightSource& src);
Result<Catalog> parse_gguf(const WeightSource& src);
Result<Catalog> parse_directory(const WeightSource& dir, const HttpOptions& http);

// Member names of a zip archive held in memory.
Result<std::vector<std::string>> zip_member_names(std::span<const std::byte> zip, const std::string& label);

// Which format the bytes (and name) look like; Unsupported for PyTorch pickles (with the advice to
// convert to safetensors) and unknown formats.
Result<WeightFormat> detect_format(const WeightSource& src);

// Parses everything `src` holds.
Result<Catalog> parse_source(const WeightSource& src, const HttpOptions& http);

// dtype <-> safetensors spelling ("F32", "BF16", "F8_E4M3", ...).
std::optional<DType> safetensors_dtype(std::string_view s);
std::string_view safetensors_dtype_name(DType t);

// Bytes of `shape` elements of `type`; Corrupt (naming `what`) on overflow or a negative dim.
Result<uint64_t> checked_bytes(const WeightType& type, const Shape& shape, const std::string& what);

}  // namespace gantry::weights
