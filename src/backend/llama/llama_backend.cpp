#include "gantry/backend/llama/llama_backend.h"

#include <fmt/format.h>
#include <llama.h>

#include <filesystem>
#include <optional>

#include "backend/llama/chat_layer.h"
#include "gantry/backend/llama/llama_info.h"
#include "gantry/backend/llama/measure.h"
#include "gantry/backend/llama/speed.h"
#include "gantry/core/file_io.h"
#include "gantry/memory/budget.h"
#include "gantry/memory/owner_scope.h"
#include "gantry/model/package.h"

namespace gantry::llama {

using backend::GenerationRequest;
using backend::GenerationResult;

namespace {

bool has_gpu(std::string_view prefix) {
  for (const auto& d : ggml_devices()) {
    if (d.type == "gpu" && (prefix.empty() || d.name.rfind(prefix, 0) == 0)) return true;
  }
  return false;
}

}  // namespace

LlamaBackend::LlamaBackend(memory::BlockPool* cpu_pool, memory::Budget* cpu_budget)
    : cpu_pool_(cpu_pool), cpu_budget_(cpu_budget) {
  caps_.dtypes = {DType::kString, DType::kInt32};
  caps_.families = {std::string(hw::kFamilyCpu)};
  if (has_gpu("CUDA")) caps_.families.push_back(std::string(hw::kFamilyCuda));
  // Strategies tensor-parallel (row split) and pipeline (layer split) over the CUDA devices.
  caps_.model_parallel = has_gpu("CUDA");
  caps_.dynamic_shapes = true;
  caps_.streams = true;
  caps_.text_generation = true;
  caps_.formats = {"gguf"};
}

std::string LlamaBackend::version() const { return llama_version(); }

backend::Support LlamaBackend::supports(const hw::Device& device) const {
  if (device.family == hw::kFamilyCpu) return backend::Support::yes("llama.cpp CPU backend built in");
  if (device.family == hw::kFamilyCuda) {
    return has_gpu("CUDA")
               ? backend::Support::yes("ggml CUDA backend loaded")
               : backend::Support::no("this llama.cpp build has no CUDA backend (CPU-only build)");
  }
  return backend::Support::no("llama.cpp in this build runs on the CPU and NVIDIA GPUs only");
}

backend::Support LlamaBackend::provider_available(std::string_view provider) const {
  if (provider == "cpu") return backend::Support::yes("CPU backend built in");
  if (provider == "cuda") {
    return has_gpu("CUDA") ? backend::Support::yes("ggml CUDA backend loaded")
                           : backend::Support::no(
                                 "no ggml CUDA device: llama.cpp was built for the CPU only, or no driver");
  }
  return backend::Support::no("llama.cpp knows providers cpu and cuda, not '" + std::string(provider) + "'");
}

std::string_view LlamaBackend::provider_family(std::string_view provider) const {
  return provider == "cuda" ? hw::kFamilyCuda : hw::kFamilyCpu;
}

Result<std::unique_ptr<backend::Model>> LlamaBackend::load(const model::Package& package,
                                                           const backend::Placement& placement) {
  GANTRY_ASSIGN_OR_RETURN(auto m, load_file(package.model_path().string(), placement));
  m->meta_.name = placement.model_name.empty() ? package.manifest().name : placement.model_name;
  return std::unique_ptr<backend::Model>(std::move(m));
}

Result<std::unique_ptr<LlamaModel>> LlamaBackend::load_file(const std::string& path,
                                                            const backend::Placement& p) {
  auto pa = provider_available(p.provider);
  if (!pa.ok) return Unavailable(pa.reason);
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  GANTRY_ASSIGN_OR_RETURN(m->settings_, llama_settings(p, path));
  m->settings_.load.cpu_pool = cpu_pool_;
  const std::string owner_name =
      p.model_name.empty() ? std::filesystem::path(path).stem().string() : p.model_name;
  // The host prompt cache: charged to this model in the CPU budget; by default an eighth of it.
  auto& eng = m->settings_.engine;
  eng.budget = cpu_budget_;
  eng.budget_owner = owner_name;
  eng.cache_ram_bytes = m->settings_.cache_ram_bytes.value_or(
      cpu_budget_ ? std::min<uint64_t>(cpu_budget_->capacity() / 8, uint64_t{8} << 30) : 0);
  const LlamaSettings& s = m->settings_;
  SpeculativeOptions speculative = s.speculative;
  {
    // Pool allocations are charged to this model.
    memory::OwnerScope owner(owner_name);
    GANTRY_ASSIGN_OR_RETURN(m->weights_, LlamaWeights::load(path, s.load));
    if (!s.draft_path.empty()) {
      LoadOptions dl = s.draft_load;
      dl.cpu_pool = cpu_pool_;
      auto draft = LlamaWeights::load(s.draft_path, dl);
      if (!draft.ok()) return draft.status().with_context("loading the draft model (draft_model)");
      speculative.draft = std::move(*draft);
    }
  }
  GANTRY_ASSIGN_OR_RETURN(m->engine_, BatchEngine::create(m->weights_, s.context, s.engine, speculative));
  {
    std::string source, label;
    if (!s.chat_template_file.empty()) {
      auto text = read_file(s.chat_template_file, uint64_t{1} << 20);
      if (!text.ok()) return text.status().with_context("reading the chat template (chat_template_file)");
      source = std::move(*text);
      label = "file " + s.chat_template_file;
    }
    GANTRY_ASSIGN_OR_RETURN(
        m->chat_, LlamaChatLayer::create(m->weights_, source, label, s.reasoning_format, s.thinking));
  }
  auto& ti = m->text_info_;
  ti.context_length = static_cast<int64_t>(m->engine_->context().n_ctx_seq());
  ti.sequences = static_cast<int>(s.context.n_seq_max);
  ti.trained_context = m->weights_->n_ctx_train();
  const Pooling pooling = s.pooling != Pooling::kModel ? s.pooling : model_pooling(*m->weights_);
  ti.pooling = std::string(pooling_name(pooling));
  ti.embeds = pooling != Pooling::kNone && pooling != Pooling::kRank;
  ti.generates = pooling != Pooling::kRank;  // a reranker's head replaces its LM head
  ti.chat = m->chat_->info();
  auto& meta = m->meta_;
  meta.name = m->weights_->description();
  meta.backend = "llama.cpp";
  meta.format = "gguf";
  meta.platform = "llama.cpp_gguf";
  meta.provider = p.provider;
  meta.inputs = {{"prompt", DType::kString, Shape({1}), {""}}};
  meta.outputs = {{"text", DType::kString, Shape({1}), {""}},
                  {"tokens", DType::kInt32, Shape({Shape::kDynamic}), {"n_tokens"}}};
  meta.batchable = false;
  meta.max_batch = s.context.n_seq_max;
  const uint64_t host_cache = s.engine.cache_prompt ? s.engine.cache_ram_bytes : 0;
  meta.properties = {{"architecture", m->weights_->architecture()},
                     {"description", m->weights_->description()},
                     {"size_bytes", std::to_string(m->weights_->size_bytes())},
                     {"n_params", std::to_string(m->weights_->n_params())},
                     {"n_ctx", std::to_string(m->engine_->context().n_ctx())},
                     {"parallel", std::to_string(s.context.n_seq_max)},
                     {"n_gpu_layers", std::to_string(s.load.placement.n_gpu_layers)},
                     {"kv_type", std::string(kv_type_name(s.context.type_k))},
                     {"kv_unified", s.context.kv_unified ? "true" : "false"},
                     {"cache_ram_bytes", std::to_string(host_cache)},
                     {"placement", s.reason},
                     {"chat_template", m->chat_->info().source},
                     {"chat_format", m->chat_->info().format}};
  if (speculative.draft) meta.properties["draft_model"] = speculative.draft->path();
  if (!speculative.types.empty())
    meta.properties["spec_type"] = fmt::format("{}", fmt::join(speculative.types, ","));
  return m;
}

Result<backend::MemoryEstimate> LlamaBackend::estimate_memory(const model::Package& package,
                                                              const backend::Placement& placement) {
  return estimate_file(package.model_path().string(), placement);
}

Result<backend::MemoryEstimate> LlamaBackend::estimate_file(const std::string& path,
                                                            const backend::Placement& p) {
  GANTRY_ASSIGN_OR_RETURN(LlamaSettings s, llama_settings(p, path));
  GANTRY_ASSIGN_OR_RETURN(MemoryMeasurement m, dry_run_memory(path, s));
  backend::MemoryEstimate e;
  for (const auto& d : m.devices) e.bytes[d.device] = d.total_bytes;
  e.exact = true;
  e.basis = fmt::format(
      "llama.cpp dry run (no_alloc) at n_ctx {}, {} sequence(s), n_batch {}, KV {}, {} GPU layer(s): "
      "weights {} + KV {} + compute {} + output {} bytes",
      m.n_ctx, s.context.n_seq_max, s.context.n_batch, kv_type_name(s.context.type_k),
      s.load.placement.n_gpu_layers, m.model_bytes, m.kv_bytes, m.compute_bytes, m.output_bytes);
  // Speculative decoding: the draft model and its context of the target's size, and the target's
  // output buffer grown to a logits row for every drafted token a step verifies.
  int n_draft = 0;  // most tokens one sequence's draft has
  if (!s.draft_path.empty()) {
    LlamaSettings ds = s;
    ds.load = s.draft_load;
    ds.context = s.speculative.draft_context;
    auto dm = dry_run_memory(s.draft_path, ds);
    if (!dm.ok()) return dm.status().with_context("estimating the draft model (draft_model)");
    for (const auto& d : dm->devices) e.bytes[d.device] += d.total_bytes;
    e.basis +=
        fmt::format("; draft model {} at {} GPU layer(s): weights {} + KV {} + compute {} + output {} bytes",
                    s.draft_path, s.draft_load.placement.n_gpu_layers, dm->model_bytes, dm->kv_bytes,
                    dm->compute_bytes, dm->output_bytes);
    n_draft = s.speculative.draft_max;
  }
  for (const auto& t : s.speculative.types) {
    if (t.rfind("ngram-", 0) == 0)
      n_draft = std::max({n_draft, s.speculative.ngram_size_m, 64});  // ngram-mod: 64
  }
  if (n_draft > 0) {
    const auto n_seq = static_cast<uint64_t>(std::max(1u, s.context.n_seq_max));
    const uint64_t n_vocab = m.output_bytes / sizeof(float) / n_seq;
    const uint64_t rows = std::min<uint64_t>(s.context.n_batch, n_seq * static_cast<uint64_t>(1 + n_draft));
    const uint64_t extra = rows > n_seq ? (rows - n_seq) * n_vocab * sizeof(float) : 0;
    e.bytes["cpu"] += extra;
    e.basis +=
        fmt::format("; target logits for {} drafted rows {} bytes", rows - std::min(rows, n_seq), extra);
  }
  return e;
}

// One engine sequence as a backend::Generation. Holds the model's call guard until the result has
// been taken (wait) or the generation is dropped, so drain() waits for it.
class LlamaModel::Run final : public backend::Generation {
 public:
  Run(LlamaModel* model, CallGuard guard, SequenceHandle handle) : model_(model), handle_(std::move(handle)) {
    guard_.emplace(std::move(guard));
  }
  ~Run() override {
    if (!finished_) {
      handle_.cancel();
      if (handle_.ready()) model_->account(handle_.get());
    }
  }
  uint64_t id() const override { return handle_.id(); }
  void cancel() override { handle_.cancel(); }
  bool done() const override { return finished_ || handle_.ready(); }
  Result<GenerationResult> wait() override {
    if (finished_)
      return FailedPrecondition("generation " + std::to_string(id()) + " was already waited for");
    auto r = model_->engine_->wait(handle_);
    finished_ = true;
    model_->account(r);
    guard_.reset();  // the call has ended
    return r;
  }

