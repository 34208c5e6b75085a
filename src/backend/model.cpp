#include "gantry/backend/model.h"

#include <algorithm>
#include <map>

namespace gantry::backend {

int ModelMetadata::input_index(std::string_view name) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].name == name) return static_cast<int>(i);
  return -1;
}

int ModelMetadata::output_index(std::string_view name) const {
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].name == name) return static_cast<int>(i);
  return -1;
}

namespace {

std::string bytes_text(uint64_t b) {
  if (b >= (1ull << 20)) return std::to_string(b >> 20) + " MiB (" + std::to_string(b) + " bytes)";
  return std::to_string(b) + " bytes";
}

}  // namespace

Status check_admission(const ModelMetadata& md, std::span<const NamedTensor> inputs) {
  uint64_t in_bytes = 0;
  for (const auto& in : inputs) {
    const MemoryClass m = in.tensor.memory_class();
    const bool host_model = md.preferred_memory != MemoryClass::kDevice;
    if ((host_model && m == MemoryClass::kDevice) || (!host_model && m != MemoryClass::kDevice))
      return Unsupported("model '" + md.name + "' input '" + in.name + "' is in " +
                         std::string(memory_class_name(m)) + " memory; the " + md.provider + " model takes " +
                         (host_model ? "host (or pinned) tensors" : "device tensors") +
                         ": copy it there first");
    in_bytes += in.tensor.byte_size();
  }
  if (md.max_input_bytes > 0 && in_bytes > md.max_input_bytes)
    return ResourceExhausted("model '" + md.name + "': the request's inputs are " + bytes_text(in_bytes) +
                             ", more than the " + bytes_text(md.max_input_bytes) +
                             " the model accepts at its largest shapes (max_input_bytes)");
  if (md.max_output_bytes == 0) return Status::Ok();
  // The outputs' sizes: static dims as declared, named dynamic dims from the inputs.
  std::map<std::string, int64_t> named;
  for (const auto& in : inputs) {
    const int i = md.input_index(in.name);
    if (i < 0) continue;
    const TensorInfo& info = md.inputs[static_cast<size_t>(i)];
    const Shape& s = in.tensor.shape();
    for (size_t d = 0; d < info.dim_names.size() && d < s.rank(); ++d)
      if (!info.dim_names[d].empty()) named.emplace(info.dim_names[d], s[d]);
  }
  uint64_t out_bytes = 0;
  for (const auto& out : md.outputs) {
    if (out.dtype == DType::kString) return Status::Ok();  // no fixed size: not predictable
    uint64_t n = dtype_size(out.dtype);
    for (size_t d = 0; d < out.shape.rank(); ++d) {
      int64_t v = out.shape[d];
      if (v == Shape::kDynamic) {
        auto it = d < out.dim_names.size() ? named.find(out.dim_names[d]) : named.end();
        if (it == named.end()) return Status::Ok();  // not predictable from the inputs
        v = it->second;
      }
      n *= static_cast<uint64_t>(std::max<int64_t>(v, 0));
    }
    out_bytes += n;
  }
  if (out_bytes > md.max_output_bytes)
    return ResourceExhausted("model '" + md.name + "': the request's outputs would be " +
                             bytes_text(out_bytes) + ", more than the " + bytes_text(md.max_output_bytes) +
                             " the model returns at its largest shapes (max_output_bytes)");
  return Status::Ok();
}

Result<std::vector<NamedTensor>> Model::infer_cancellable(std::span<const NamedTensor> inputs,
                                                          const CancelCheck& cancelled) {
  if (cancelled && cancelled())
    return Cancelled("model '" + metadata().name + "': the request was cancelled before it ran");
  return infer_one(inputs);
}

Result<std::vector<std::vector<NamedTensor>>> Model::infer_batch(
    std::span<const std::vector<NamedTensor>> requests) {
  std::vector<std::vector<NamedTensor>> out;
  out.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto r = infer_one(requests[i]);
    if (!r.ok()) return r.status().with_context("request " + std::to_string(i) + " of the batch");
    out.push_back(std::move(r).value());
  }
  return out;
}

Model::CallGuard Model::enter() {
  inflight_.fetch_add(1);
  if (draining_.load()) {
    if (inflight_.fetch_sub(1) == 1) inflight_.notify_all();
    CallGuard g(nullptr);
    g.status_ =
        Unavailable("model '" + metadata().name + "' is draining; call reset() to accept requests again");
    return g;
  }
  calls_.fetch_add(1, std::memory_order_relaxed);
  return CallGuard(&inflight_);
}

Status Model::drain() {
  draining_.store(true);
  for (int n = inflight_.load(); n != 0; n = inflight_.load()) inflight_.wait(n);
  return Status::Ok();
}

Status Model::reset() {
  draining_.store(false);
  return Status::Ok();
}

Result<std::unique_ptr<Generation>> Model::start_generation(GenerationRequest) {
  return Unsupported("model '" + metadata().name + "' (" + metadata().backend + ") does not generate text");
}

Result<GenerationResult> Model::generate(GenerationRequest request) {
  GANTRY_ASSIGN_OR_RETURN(auto g, start_generation(std::move(request)));
  return g->wait();
}

Result<std::string> Model::format_chat(std::span<const ChatMessage> messages, bool add_assistant_turn) const {
  const TextModel* t = text();
  if (!t)
    return Unsupported("model '" + metadata().name + "' (" + metadata().backend + ") has no chat template");
  ChatRequest request;
  request.messages.assign(messages.begin(), messages.end());
  request.add_assistant_turn = add_assistant_turn;
  GANTRY_ASSIGN_OR_RETURN(ChatPrompt prompt, t->apply_chat(request));
  return std::move(prompt.prompt);
}

Result<int> Model::token_count(std::string_view) const {
  return Unsupported("model '" + metadata().name + "' (" + metadata().backend + ") has no tokenizer");
}

Result<std::vector<std::vector<float>>> Model::embed(std::span<const std::string>, bool, const CancelCheck&) {
  return Unsupported("model '" + metadata().name + "' (" + metadata().backend + ") does not embed text");
}

Result<std::vector<ThroughputResult>> Model::measure_throughput(const ThroughputOptions&) {
  return Unsupported("model '" + metadata().name + "' (" + metadata().backend +
                     ") has no throughput benchmark");
}

ModelStats Model::stats() const {
  ModelStats s;
  s.calls = calls_.load(std::memory_order_relaxed);
  s.failures = failures_.load(std::memory_order_relaxed);
  s.in_flight = inflight_.load();
  s.prompt_tokens = prompt_tokens_.load(std::memory_order_relaxed);
  s.generated_tokens = generated_tokens_.load(std::memory_order_relaxed);
  return s;
}

void Model::count_tokens(uint64_t prompt, uint64_t generated) {
  prompt_tokens_.fetch_add(prompt, std::memory_order_relaxed);
  generated_tokens_.fetch_add(generated, std::memory_order_relaxed);
}

}  // namespace gantry::backend
