#include "gantry/backend/llama/weights.h"

#include <fmt/format.h>
#include <llama.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "backend/llama/log_bridge.h"
#include "backend/llama/pool_buffer.h"
#include "backend/llama/runtime_init.h"
#include "gantry/backend/generation.h"
#include "gantry/core/log.h"
#include "gantry/model/gguf.h"
#include "gantry/model/gguf_hparams.h"

namespace gantry::llama {

Result<GgufSummary> check_gguf_file(const std::string& path) {
  // Our own parser (every count, offset and size bounds-checked) and hyperparameter validator, so that
  // llama.cpp, which asserts on what it does not expect, only ever sees a file that passed both.
  GANTRY_ASSIGN_OR_RETURN(model::GgufFile f, model::GgufFile::open(path));
  GANTRY_ASSIGN_OR_RETURN(model::GgufHyperparameters h, model::read_hyperparameters(f));
  GgufSummary s;
  s.version = f.version();
  s.architecture = h.architecture;
  s.n_tensors = static_cast<int64_t>(f.tensors().size());
  s.file_bytes = f.file_size();
  s.data_end = f.data_offset();
  using model::GgmlType;
  // ggml-cpu's repack.cpp: the types it may lay out anew for its own kernels (which ones depends on the CPU).
  constexpr GgmlType kRepackable[] = {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ2_K,   GgmlType::kQ4_K,
                                      GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kMXFP4};
  for (const auto& t : f.tensors()) {
    s.data_end = std::max(s.data_end, f.data_offset() + t.offset + t.size_bytes);
    s.repackable_types = s.repackable_types || std::find(std::begin(kRepackable), std::end(kRepackable),
                                                         t.type.type) != std::end(kRepackable);
  }
  return s;
}

Result<std::shared_ptr<LlamaWeights>> LlamaWeights::load(const std::string& path,
                                                         const LoadOptions& options) {
  GANTRY_ASSIGN_OR_RETURN(GgufSummary summary, check_gguf_file(path));
  ensure_llama_runtime();

  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = options.placement.n_gpu_layers;
  mp.main_gpu = options.placement.main_gpu;
  switch (options.placement.split_mode) {
    case LlamaPlacement::SplitMode::kNone:
      mp.split_mode = LLAMA_SPLIT_MODE_NONE;
      break;
    case LlamaPlacement::SplitMode::kLayer:
      mp.split_mode = LLAMA_SPLIT_MODE_LAYER;
      break;
    case LlamaPlacement::SplitMode::kRow:
      mp.split_mode = LLAMA_SPLIT_MODE_ROW;
      break;
  }
  std::vector<float> split;
  if (!options.placement.tensor_split.empty()) {
    if (options.placement.tensor_split.size() > llama_max_devices()) {
      return InvalidArgument("tensor_split has " + std::to_string(options.placement.tensor_split.size()) +
                             " entries; this llama.cpp build supports at most " +
                             std::to_string(llama_max_devices()) + " devices");
    }
    for (float f : options.placement.tensor_split) {
      if (!(f >= 0)) return InvalidArgument("tensor_split entries must be >= 0");
    }
    split.assign(llama_max_devices(), 0.0f);
    std::copy(options.placement.tensor_split.begin(), options.placement.tensor_split.end(), split.begin());
    mp.tensor_split = split.data();
  }
  // RPC servers: their devices, then the local GPUs, as the explicit device list.
  RemoteDevices remote;
  std::vector<ggml_backend_dev_t> devices;
  if (!options.placement.rpc_servers.empty()) {
    std::vector<hw::RpcEndpoint> servers;
    for (const auto& text : options.placement.rpc_servers) {
      GANTRY_ASSIGN_OR_RETURN(hw::RpcEndpoint e, hw::parse_rpc_endpoint(text));
      servers.push_back(std::move(e));
    }
    GANTRY_ASSIGN_OR_RETURN(remote, resolve_remote_devices(servers));
    devices = remote.devices;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
      ggml_backend_dev_t dev = ggml_backend_dev_get(i);
      if (ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_GPU) devices.push_back(dev);
    }
    if (devices.size() > llama_max_devices()) {
      return InvalidArgument(
          fmt::format("{} devices (RPC and local GPUs); this llama.cpp build takes at most {}",
                      devices.size(), llama_max_devices()));
    }
    devices.push_back(nullptr);
    mp.devices = devices.data();
  }
  // A dry run maps nothing (llama.cpp asserts that no_alloc loads do not mmap).
  mp.load_mode = options.use_mmap && !options.dry_run ? LLAMA_LOAD_MODE_MMAP : LLAMA_LOAD_MODE_NONE;
  mp.check_tensors = options.check_tensors && !options.dry_run;
  mp.no_alloc = options.dry_run;
  mp.vocab_only = options.vocab_only;

  // CPU weights from the runtime's pool where no slower (see LoadOptions::cpu_pool).
  const bool use_pool = options.cpu_pool && !options.dry_run && !options.use_mmap &&
                        options.placement.n_gpu_layers == 0 && !summary.repackable_types;
  const llama_model_tensor_buft_override pool_override[] = {
      {".*", use_pool ? pool_buffer_type(*options.cpu_pool) : nullptr}, {nullptr, nullptr}};
  if (use_pool) mp.tensor_buft_overrides = pool_override;
  if (options.cpu_pool && !options.dry_run)
    GANTRY_LOG_DEBUG("{}: CPU weights {}", path,
                     use_pool                   ? "from the memory pool"
                     : options.use_mmap         ? "mapped from the file (mmap)"
                     : summary.repackable_types ? "in llama.cpp's buffers (ggml may repack their types)"
                                                : "in llama.cpp's buffers (layers offloaded)");

