#include "gantry/backend/model.h"

#include <chrono>
#include <thread>

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
  inflight_.fetch_add(1, std::memory_order_acquire);
  if (draining_.load(std::memory_order_acquire)) {
    inflight_.fetch_sub(1, std::memory_order_release);
    CallGuard g(nullptr);
    g.status_ =
        Unavailable("model '" + metadata().name + "' is draining; call reset() to accept requests again");
    return g;
  }
  return CallGuard(&inflight_);
}

Status Model::drain() {
  draining_.store(true, std::memory_order_release);
  while (inflight_.load(std::memory_order_acquire) != 0)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  return Status::Ok();
}

Status Model::reset() {
  draining_.store(false, std::memory_order_release);
  return Status::Ok();
}

}  // namespace gantry::backend
