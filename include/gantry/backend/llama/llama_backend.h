// LlamaBackend / LlamaModel: llama.cpp (GGUF) behind Gantry's Backend/Model interface.
//
// Placement: the keys and defaults of gantry/backend/llama/settings.h (n_ctx, parallel, n_batch,
// n_ubatch, n_gpu_layers, tensor_split, kv_type, flash_attn, max_tokens); unknown keys are refused.
// Provider cpu keeps every layer on the CPU; provider cuda offloads as many layers as the planner says
// fit in the GPUs' free memory unless n_gpu_layers says otherwise (metadata().properties["placement"]
// gives the reason).
//
// Through infer_one a model takes "prompt" (string, [1]) or "tokens" (int32, [n]) and returns "text"
// (string, [1]) and "tokens" (int32, [n]): greedy, max_tokens from the placement. infer_batch runs its
// requests as parallel sequences of one context. The full generation API (sampling, stop strings,
// streaming, cancellation) and embeddings are Model's generic ones: start_generation, generate, embed;
// stats() counts prompt and generated tokens, the host prompt cache's bytes and the prefill backlog. The text
// facet (text()) is llama.cpp's own chat layer (common/chat.h): the GGUF's Jinja template or a
// chat_template_file, tool calls in the model family's format, constrained by its grammar and parsed back.
#pragma once

#include <memory>
#include <mutex>

#include "gantry/backend/backend.h"
#include "gantry/backend/llama/batch_engine.h"
#include "gantry/backend/llama/embedder.h"
#include "gantry/backend/llama/settings.h"

namespace gantry::llama {

class LlamaChatLayer;

class LlamaModel final : public backend::Model, public backend::TextModel {
 public:
  ~LlamaModel() override;
  const backend::ModelMetadata& metadata() const override { return meta_; }
  Status init() override;  // starts the decode loop (idempotent)
  Result<std::vector<backend::NamedTensor>> infer_one(std::span<const backend::NamedTensor> inputs) override;
  Result<std::vector<std::vector<backend::NamedTensor>>> infer_batch(
      std::span<const std::vector<backend::NamedTensor>> requests) override;
  Status reset() override;  // cancels every sequence, clears the KV cache
  // Model's counters, and from the engine: KV cache use, the host prompt cache's bytes, the prefill
  // backlog and the speculative decoding counters.
  backend::ModelStats stats() const override;

  // The returned Generation must not outlive this model. It counts as an in-flight call (drain()
  // waits for it) until it has been waited for or destroyed.
  Result<std::unique_ptr<backend::Generation>> start_generation(backend::GenerationRequest request) override;
  backend::TextModel* text() override { return this; }
  const backend::TextModelInfo& text_info() const override { return text_info_; }
  // The chat layer's rendering; Unavailable while draining.
  Result<backend::ChatPrompt> apply_chat(const backend::ChatRequest& request) const override;
  Result<std::unique_ptr<backend::ChatOutputParser>> chat_parser(
      const backend::ChatPrompt& prompt) const override;
  Result<int> token_count(std::string_view text) const override;
  Result<std::vector<int32_t>> tokenize(std::string_view text, bool add_special,
                                        bool parse_special) const override;
  Result<std::string> token_piece(int32_t token) const override;
  Result<std::string> detokenize(std::span<const int32_t> tokens) const override;
  std::optional<FimTokens> fim_tokens() const override;
  // Pooled (the model's pooling, else mean) embeddings from a second context over the same weights,
  // created on first use with the generation context's size; one call at a time. Unsupported for
  // a model whose pooling is none or rank.
  Result<std::vector<std::vector<float>>> embed(std::span<const std::string> texts, bool normalize = true,
                                                const backend::CancelCheck& cancelled = {}) override;
  // Scores from that same second context, which a reranker's pooling (rank) makes a classifier context.
  Result<backend::RerankResult> rerank(std::string_view query, std::span<const std::string> documents,
                                       const backend::CancelCheck& cancelled = {}) override;

  // llama-bench's pp/tg measurement on this model's weights, with its KV type and flash attention
  // (contexts of the benchmark's own size, next to the model's).
  Result<std::vector<backend::ThroughputResult>> measure_throughput(
      const backend::ThroughputOptions& options) override;

