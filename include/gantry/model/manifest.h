// Manifest: the contract a model package makes (gantry.json) — what the model is, which files belong to it
// with their SHA-256, what it expects as inputs/outputs, and what hardware and runtime settings it wants.
//
// Parsing is strict: an unknown field, a wrong JSON type, a bad enum value, a version that is not a version
// or a model file path that could leave the package directory is an InvalidArgument error whose message
// names the field (e.g. "hardware_requirements.strategy: ..."). Serialising a parsed manifest and parsing it
// again yields an equal manifest.
//
// Example gantry.json:
//   {
//     "name": "silero-vad", "version": "5.0.0", "format": "onnx", "task": "vad",
//     "model_file": "silero_vad_v5.onnx",
//     "sha256": {"silero_vad_v5.onnx": "<64 lower-case hex digits>"},
//     "io": {"inputs": [{"name": "input", "dtype": "f32", "shape": ["batch", 512], "bucket_dims": ["batch"]}],
//            "outputs": [{"name": "output", "dtype": "f32", "shape": ["batch", 1], "bucket_dims": ["batch"]}]},
//     "hardware_requirements": {"preferred_provider": "cuda", "fallback_providers": ["cpu"],
//                               "min_vram_mb": 512, "min_cuda_version": "12.0", "strategy": "pool",
//                               "graph_optimization_level": "all"},
//     "runtime": {"intra_op_threads": 1, "inter_op_threads": 1, "memory_pattern": true, "cpu_arena": true,
//                 "session_buckets": [{"input": [1, 512]}, {"input": [1, 1024]}], "peak_concurrency": 4,
//                 "bucket_max_dims": {"batch": 8}, "bucket_dim_granularity": 4}
//   }
// A GGUF package may carry llama.cpp options instead: "llama": {"n_ctx": 4096, "kv_type": "q8_0"}
// (see backend_options.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/dtype.h"
#include "gantry/core/shape.h"
#include "gantry/core/status.h"
#include "gantry/core/version.h"
#include "gantry/model/backend_options.h"