 private:
  LlamaModel* model_;
  std::optional<CallGuard> guard_;
  SequenceHandle handle_;
  bool finished_ = false;
};

LlamaModel::~LlamaModel() = default;

Status LlamaModel::init() {
  engine_->start();
  return Status::Ok();
}

void LlamaModel::account(const Result<GenerationResult>& r) {
  if (r.ok()) {
    count_tokens(static_cast<uint64_t>(r->n_prompt_tokens),
                 static_cast<uint64_t>(backend::completion_tokens(*r)));
  } else {
    count_failure();
  }
}

Result<GenerationRequest> LlamaModel::request_from(std::span<const backend::NamedTensor> inputs) const {
  GenerationRequest r;
  r.sampling.temperature = 0;
  r.max_tokens = settings_.max_tokens;
  bool any = false;
  for (const auto& in : inputs) {
    if (in.name == "prompt") {
      if (in.tensor.dtype() != DType::kString || in.tensor.strings().size() != 1) {
        return InvalidArgument("input 'prompt' must be a string tensor holding one string");
      }
      r.prompt = in.tensor.strings()[0];
      any = true;
    } else if (in.name == "tokens") {
      if (in.tensor.dtype() != DType::kInt32) return InvalidArgument("input 'tokens' must be int32");
      auto v = in.tensor.values<int32_t>();
      r.tokens.assign(v.begin(), v.end());
      any = true;
    } else {
      return InvalidArgument("unknown input '" + in.name +
                             "' (a llama.cpp model takes 'prompt' or 'tokens')");
    }
  }
  if (!any) return InvalidArgument("missing input: give 'prompt' (string) or 'tokens' (int32)");
  return r;
}

Result<std::vector<backend::NamedTensor>> LlamaModel::outputs_from(const GenerationResult& r) {
  GANTRY_ASSIGN_OR_RETURN(Tensor text, Tensor::from_strings(Shape({1}), {r.text}));
  GANTRY_ASSIGN_OR_RETURN(
      Tensor toks,
      Tensor::from_values<int32_t>(DType::kInt32, Shape({static_cast<int64_t>(r.tokens.size())}), r.tokens));
  std::vector<backend::NamedTensor> out;
  out.push_back({"text", std::move(text)});
  out.push_back({"tokens", std::move(toks)});
  return out;
}

Result<std::vector<backend::NamedTensor>> LlamaModel::infer_one(
    std::span<const backend::NamedTensor> inputs) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  auto req = request_from(inputs);
  if (!req.ok()) {
    count_failure();
    return req.status();
  }
  auto res = engine_->generate(std::move(*req));
  account(res);
  if (!res.ok()) return res.status();
  return outputs_from(*res);
}

