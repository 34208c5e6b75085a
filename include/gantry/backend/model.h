// Model: the contract every scheduler drives, whatever backend runs it.
//
//   load (Backend::load) -> init -> infer_one / infer_batch ... -> drain -> reset -> infer ...
//
// Contract:
// - init() prepares the model to serve (warm-up, buffers); it is idempotent and cheap when repeated.
// - infer_one/infer_batch are safe to call concurrently from many threads on one Model.
// - Inputs are borrowed for the duration of the call only: a backend binds them zero-copy where it
//   can and never keeps a pointer after returning. Outputs are owned tensors.
// - Inputs are matched by name; inputs given in metadata().inputs order take the fastest path.
// - infer_cancellable is infer_one that a CancelCheck can stop midway (Cancelled).
// - drain() refuses new calls (Unavailable) and returns once every in-flight call has finished;
//   reset() drops per-model state (caches, sequences) and accepts calls again.
// - Text-generation backends (llama.cpp) also implement start_generation/embed (the defaults say the
//   model cannot) and the typed text facet text() (context, chat template, tool calls); through
//   infer_one they take a string tensor (prompt) or an i32 tensor (token ids). Callers never need the
//   backend's own Model class, nor its name.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gantry/backend/generation.h"
#include "gantry/backend/text_model.h"
#include "gantry/core/shape.h"
#include "gantry/core/status.h"
#include "gantry/core/tensor.h"

namespace gantry::backend {

// {name, tensor} (gantry/core/tensor.h): what models take and return, and what .pb files hold.
using NamedTensor = ::gantry::NamedTensor;

// One model input or output as the model declares it.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  Shape shape;                         // dynamic dims are Shape::kDynamic
  std::vector<std::string> dim_names;  // symbolic names of dims ("batch"), "" where none; same rank
};

struct ModelMetadata {
  std::string name;
  std::string backend;   // "onnxruntime", "llama.cpp"
  std::string provider;  // the provider it runs on ("cpu", "cuda", ...)
  std::string format;    // the file format it was loaded from: "onnx", "gguf"
  std::string platform;  // KServe v2's platform name for it ("onnx_onnxv1", "llama.cpp_gguf")
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  // Where inputs must be: kHost models bind host and pinned tensors (not device ones); kDevice models
  // device tensors of their own device. check_admission() refuses the rest with the reason.
  MemoryClass preferred_memory = MemoryClass::kHost;
  // Totals of all inputs / outputs at the largest shapes the model accepts (static dims, and dynamic dims
  // bounded by the manifest's runtime.bucket_max_dims); 0 = unbounded. check_admission() refuses a request
  // beyond them before it is queued.
  uint64_t max_input_bytes = 0;
  uint64_t max_output_bytes = 0;
  bool batchable = false;  // every input and output has a dynamic leading (batch) dim
  int64_t max_batch = 0;   // 0 = no limit
  int instances = 1;       // copies of the model that run requests at the same time (>= 1)
  std::map<std::string, std::string> properties;  // producer, opset, domain, description, ...

  // Index of the input/output called `name`, or -1.
  int input_index(std::string_view name) const;
  int output_index(std::string_view name) const;
};

// Admission of one request, before it is queued or run (servers answer 413 for the first error, the CLI
// says it): ResourceExhausted when the inputs' bytes exceed md.max_input_bytes, or the outputs' bytes
// predicted from the inputs' shapes (a dynamic output dim takes the size of the input dim of the same
// name; an output that cannot be predicted is not checked) exceed md.max_output_bytes; Unsupported when an
// input lies in memory the model cannot bind (see ModelMetadata::preferred_memory). Messages name the model,
// the input and the numbers. Inputs the model does not declare are left to the model's own validation.
Status check_admission(const ModelMetadata& md, std::span<const NamedTensor> inputs);

// A figure only some backends have (a KV cache's cells, speculative decoding's drafts), named and
// explained by the backend itself: a server exports it as `gantry_<name>{model}` without knowing what it is
// (as ggml's backends offer their own extensions by name, ggml_backend_reg_get_proc_address).
struct BackendFigure {
  std::string name;  // the metric's name after "gantry_": [a-z0-9_]+, counters end in "_total"
  std::string help;
  double value = 0;
  bool counter = false;  // cumulative since the model was loaded (else a gauge)
};