namespace gantry::model {

// File name of the manifest inside a package.
inline constexpr std::string_view kManifestFileName = "gantry.json";

enum class ModelFormat { kOnnx, kGguf };
std::string_view model_format_name(ModelFormat f);  // "onnx" | "gguf"
std::optional<ModelFormat> parse_model_format(std::string_view text);

// How a model is spread over several devices (gantry/runtime/instance_layout.h: what each one loads where).
enum class Strategy { kPool, kRoundRobin, kDataParallel, kPipeline, kTensorParallel, kAuto };
std::string_view strategy_name(Strategy s);  // "pool" | "round-robin" | ... | "auto"
std::optional<Strategy> parse_strategy(std::string_view text);

// Numeric precision a model must run at (e.g. a provider without fp16 cannot satisfy "fp16"): each candidate
// provider is checked with Backend::precision_support, and rejected with its reason.
enum class Precision { kFp32, kFp16, kBf16, kFp64, kInt8, kInt4 };
std::string_view precision_name(Precision p);  // "fp32" | "fp16" | "bf16" | "fp64" | "int8" | "int4"
std::optional<Precision> parse_precision(std::string_view text);

// Provider names a manifest may use (lower case): cpu, cuda, tensorrt, rocm, migraphx, openvino, coreml,
// directml, vulkan, metal, sycl.
const std::vector<std::string_view>& known_providers();
bool is_known_provider(std::string_view name);

// One input or output as the manifest declares it. A dimension that is dynamic is Shape::kDynamic; in JSON
// it is written as -1, null or a name string (the name is kept in dim_names at the same index, else "").
struct TensorSpec {
  std::string name;
  std::optional<DType> dtype;
  std::optional<Shape> shape;
  std::vector<std::string> dim_names;  // empty, or one entry per dimension of shape
  // Named dynamic dims along which this input may be padded with zeros (an output: trimmed back) to a
  // shape bucket (runtime.bucket_dim_granularity): only where rows/positions do not influence each other.
  std::vector<std::string> bucket_dims;
  bool operator==(const TensorSpec&) const = default;
};

struct IoSpec {
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  bool operator==(const IoSpec&) const = default;
};

struct HardwareRequirements {
  std::optional<std::string> preferred_provider;  // a known provider
  std::vector<std::string> fallback_providers;    // tried in order after the preferred one
  std::optional<uint64_t> min_memory_mb;          // host RAM
  std::optional<uint64_t> min_vram_mb;            // per device
  std::optional<Version> min_cuda_version;        // compared numerically ("12.0" > "9.2")
  std::optional<Precision> required_precision;
  std::optional<int> device_id;     // >= 0
  std::vector<int> gpu_device_ids;  // each >= 0, no duplicates
  std::optional<Strategy> strategy;
  bool operator==(const HardwareRequirements&) const = default;
};

struct RuntimeOptions {
  std::optional<int> intra_op_threads;  // >= 0 (0 = the runtime's default)
  std::optional<int> inter_op_threads;  // >= 0
  // >= 1: how many requests the model may see at once: that many instances (ONNX sessions) per device, or
  // for a GGUF that many parallel sequences (runtime::LoadOptions::instances, `--instances`, wins).
  std::optional<int> peak_concurrency;
  bool operator==(const RuntimeOptions&) const = default;
};

// Triton's dynamic-batching knobs (its model config's `dynamic_batching`), read by servers that batch
// the model's requests. Unset fields take the server's defaults.
struct DynamicBatching {
  std::optional<int64_t> max_batch_size;                // rows per batch, 1..65536
  std::vector<int64_t> preferred_batch_size;            // each 1..65536: a batch this large starts at once
  std::optional<int64_t> max_queue_delay_microseconds;  // 0..60000000: how long a batch may wait to fill
  bool operator==(const DynamicBatching&) const = default;
};

struct Manifest {
  std::string name;                           // required, non-empty
  std::string version;                        // required; Version::parse accepts it
  ModelFormat format = ModelFormat::kOnnx;    // required
  std::string task;                           // optional free text ("classification", "vad", ...)
  std::string model_file;                     // required; relative path inside the package, '/' separated
  std::map<std::string, std::string> sha256;  // required; file -> 64 lower-case hex digits; holds model_file
  std::optional<IoSpec> io;
  HardwareRequirements hardware_requirements;
  RuntimeOptions runtime;
  std::optional<DynamicBatching> dynamic_batching;
  // Backend options (backend_options.h): ONNX Runtime's are read from hardware_requirements.
  // graph_optimization_level and runtime.memory_pattern/cpu_arena/session_buckets (format onnx only);
  // llama.cpp's from the "llama" object (format gguf only).
  OnnxOptions onnx;
  LlamaOptions llama;
  bool operator==(const Manifest&) const = default;
};

// Parses gantry.json text strictly (see the top of this file). `origin` (e.g. a file path) prefixes messages.
Result<Manifest> parse_manifest(std::string_view json_text, std::string_view origin = "gantry.json");

// Reads and parses a manifest file. NotFound when it is missing; IoError when unreadable.
Result<Manifest> read_manifest(const std::filesystem::path& path);

// Checks the invariants parse_manifest enforces on a manifest built in code (name, version, model_file
// relative and inside the package, sha256 covering model_file with well-formed digests, value ranges).
Status validate_manifest(const Manifest& manifest);

// JSON text of the manifest (only set optional fields are written), ending with a newline.
std::string manifest_to_json(const Manifest& manifest, int indent = 2);

// Validates and writes the manifest to `path`.
Status write_manifest(const std::filesystem::path& path, const Manifest& manifest);

// Checks that `relative` names a file inside a package: not empty, not absolute, no ".." component, no
// backslash or NUL. Lexical only; package loading also resolves symlinks (see package.h).
Status check_relative_package_path(std::string_view relative, std::string_view field);

}  // namespace gantry::model
