#include "gantry/backend/model.h"

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
  if (!t) return Unsupported("model '" + metadata().name + "' (" + metadata().backend + ") has no chat template");
  ChatRequest request;
  request.messages.assign(messages.begin(), messages.end());
  request.add_assistant_turn = add_assistant_turn;
  GANTRY_ASSIGN_OR_RETURN(ChatPrompt prompt, t->apply_chat(request));
  return std::move(prompt.prompt);
}

Result<int> Model::token_count(std::string_view) const {
  return Unsupported("model '" + metadata().name + "' (" + metadata().backend + ") has no tokenizer");
}

Result<std::vector<std::vector<float>>> Model::embed(std::span<const std::string>, bool) {
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