// Counters a server shows per model; kept by Model itself (calls, failures, in flight) and by
// generating backends (tokens); anything backend-specific is one of its `figures`.
struct ModelStats {
  uint64_t calls = 0;     // infer/generate/embed calls admitted
  uint64_t failures = 0;  // of those, how many returned an error
  int in_flight = 0;      // calls running now
  uint64_t prompt_tokens = 0;
  uint64_t generated_tokens = 0;
  // Host memory held by caches the model can rebuild (a llama.cpp model's host prompt cache); the
  // budget takes it back first under memory pressure.
  uint64_t cache_bytes = 0;
  // A model with a scheduling loop of its own (a text model's engine): requests queued or running in it,
  // and the steps it has taken so far. Work waiting while the steps stand still is a stuck loop (the
  // server's liveness watchdog); 0 and 0 for models without one.
  uint64_t loop_work = 0;
  uint64_t loop_steps = 0;
  std::vector<BackendFigure> figures;
};

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  virtual const ModelMetadata& metadata() const = 0;

  virtual Status init() = 0;

  // One request: every declared input once. Returns every declared output, in metadata order.
  virtual Result<std::vector<NamedTensor>> infer_one(std::span<const NamedTensor> inputs) = 0;

  // infer_one that stops early when `cancelled` says so (the client went away, the server is stopping, a
  // deadline passed) and then returns Cancelled. The default asks `cancelled` once before running and
  // otherwise runs infer_one to the end; a backend that can stop a run midway (ONNX Runtime's terminate
  // flag) overrides it. `cancelled` may be called from another thread while the run is in flight, until
  // this returns: it must be thread-safe and never block. Empty: infer_one.
  virtual Result<std::vector<NamedTensor>> infer_cancellable(std::span<const NamedTensor> inputs,
                                                             const CancelCheck& cancelled);

  // Several requests at once; the result has one entry per request, in order. The default runs them
  // one by one; backends that can batch (ONNX with a dynamic batch dim) concatenate, run once and split.
  // Fails as a whole when any request is invalid (the message names which).
  virtual Result<std::vector<std::vector<NamedTensor>>> infer_batch(
      std::span<const std::vector<NamedTensor>> requests);

  virtual Status drain();
  virtual Status reset();

  // Text generation (backends whose capabilities say text_generation). The default: Unsupported.
  virtual Result<std::unique_ptr<Generation>> start_generation(GenerationRequest request);
  // start_generation + wait.
  Result<GenerationResult> generate(GenerationRequest request);
  // The text facet (gantry/backend/text_model.h), borrowed; nullptr when the model takes no text.
  virtual TextModel* text() { return nullptr; }
  const TextModel* text() const { return const_cast<Model*>(this)->text(); }
  // Formats a conversation with the model's own chat template (text()->apply_chat, no tools),
  // ending with the assistant's turn when `add_assistant_turn`. Unsupported without a text facet.
  Result<std::string> format_chat(std::span<const ChatMessage> messages, bool add_assistant_turn) const;
  // One pooled vector per text, L2-normalised when `normalize`. The default: Unsupported.
  // `cancelled` is asked between texts and decodes (Cancelled when it says so).
  virtual Result<std::vector<std::vector<float>>> embed(std::span<const std::string> texts,
                                                        bool normalize = true,
                                                        const CancelCheck& cancelled = {});

  // How many tokens `text` becomes in this model's vocabulary (with the special tokens it adds to a
  // prompt), for usage accounting. The default: Unsupported.
  virtual Result<int> token_count(std::string_view text) const;

  // Prompt and generation tokens/s (see ThroughputOptions). The default: Unsupported.
  virtual Result<std::vector<ThroughputResult>> measure_throughput(const ThroughputOptions& options);

  virtual ModelStats stats() const;

  // Whether the model can still serve. A model that depends on something that went away (an RPC server
  // holding some of its layers) says so here, with the reason; the runtime then marks it failed (new calls
  // refused, destroyed once the calls in flight end; loading it again is allowed). Default: Ok.
  virtual Status health() const { return Status::Ok(); }

 protected:
  Model() = default;

  // Brackets one infer call: refuses it while draining. Use as
  //   auto guard = enter(); if (!guard.ok()) return guard.status();
  class CallGuard {
   public:
    explicit CallGuard(std::atomic<int>* inflight) : inflight_(inflight) {}
    CallGuard(CallGuard&& o) noexcept : inflight_(o.inflight_), status_(std::move(o.status_)) {
      o.inflight_ = nullptr;
    }
    CallGuard(const CallGuard&) = delete;
    ~CallGuard() {
      if (inflight_ && inflight_->fetch_sub(1) == 1) inflight_->notify_all();
    }
    bool ok() const { return inflight_ != nullptr; }
    const Status& status() const { return status_; }

   private:
    friend class Model;
    std::atomic<int>* inflight_;
    Status status_;
  };
  CallGuard enter();
  bool draining() const { return draining_.load(); }
  // For generating backends: adds to the token counters of stats().
  void count_tokens(uint64_t prompt, uint64_t generated);
  void count_failure() { failures_.fetch_add(1, std::memory_order_relaxed); }

 private:
  // enter() and drain() use sequentially consistent operations on both atomics: a call either sees
  // draining_ and backs out, or drain() sees its inflight_ increment and waits for it (no
  // store-load reordering can let both miss each other).
  std::atomic<int> inflight_{0};
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> failures_{0};
  std::atomic<uint64_t> prompt_tokens_{0};
  std::atomic<uint64_t> generated_tokens_{0};
};

}  // namespace gantry::backend