Result<std::vector<std::vector<backend::NamedTensor>>> LlamaModel::infer_batch(
    std::span<const std::vector<backend::NamedTensor>> requests) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  auto fail = [this](const Status& st) {
    count_failure();
    return st;
  };
  std::vector<SequenceHandle> handles;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto req = request_from(requests[i]);
    if (!req.ok()) {
      for (auto& h : handles) h.cancel();
      return fail(req.status().with_context("request " + std::to_string(i) + " of the batch"));
    }
    auto h = engine_->submit(std::move(*req));
    if (!h.ok()) {
      for (auto& hh : handles) hh.cancel();
      return fail(h.status().with_context("request " + std::to_string(i) + " of the batch"));
    }
    handles.push_back(*h);
  }
  std::vector<std::vector<backend::NamedTensor>> out;
  Status first_error;
  for (size_t i = 0; i < handles.size(); ++i) {
    auto r = engine_->wait(handles[i]);
    if (r.ok())
      count_tokens(static_cast<uint64_t>(r->n_prompt_tokens),
                   static_cast<uint64_t>(backend::completion_tokens(*r)));
    if (!first_error.ok()) continue;  // wait for the rest so none outlives the call
    if (!r.ok()) {
      first_error = r.status().with_context("request " + std::to_string(i) + " of the batch");
      for (size_t k = i + 1; k < handles.size(); ++k) handles[k].cancel();
      continue;
    }
    auto o = outputs_from(*r);
    if (!o.ok()) {
      first_error = o.status();
      continue;
    }
    out.push_back(std::move(*o));
  }
  if (!first_error.ok()) return fail(first_error);
  return out;
}

