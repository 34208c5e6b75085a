// Measuring what an ONNX model really takes (`gantry plan MODEL.onnx --measure`), and the runtime's budget
// reserving from that measurement instead of the rule of thumb.
//
// A point is measured in a Runtime of its own, so that its CPU BlockPool (the one the Runtime gives ONNX
// Runtime as the env allocator) holds nothing else: load the model (provider chosen as Runtime::load
// chooses it), read the pool's ledger (weights in use, the load's peak) and malloc's counters (what the load
// left on the heap outside the pool), start the peaks afresh, run once on synthesised inputs at the batch
// size (gantry/backend/synthesize.h) and read the pool again (activations: the peak in use above the
// weights; arena: what the pool mapped beyond its peak in use). ONNX Runtime's one-time set-up is kept out
// of the heap figure by a throwaway load first. Under a CUDA provider the device's own pool (the runtime
// makes one per CUDA device) is read the same way; the CUDA context and the EP's cuBLAS/cuDNN workspaces
// are outside it and not measured (the reservation adds onnx::kCudaEpUnpooledBytes for them, as the rule
// of thumb does). A device without a Gantry pool is not measured, and said so.
//
// Inputs: the batch is every dim carrying the symbolic name of the first input's leading dim (or, when
// unnamed, every input's dynamic leading dim); other dynamic dims are 1 unless `shapes` gives the input's
// full shape (its batch positions are then replaced by the batch).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gantry/backend/backend.h"
#include "gantry/backend/loader.h"
#include "gantry/backend/model.h"
#include "gantry/core/status.h"
#include "gantry/hw/registry.h"
#include "gantry/model/package.h"
#include "gantry/plan/onnx_profile.h"

namespace gantry::runtime {

// Full input shapes given by the user, by input name.
using InputShapes = std::map<std::string, std::vector<int64_t>>;

// Parses one "--shape NAME=D0,D1,..." value into `shapes` (InvalidArgument naming what is wrong).
Status parse_input_shape(std::string_view text, InputShapes& shapes);

// How the model's inputs are fed: where the batch is, and the shape of every input at `batch`.
struct InputLayout {
  bool batch_dynamic = false;          // the first input's leading dim is dynamic
  int64_t fixed_batch = 1;             // its value when static
  std::string signature;               // "x=N,3,640,640" (inputs joined by ';')
  std::vector<std::string> defaulted;  // dynamic non-batch dims set to 1 ("x[2]")
};
Result<InputLayout> input_layout(const std::vector<backend::TensorInfo>& inputs, const InputShapes& shapes);
// The shapes of every input at `batch` (for backend::synthesize_inputs).
Result<model::SessionBucket> inputs_at_batch(const std::vector<backend::TensorInfo>& inputs,
                                             const InputShapes& shapes, int64_t batch);

struct OnnxMeasureOptions {
  std::vector<int64_t> batches;  // measured unless the cache has them (the base batches are added)
  InputShapes shapes;
  std::optional<hw::Registry> hardware;  // default: detect this machine
  std::string memory_budget;             // as RuntimeOptions::memory_budget
  std::string cache_dir;                 // "": backend::VerdictCache::default_dir(); "none": no cache
  backend::LoadOptions factory;          // provider policy, threads
};

struct OnnxMeasureReport {
  plan::OnnxMemoryProfile profile;
  std::vector<int64_t> measured;  // batches measured by this call
  std::vector<int64_t> cached;    // batches the cache already had
  std::string cache_file;         // where the profile is ("" without a cache)
  std::string backend;            // "onnxruntime 1.29.0"
  std::string device;             // the device label of the key ("cpu AMD EPYC ...")
  std::vector<std::string> notes;
};

// Measures `source` (a .onnx file or package) at the base batches and `options.batches`, reusing and
// updating the cached profile. With `measure` false, only reads the cache (the report's profile has no
// points when there is none).
Result<OnnxMeasureReport> measure_onnx_memory(const std::string& source, const OnnxMeasureOptions& options,
                                              bool measure = true);

// The reservation a cached profile gives `package` under `placement` (the same key the measurement
// wrote): per device the reservation (pool peak in use + heap outside the pool) at the batch the model will
// run at (its manifest's
// dynamic_batching.max_batch_size, else 1, or its fixed batch), measured or predicted. nullopt when no
// profile is cached or it cannot say.
std::optional<backend::MemoryEstimate> profile_reservation(const std::string& cache_dir,
                                                           const hw::Registry& machine,
                                                           const model::Package& package,
                                                           const backend::Placement& placement,
                                                           const backend::Backend& backend);

}  // namespace gantry::runtime
