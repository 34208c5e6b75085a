// OnnxModel: one ONNX model in ONNX Runtime sessions, behind the backend::Model contract.
//
// - Inputs are validated (name, dtype, rank, static dims) before Run, with errors naming the input and
//   the expected vs. given dtype/shape; host inputs are bound zero-copy (the tensor's own memory).
//   A zero-size dimension where the model declares a dynamic one is refused (ONNX Runtime kernels can
//   call std::terminate on empty batches), and inputs that share a symbolic dimension name ("batch")
//   must agree on it. A Run that still fails on the inputs is InvalidArgument; anything Run throws is
//   caught (Internal).
// - Outputs are owned gantry::Tensors. String tensors are supported both ways.
// - Output buffers are reused: an output whose shape follows from the inputs' shapes (static dims, or
//   symbolic dims an input shares, like "batch") is preallocated and handed to Run, from a small
//   per-model cache of buffers no caller holds any more (never one a caller still holds). A
//   prediction ORT rejects turns the reuse off for the model. Not with env allocators (pool memory
//   is then attributed per Run).
// - infer_batch concatenates requests along a dynamic leading (batch) dim, runs once and splits.
// - Session buckets (placement.onnx.session_buckets): extra sessions specialised for fixed input shapes,
//   used when a request's shapes match a bucket exactly.
// - Shape buckets for dynamic dims (placement.onnx.bucket_dim_granularity with the manifest's io
//   bucket_dims; see shape_buckets.h): a request is padded up to its bucket, run on that bucket's own
//   session (made on first use, with its own memory pattern) and its outputs trimmed back. At most
//   kMaxDynamicBuckets such sessions live; the least used is dropped to make room.
#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gantry/backend/model.h"
#include "gantry/backend/onnx/ort_types.h"
#include "gantry/backend/onnx/shape_buckets.h"
#include "gantry/backend/placement.h"

namespace gantry::onnx {

class OrtValues;  // backend/onnx/ort_values.h

// Shape-bucket sessions a model keeps at most.
inline constexpr size_t kMaxDynamicBuckets = 8;

// How OnnxModel creates its sessions, beyond the placement.
struct OnnxModelOptions {
  // Allocate from the memory pools registered on OrtRuntime (OrtRuntime::use_pool) instead of ORT's
  // own arena; session creation and every Run then run inside memory::OwnerScope(<model name>), so the
  // pool attributes the model's initializers, activations and outputs to it.
  bool use_env_allocators = false;
};

class OnnxModel final : public backend::Model {
 public:
  // Opens `model_file` with the session options in `placement`. Errors: NotFound (no file), Corrupt
  // (empty, truncated or not an ONNX model), Unsupported (an input or output that is not a tensor of a
  // supported dtype, or an operator this ORT lacks), Unavailable (provider absent).
  // With options.use_env_allocators, a load or Run the pool or its budget refuses fails with
  // ResourceExhausted and the refusal's numbers.
  static Result<std::unique_ptr<OnnxModel>> open(const std::filesystem::path& model_file,
                                                 const backend::Placement& placement, std::string name = {},
                                                 const OnnxModelOptions& options = {});
  // Opens an ONNX model held in memory (ONNX Runtime's CreateSessionFromArray), with the same errors as
  // open(). `owner` keeps `bytes` alive as long as the model (shape-bucket sessions are created from them
  // later); `label` names the model in errors (a URL, a file name). A model with external data files
  // cannot be opened this way (ONNX Runtime has no directory to find them in).
  static Result<std::unique_ptr<OnnxModel>> open_bytes(std::span<const std::byte> bytes,
                                                       std::shared_ptr<const void> owner, std::string label,
                                                       const backend::Placement& placement,
                                                       std::string name = {},
                                                       const OnnxModelOptions& options = {});
  ~OnnxModel() override;

  const backend::ModelMetadata& metadata() const override { return meta_; }
  Status init() override { return Status::Ok(); }
  Result<std::vector<backend::NamedTensor>> infer_one(std::span<const backend::NamedTensor> inputs) override;
  // Stops the run midway (ONNX Runtime's terminate flag, set by the process's RunTerminator within about a
  // millisecond of `cancelled` saying true, checked by ONNX Runtime between nodes) and returns Cancelled.
  Result<std::vector<backend::NamedTensor>> infer_cancellable(std::span<const backend::NamedTensor> inputs,
                                                              const backend::CancelCheck& cancelled) override;
  Result<std::vector<std::vector<backend::NamedTensor>>> infer_batch(
      std::span<const std::vector<backend::NamedTensor>> requests) override;

  // Checks `inputs` against the model's declared inputs; on success `order[i]` is the index in
  // `inputs` of model input i. Exposed for tests and the CLI.
  Status validate(std::span<const backend::NamedTensor> inputs, std::vector<size_t>& order) const;

  const backend::Placement& placement() const { return placement_; }
  const OnnxModelOptions& options() const { return options_; }
  // The main session (for tests and benchmarks that compare with raw ONNX Runtime).
  Ort::Session& session();
  // Shape-bucket sessions alive now, by their dims ("batch" -> 8).
  std::vector<std::map<std::string, int64_t>> bucket_sessions() const;