Status LlamaModel::reset() {
  engine_->cancel_all();
  engine_->clear_cache();
  GANTRY_RETURN_IF_ERROR(Model::reset());
  return Status::Ok();
}

backend::ModelStats LlamaModel::stats() const {
  backend::ModelStats s = Model::stats();
  if (engine_) {
    const EngineStats e = engine_->stats();
    s.cache_bytes = e.host_cache_bytes;
    s.loop_work = e.pending + e.active;
    s.loop_steps = e.steps;
    auto figure = [&s](std::string name, std::string help, double value, bool counter = false) {
      s.figures.push_back({std::move(name), std::move(help), value, counter});
    };
    if (e.kv_cells > 0) {
      const auto used = static_cast<double>(std::min<uint64_t>(e.kv_cells_reserved, e.kv_cells));
      const auto cells = static_cast<double>(e.kv_cells);
      figure("kv_cache_used_cells",
             "KV cache cells held by running requests (prompt and max_tokens each), per model", used);
      figure("kv_cache_cells", "KV cache cells per model", cells);
      figure("kv_cache_usage_ratio", "KV cache cells held by running requests / cells, per model (0..1)",
             used / cells);
    }
    // Speculative decoding: cumulative engine counters (a model loaded again starts from 0, which
    // Prometheus reads as a counter reset).
    if (engine_->speculative()) {
      figure("draft_tokens_total", "Tokens drafted for speculative decoding and verified by the model",
             static_cast<double>(e.draft_tokens), true);
      figure("draft_tokens_accepted_total",
             "Drafted tokens the model accepted (its own choice at that position)",
             static_cast<double>(e.draft_accepted), true);
    }
    figure(
        "prompt_cache_bytes",
        "Host memory a text model's host prompt cache holds (charged to the model in the cpu budget, given "
        "back first under memory pressure)",
        static_cast<double>(e.host_cache_bytes));
    figure("prompt_tokens_pending",
           "Prompt tokens of running requests not yet evaluated (a prefill in progress)",
           static_cast<double>(e.prompt_tokens_pending));
  }
  return s;
}