  LogCapture capture(/*quiet=*/true);
  llama_model* model = llama_model_load_from_file(path.c_str(), mp);
  if (Status lost = remote.empty() ? Status::Ok() : remote.check(); !lost.ok()) {
    if (model) llama_model_free(model);  // nothing stays half-loaded on the other servers
    return lost.with_context("loading '" + path + "'");
  }
  if (!model) {
    const std::string why = capture.problems();
    if (why.find("unknown model architecture") != std::string::npos) {
      return Unsupported("'" + path + "': architecture '" + summary.architecture +
                         "' is not supported by this llama.cpp build (" + why + ")");
    }
    return Corrupt("llama.cpp could not load '" + path + "' (architecture '" + summary.architecture + "')" +
                   (why.empty() ? std::string() : ": " + why));
  }
  std::shared_ptr<LlamaWeights> w(new LlamaWeights());
  w->model_ = model;
  w->vocab_ = llama_model_get_vocab(model);
  // SentencePiece and byte-level BPE keep every byte of a text in some token.
  if (const enum llama_vocab_type vt = llama_vocab_type(w->vocab_);
      vt == LLAMA_VOCAB_TYPE_SPM || vt == LLAMA_VOCAB_TYPE_BPE) {
    for (int32_t t = 0; t < w->n_vocab(); ++t)
      w->max_token_bytes_ = std::max(w->max_token_bytes_, w->token_to_piece(t, true).size());
  }
  w->path_ = path;
  w->arch_ = summary.architecture;
  w->remote_ = std::move(remote);
  if (!llama_model_has_decoder(model)) {
    return Unsupported("'" + path + "': architecture '" + w->arch_ +
                       "' has no decoder; Gantry runs decoder models");
  }
  GANTRY_LOG_DEBUG("loaded {} ({}, {} layers, {} params)", path, w->description(), w->n_layer(),
                   w->n_params());
  return w;
}

LlamaWeights::~LlamaWeights() {
  if (model_) llama_model_free(model_);
}

std::string LlamaWeights::description() const {
  char buf[256];
  const int n = llama_model_desc(model_, buf, sizeof buf);
  return n > 0 ? std::string(buf) : arch_;
}

int32_t LlamaWeights::n_vocab() const { return llama_vocab_n_tokens(vocab_); }
int32_t LlamaWeights::n_ctx_train() const { return llama_model_n_ctx_train(model_); }
int32_t LlamaWeights::n_embd() const { return llama_model_n_embd(model_); }
int32_t LlamaWeights::n_layer() const { return llama_model_n_layer(model_); }
uint64_t LlamaWeights::size_bytes() const { return llama_model_size(model_); }
uint64_t LlamaWeights::n_params() const { return llama_model_n_params(model_); }

Result<std::vector<int32_t>> LlamaWeights::tokenize(std::string_view text, bool add_special,
                                                    bool parse_special) const {
  if (text.size() > static_cast<size_t>(INT32_MAX / 2)) return InvalidArgument("text too long to tokenize");
  std::vector<llama_token> out(text.size() + 8);
  int32_t n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), out.data(),
                             static_cast<int32_t>(out.size()), add_special, parse_special);
  if (n < 0) {
    if (n == INT32_MIN) return InvalidArgument("tokenization overflowed: the text is too long");
    out.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), out.data(),
                       static_cast<int32_t>(out.size()), add_special, parse_special);
    if (n < 0)
      return Internal("llama_tokenize failed twice for a text of " + std::to_string(text.size()) + " bytes");
  }
  out.resize(static_cast<size_t>(n));
  return std::vector<int32_t>(out.begin(), out.end());
}

std::string LlamaWeights::token_to_piece(int32_t token, bool render_special) const {
  if (!token_valid(token)) return {};
  char buf[256];
  int32_t n = llama_token_to_piece(vocab_, token, buf, sizeof buf, 0, render_special);
  if (n >= 0) return std::string(buf, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(-n), '\0');
  n = llama_token_to_piece(vocab_, token, big.data(), static_cast<int32_t>(big.size()), 0, render_special);
  if (n < 0) return {};
  big.resize(static_cast<size_t>(n));
  return big;
}

Result<std::string> LlamaWeights::detokenize(std::span<const int32_t> tokens, bool render_special) const {
  std::string out;
  for (int32_t t : tokens) {
    if (!token_valid(t)) {
      return InvalidArgument("token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                             std::to_string(n_vocab() - 1) + ")");
    }
    out += token_to_piece(t, render_special);
  }
  return out;
}

bool LlamaWeights::is_eog(int32_t token) const { return llama_vocab_is_eog(vocab_, token); }

Status check_text_fits(const LlamaWeights& w, size_t text_bytes, size_t n_tokens) {
  const size_t per_token = w.max_token_bytes();
  if (per_token == 0 || text_bytes / per_token <= n_tokens) return Status::Ok();
  return backend::context_length_exceeded(
      "the text has " + std::to_string(text_bytes) + " bytes, more than the " + std::to_string(n_tokens) +
      " tokens the context holds can stand for (no token of this model is longer than " +
      std::to_string(per_token) + " bytes); use a larger --ctx or a shorter text");
}

}  // namespace gantry::llama