  // Unavailable once an RPC server holding some of its layers was lost.
  Status health() const override { return weights_ ? weights_->remote_health() : Status::Ok(); }

  BatchEngine& engine() { return *engine_; }
  const LlamaWeights& weights() const { return *weights_; }
  const LlamaSettings& settings() const { return settings_; }

 private:
  friend class LlamaBackend;
  class Run;  // the backend::Generation over one engine sequence
  LlamaModel() = default;
  Result<backend::GenerationRequest> request_from(std::span<const backend::NamedTensor> inputs) const;
  static Result<std::vector<backend::NamedTensor>> outputs_from(const backend::GenerationResult& r);
  // Counts a finished generation in stats() (tokens or a failure).
  void account(const Result<backend::GenerationResult>& r);
  // The embedding/ranking context (embed_mu_ held), created on first use.
  Result<LlamaEmbedder*> embedder();

  backend::ModelMetadata meta_;
  LlamaSettings settings_;
  std::shared_ptr<LlamaWeights> weights_;
  std::unique_ptr<BatchEngine> engine_;
  std::unique_ptr<LlamaChatLayer> chat_;
  backend::TextModelInfo text_info_;
  std::mutex embed_mu_;  // guards embedder_ (created lazily; one embedding call at a time)
  std::unique_ptr<LlamaEmbedder> embedder_;
};

class LlamaBackend final : public backend::Backend {
 public:
  // `cpu_pool` (optional, must outlive every model): where CPU weights come from when that is no slower
  // (see llama::LoadOptions::cpu_pool); allocations are charged to the placement's model_name.
  // `cpu_budget` (optional, must outlive every model): where a model's host prompt cache is charged
  // (to the placement's model_name) and taken back from under pressure; its default size (cache_ram
  // unset) is an eighth of this budget, at most 8 GiB (llama-server's default); without a budget the
  // host prompt cache is off unless cache_ram is given.
  explicit LlamaBackend(memory::BlockPool* cpu_pool = nullptr, memory::Budget* cpu_budget = nullptr);
  std::string_view name() const override { return "llama.cpp"; }
  std::string version() const override;
  const backend::Capabilities& capabilities() const override { return caps_; }
  backend::Support supports(const hw::Device& device) const override;
  std::vector<std::string> providers() const override { return {"cuda", "cpu"}; }
  backend::Support provider_available(std::string_view provider) const override;
  std::string_view provider_family(std::string_view provider) const override;
  Result<std::unique_ptr<backend::Model>> load(const model::Package& package,
                                               const backend::Placement& placement) override;

  // Exact bytes per device from llama.cpp's own dry run (no_alloc) with the settings load() would use:
  // weights, KV cache, compute and output buffers. With mmap (as load() does) the CPU's weights are the
  // mapped file range rather than allocated memory; they are counted all the same. Not included: the
  // embedding context LlamaModel::embed() creates on first use (a second KV cache and compute buffer).
  Result<backend::MemoryEstimate> estimate_memory(const model::Package& package,
                                                  const backend::Placement& placement) override;

  // The same, straight from a .gguf path (no package).
  Result<std::unique_ptr<LlamaModel>> load_file(const std::string& path, const backend::Placement& placement);
  Result<backend::MemoryEstimate> estimate_file(const std::string& path, const backend::Placement& placement);

 private:
  backend::Capabilities caps_;
  memory::BlockPool* cpu_pool_ = nullptr;
  memory::Budget* cpu_budget_ = nullptr;
};

std::unique_ptr<backend::Backend> make_llama_backend(memory::BlockPool* cpu_pool = nullptr,
                                                     memory::Budget* cpu_budget = nullptr);

// What the chat template of `gguf_path` (or `chat_template_file` when given) offers through llama.cpp's chat
// layer: the format a chat with tools renders to, tool and thinking support. Reads the vocabulary only.
Result<backend::ChatTemplateInfo> inspect_chat_template(const std::string& gguf_path,
                                                        const std::string& chat_template_file = "");

}  // namespace gantry::llama