 private:
  OnnxModel() = default;
  // open() and open_bytes(): from model_file_, or bytes_ when they are set.
  static Result<std::unique_ptr<OnnxModel>> open_source(std::unique_ptr<OnnxModel> m,
                                                        const std::string& label,
                                                        const backend::Placement& placement, std::string name,
                                                        const OnnxModelOptions& options);
  // A session over the model (its file or bytes) with `so`; throws Ort::Exception.
  std::unique_ptr<Ort::Session> new_session(const Ort::SessionOptions& so) const;
  struct BucketSession {
    model::SessionBucket shapes;  // empty for the main session
    std::unique_ptr<Ort::Session> session;
  };
  // open()'s steps, in order: the main session, the inputs/outputs it declares, what follows from them
  // (sizes, batchable), the shape-bucket rules, the inputs' names/types/shared dims, the session buckets.
  Status open_main_session();
  Status read_signature();
  Status describe();
  Status plan_shape_buckets();
  void index_inputs();
  Status open_session_buckets();

  // Runs on `session`, or (nullptr) the session bucket that matches, else the main one (onnx_run.cpp):
  // bind_inputs, run_session, unpack_outputs.
  // `run_options`: the Run's (a cancellable run's terminate flag), or nullptr.
  Result<std::vector<backend::NamedTensor>> run(const backend::NamedTensor* const* ordered,
                                                Ort::Session* session = nullptr,
                                                const OrtRunOptions* run_options = nullptr);
  struct ReusedOutputs;  // output buffers one Run took from the cache
  // ORT values over the inputs (zero-copy for numeric ones), in the model's input order.
  Result<OrtValues> bind_inputs(const backend::NamedTensor* const* ordered) const;
  // The Run, with outputs preallocated from the cache where their shapes can be predicted; a Run that
  // rejects the prediction runs again without it and turns reuse off.
  Status run_session(Ort::Session& session, const backend::NamedTensor* const* ordered,
                     const OrtValues& inputs, OrtValues& outputs, ReusedOutputs& reused,
                     const OrtRunOptions* run_options);
  void preallocate_outputs(const backend::NamedTensor* const* ordered, OrtValues& outputs,
                           ReusedOutputs& reused);
  // The Run's outputs as Tensors that adopt ORT's buffers or the cached ones (strings copied).
  Result<std::vector<backend::NamedTensor>> unpack_outputs(OrtValues& outputs, ReusedOutputs& reused) const;
  // Pads to the request's shape bucket, runs on its session, trims the outputs.
  Result<std::vector<backend::NamedTensor>> run_bucketed(const backend::NamedTensor* const* ordered,
                                                         const OrtRunOptions* run_options);
  struct DynamicBucket {
    std::map<std::string, int64_t> sizes;
    std::shared_ptr<Ort::Session> session;  // in-flight Runs hold it too
    uint64_t uses = 0;
  };
  Result<std::shared_ptr<Ort::Session>> bucket_session(const std::map<std::string, int64_t>& sizes);
  Status check_input(size_t index, const Tensor& t) const;
  // Inputs that share a symbolic dim name agree on its size (`ordered`: the model's input order).
  Status check_shared_dims(const backend::NamedTensor* const* ordered) const;
  // run() with every exception caught.
  Result<std::vector<backend::NamedTensor>> run_caught(const backend::NamedTensor* const* ordered,
                                                       const OrtRunOptions* run_options = nullptr);
  // infer_one's checks: `ordered` gets the inputs in the model's order.
  Status order_inputs(std::span<const backend::NamedTensor> inputs,
                      const backend::NamedTensor** ordered) const;
  Ort::Session* pick_session(const backend::NamedTensor* const* ordered) const;
  // Where each dim of a predictable output comes from.
  struct DimSource {
    int64_t value = -1;  // static dim, or -1
    int input = -1;      // else dim `dim` of input `input`
    int dim = -1;
  };
  // A cached output buffer and the OrtValue over it (for one shape).
  struct OutputSlot {
    std::vector<int64_t> dims;
    std::shared_ptr<std::byte[]> buffer;  // use_count() == 1: no caller holds it
    size_t bytes = 0;
    OrtValue* value = nullptr;
  };
  void plan_output_reuse();
  // Takes a free slot of output `o` for `dims` (creating one when the cache has room) and returns
  // its value with `held` keeping the buffer; nullptr when none.
  OrtValue* take_slot(size_t o, const std::vector<int64_t>& dims, std::shared_ptr<std::byte[]>& held);

  backend::ModelMetadata meta_;
  backend::Placement placement_;
  OnnxModelOptions options_;
  std::filesystem::path model_file_;
  std::span<const std::byte> bytes_;  // a model in memory (model_file_ then empty)
  std::shared_ptr<const void> bytes_owner_;
  std::string label_;  // the model in errors: its file, or open_bytes' label
  BucketRules rules_;
  mutable std::mutex buckets_mu_;
  std::vector<DynamicBucket> dynamic_;
  std::vector<BucketSession> sessions_;
  std::vector<const char*> input_names_;
  std::vector<const char*> output_names_;
  std::vector<int> input_ort_types_;
  // Per symbolic dim name that two or more dynamic input dims share: those (input, dim) positions.
  std::vector<std::vector<std::pair<size_t, size_t>>> shared_dims_;
  std::vector<std::vector<DimSource>> output_dims_;  // per output; empty when not predictable
  std::atomic<bool> reuse_outputs_{false};
  std::mutex slots_mu_;
  std::vector<std::vector<OutputSlot>> slots_;  // per output
  struct ReleaseMemoryInfo {
    void operator()(OrtMemoryInfo* info) const;
  };
  std::unique_ptr<OrtMemoryInfo, ReleaseMemoryInfo> cpu_memory_;  // what host inputs and outputs are in
  OrtAllocator* allocator_ = nullptr;                             // ORT's default (not owned)
};

// ORT element type for a dtype, and back (nullopt/-1 for types Gantry does not carry).
int ort_element_type(DType dtype);
std::optional<DType> dtype_from_ort(int ort_type);

}  // namespace gantry::onnx
