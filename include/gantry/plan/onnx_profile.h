// OnnxMemoryProfile: what an ONNX model really took from Gantry's memory pools, measured at one or more
// batch sizes (`gantry plan MODEL.onnx --measure`, gantry/runtime/onnx_measure.h), and what that predicts
// at batch sizes nobody measured.
//
// - One point per measured batch size, per device ("cpu"): the pool's ledger after loading the model
//   (weights), the peak of one inference above that (activations), the most the load itself held
//   (load_peak: ORT copies and prepacks initialisers, then frees the originals), the blocks the pool
//   had mapped beyond its peak in use (arena) and what the load left on the heap outside the pool
//   (outside_pool).
// - Prediction (predict()): a measured batch is returned as measured. Any other batch is predicted from
//   two measured points (activations scale linearly with the batch; weights, load peak and arena do not),
//   preferring the two largest measured batches at or below it, else the two nearest.
// - The profile is cached like the measured provider policy's verdicts (backend::VerdictCache): in the
//   same directory, one JSON file per key, the key being the verdict's (model sha256, device, provider,
//   runtime version) with "|memory" appended; the points inside are keyed by batch. A profile also records
//   the input shapes it was measured at (the batch written as N): points measured at other shapes are not
//   mixed in.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::plan {

// One device at one batch size, in bytes as the pool charges them (rounded allocation sizes).
struct OnnxMemoryBytes {
  uint64_t weights = 0;      // in use once the session exists: initialisers, prepacked weights, caches
  uint64_t activations = 0;  // the peak in use during one inference, above `weights`
  uint64_t load_peak = 0;    // the peak in use while the session was created
  uint64_t arena = 0;        // mapped by the pool beyond its peak in use (block granularity)
  // Held after the load outside the pool (host heap, from malloc's counters): ONNX Runtime's graph and
  // kernels, and constants it keeps where they were parsed (Constant nodes) instead of copying them.
  uint64_t outside_pool = 0;
  // The peak in the pool: max(load_peak, weights + activations). What the pool's ledger charges.
  uint64_t peak_in_use() const;
  // What a budget reserves for the model: peak_in_use() + outside_pool.
  uint64_t reservation() const;
  // The device's real peak: reservation() + arena (the pool's most mapped memory).
  uint64_t total() const;
};

struct OnnxMemoryPoint {
  int64_t batch = 1;
  std::map<std::string, OnnxMemoryBytes> devices;  // by memory device id ("cpu")
};

struct OnnxMemoryProfile {
  std::string key;                      // the cache key (onnx_profile_key)
  std::string model;                    // file name, for people
  std::string provider;                 // "cpu"
  std::string shapes;                   // inputs measured, batch as N: "x=N,3,640,640"
  bool batch_dynamic = false;           // the inputs' leading dims are dynamic (the batch can vary)
  std::vector<OnnxMemoryPoint> points;  // by batch, ascending; at most one per batch

  const OnnxMemoryPoint* at(int64_t batch) const;
  // Adds or replaces the point of its batch (keeps `points` sorted).
  void put(OnnxMemoryPoint point);
};

// What the profile says at one batch size.
struct OnnxMemoryPrediction {
  int64_t batch = 1;
  bool measured = false;      // a measured point; else predicted from `from`
  std::vector<int64_t> from;  // the two measured batches a prediction used
  std::map<std::string, OnnxMemoryBytes> devices;
  std::string basis;             // "measured at batch 4", "predicted from 1 and 2"
  uint64_t peak_in_use() const;  // summed over devices
  uint64_t reservation() const;  // summed over devices
  uint64_t total() const;        // summed over devices
};

// Measured, or predicted from two points. FailedPrecondition when the batch was not measured and fewer
// than two points exist, or the batch is fixed (batch_dynamic false) and differs from the measured one.
Result<OnnxMemoryPrediction> predict(const OnnxMemoryProfile& profile, int64_t batch);

// The two batch sizes a profile is built from: 1 and 2 for a dynamic batch, the fixed one otherwise.
std::vector<int64_t> base_batches(bool batch_dynamic, int64_t fixed_batch);

nlohmann::json profile_to_json(const OnnxMemoryProfile& profile);
Result<OnnxMemoryProfile> profile_from_json(const nlohmann::json& j);
nlohmann::json prediction_to_json(const OnnxMemoryPrediction& p);

// The cache key: backend::VerdictCache::key's fields (sha256|device|provider|runtime version) + "|memory".
std::string onnx_profile_key(std::string_view model_sha256, std::string_view device,
                             std::string_view provider, std::string_view runtime_version);

// Profiles on disk, one small JSON file per key in `dir` (the verdict cache's directory).
class OnnxProfileCache {
 public:
  explicit OnnxProfileCache(std::string dir) : dir_(std::move(dir)) {}
  // nullopt when absent, damaged, or another key's (the file is read as untrusted: bounded, no FIFOs).
  std::optional<OnnxMemoryProfile> get(const std::string& key) const;
  Status put(const OnnxMemoryProfile& profile) const;  // under profile.key
  std::string path_for(const std::string& key) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace gantry::plan