Result<std::unique_ptr<backend::Generation>> LlamaModel::start_generation(GenerationRequest request) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  auto h = engine_->submit(std::move(request));
  if (!h.ok()) {
    count_failure();
    return h.status();
  }
  return std::unique_ptr<backend::Generation>(new Run(this, std::move(guard), std::move(*h)));
}

Result<backend::ChatPrompt> LlamaModel::apply_chat(const backend::ChatRequest& request) const {
  // Formatting touches no engine state, so it is not counted as a call; it is refused while draining
  // like every other call.
  if (draining()) {
    return Unavailable("model '" + meta_.name + "' is draining; call reset() to accept requests again");
  }
  // A conversation whose text alone cannot fit the context is refused before the template renders
  // (and the tokenizer reads) megabytes of it.
  if (engine_) {
    size_t bytes = 0;
    for (const auto& m : request.messages) bytes += m.content.size();
    GANTRY_RETURN_IF_ERROR(check_text_fits(*weights_, bytes, engine_->context().n_ctx_seq()));
  }
  return chat_->apply(request);
}

Result<std::unique_ptr<backend::ChatOutputParser>> LlamaModel::chat_parser(
    const backend::ChatPrompt& prompt) const {
  return chat_->parser(prompt);
}

Result<int> LlamaModel::token_count(std::string_view text) const {
  // A text no context of this model could hold is refused before it is tokenized (48 MiB took 85 s).
  const size_t n_ctx =
      engine_ ? engine_->context().n_ctx_seq() : static_cast<size_t>(std::max(1, weights_->n_ctx_train()));
  GANTRY_RETURN_IF_ERROR(check_text_fits(*weights_, text.size(), n_ctx));
  GANTRY_ASSIGN_OR_RETURN(auto tokens, weights_->tokenize(text, /*add_special=*/true));
  return static_cast<int>(tokens.size());
}

Result<std::vector<int32_t>> LlamaModel::tokenize(std::string_view text, bool add_special,
                                                  bool parse_special) const {
  const size_t n_ctx =
      engine_ ? engine_->context().n_ctx_seq() : static_cast<size_t>(std::max(1, weights_->n_ctx_train()));
  GANTRY_RETURN_IF_ERROR(check_text_fits(*weights_, text.size(), n_ctx));
  return weights_->tokenize(text, add_special, parse_special);
}

Result<std::string> LlamaModel::token_piece(int32_t token) const {
  if (!weights_->token_valid(token))
    return InvalidArgument("token " + std::to_string(token) + " is not in the vocabulary (0.." +
                           std::to_string(weights_->n_vocab() - 1) + ")");
  return weights_->token_to_piece(token);
}

Result<std::string> LlamaModel::detokenize(std::span<const int32_t> tokens) const {
  for (int32_t t : tokens)
    if (!weights_->token_valid(t)) return token_piece(t).status();
  return weights_->detokenize(tokens);
}

