// LlamaBackend / LlamaModel: llama.cpp (GGUF) behind Gantry's Backend/Model interface.
//
// Placement: intra_op_threads -> threads; provider "cuda" offloads every layer unless options say
// otherwise; options (all optional): n_ctx, parallel (sequences), n_batch, n_gpu_layers,
// tensor_split ("3,1"), kv_type (f16|q8_0|q4_0|...), flash_attn (auto|on|off), max_tokens.
// Through infer_one a model takes "prompt" (string, [1]) or "tokens" (int32, [n]) and returns "text"
// (string, [1]) and "tokens" (int32, [n]) — greedy, max_tokens from the options (default 128).
// infer_batch runs its requests as parallel sequences of one context. The full generation API
// (sampling, stop strings, streaming, cancellation) is LlamaModel::submit/generate.
#pragma once

#include <memory>

#include "gantry/backend/backend.h"
#include "gantry/backend/llama/batch_engine.h"

namespace gantry::llama {

class LlamaModel final : public backend::Model {
 public:
  const backend::ModelMetadata& metadata() const override { return meta_; }
  Status init() override;  // starts the decode loop (idempotent)
  Result<std::vector<backend::NamedTensor>> infer_one(std::span<const backend::NamedTensor> inputs) override;
  Result<std::vector<std::vector<backend::NamedTensor>>> infer_batch(
      std::span<const std::vector<backend::NamedTensor>> requests) override;
  Status reset() override;  // cancels every sequence, clears the KV cache

  Result<SequenceHandle> submit(GenerationRequest request);
  Result<GenerationResult> generate(GenerationRequest request);
  BatchEngine& engine() { return *engine_; }
  const LlamaWeights& weights() const { return *weights_; }

 private:
  friend class LlamaBackend;
  LlamaModel() = default;
  Result<GenerationRequest> request_from(std::span<const backend::NamedTensor> inputs) const;
  static Result<std::vector<backend::NamedTensor>> outputs_from(const GenerationResult& r);

  backend::ModelMetadata meta_;
  std::shared_ptr<LlamaWeights> weights_;
  std::unique_ptr<BatchEngine> engine_;
  int default_max_tokens_ = 128;
};

class LlamaBackend final : public backend::Backend {
 public:
  LlamaBackend();
  std::string_view name() const override { return "llama.cpp"; }
  std::string version() const override;
  const backend::Capabilities& capabilities() const override { return caps_; }
  backend::Support supports(const backend::DeviceInfo& device) const override;
  std::vector<std::string> providers() const override { return {"cpu", "cuda"}; }
  backend::Support provider_available(std::string_view provider) const override;
  backend::DeviceKind provider_device_kind(std::string_view provider) const override;
  Result<std::unique_ptr<backend::Model>> load(const model::Package& package,
                                               const backend::Placement& placement) override;

  // The same, straight from a .gguf path (no package).
  Result<std::unique_ptr<LlamaModel>> load_file(const std::string& path, const backend::Placement& placement);

 private:
  backend::Capabilities caps_;
};

std::unique_ptr<backend::Backend> make_llama_backend();

}  // namespace gantry::llama