std::optional<backend::TextModel::FimTokens> LlamaModel::fim_tokens() const {
  const llama_vocab* v = llama_model_get_vocab(weights_->raw());
  FimTokens f{llama_vocab_fim_pre(v), llama_vocab_fim_suf(v), llama_vocab_fim_mid(v)};
  if (f.prefix == LLAMA_TOKEN_NULL || f.suffix == LLAMA_TOKEN_NULL || f.middle == LLAMA_TOKEN_NULL)
    return std::nullopt;
  return f;
}

Result<LlamaEmbedder*> LlamaModel::embedder() {
  if (!embedder_) {
    ContextOptions o = settings_.context;
    o.kv_unified = true;
    o.pooling = settings_.pooling;
    auto e = LlamaEmbedder::create(weights_, o);
    if (!e.ok()) return e.status().with_context("creating the embedding context for '" + meta_.name + "'");
    embedder_ = std::move(*e);
  }
  return embedder_.get();
}

Result<std::vector<std::vector<float>>> LlamaModel::embed(std::span<const std::string> texts, bool normalize,
                                                          const backend::CancelCheck& cancelled) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  if (!text_info_.embeds) {
    const bool reranker = text_info_.pooling == "rank";
    return Unsupported(
        "model '" + meta_.name + "' gives no embeddings: its pooling is " + text_info_.pooling +
        (reranker ? " (a reranker: it scores documents against a query)" : " (no vector per text)"));
  }
  if (texts.size() > backend::kMaxEmbedInputs) {
    return InvalidArgument("at most " + std::to_string(backend::kMaxEmbedInputs) +
                           " texts to embed in one request, got " + std::to_string(texts.size()));
  }
  std::lock_guard lock(embed_mu_);
  auto e = embedder();
  if (!e.ok()) {
    count_failure();
    return e.status();
  }
  auto r = (*e)->embed(texts, normalize, cancelled);
  if (!r.ok()) count_failure();
  return r;
}

Result<backend::RerankResult> LlamaModel::rerank(std::string_view query,
                                                 std::span<const std::string> documents,
                                                 const backend::CancelCheck& cancelled) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  if (text_info_.pooling != "rank") {
    return Unsupported("model '" + meta_.name + "' is not a reranking model: its pooling is " +
                       text_info_.pooling);
  }
  if (documents.empty()) return backend::RerankResult{};
  if (documents.size() > backend::kMaxRerankDocuments) {
    return InvalidArgument("at most " + std::to_string(backend::kMaxRerankDocuments) +
                           " documents to rank in one request, got " + std::to_string(documents.size()));
  }
  std::lock_guard lock(embed_mu_);
  auto e = embedder();
  if (!e.ok()) {
    count_failure();
    return e.status();
  }
  auto r = (*e)->rerank(query, documents, cancelled);
  if (!r.ok()) {
    count_failure();
    return r.status();
  }
  count_tokens(static_cast<uint64_t>(r->prompt_tokens), 0);
  return backend::RerankResult{std::move(r->scores), r->prompt_tokens};
}

Result<std::vector<backend::ThroughputResult>> LlamaModel::measure_throughput(
    const backend::ThroughputOptions& options) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  SpeedOptions so;
  static_cast<backend::ThroughputOptions&>(so) = options;
  so.kv_type = settings_.context.type_k;
  so.flash_attn = settings_.context.flash_attn;
  return measure_speed(weights_, so);
}

Result<backend::ChatTemplateInfo> inspect_chat_template(const std::string& gguf_path,
                                                        const std::string& chat_template_file) {
  LoadOptions o;
  o.vocab_only = true;
  o.use_mmap = false;
  GANTRY_ASSIGN_OR_RETURN(std::shared_ptr<LlamaWeights> weights, LlamaWeights::load(gguf_path, o));
  std::string source, label;
  if (!chat_template_file.empty()) {
    GANTRY_ASSIGN_OR_RETURN(source, read_file(chat_template_file, uint64_t{1} << 20));
    label = "file " + chat_template_file;
  }
  GANTRY_ASSIGN_OR_RETURN(
      auto layer, LlamaChatLayer::create(std::move(weights), source, label, backend::ReasoningFormat::kAuto));
  return layer->info();
}

std::unique_ptr<backend::Backend> make_llama_backend(memory::BlockPool* cpu_pool,
                                                     memory::Budget* cpu_budget) {
  return std::make_unique<LlamaBackend>(cpu_pool, cpu_budget);
}

}  // namespace gantry::llama
