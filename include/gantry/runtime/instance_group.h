// InstanceGroup: several copies (instances) of one model behind the Model contract, as Triton's instance
// groups: `runtime.peak_concurrency` (or `--instances N`) copies on one device so N requests run at once,
// and the strategies round-robin / data-parallel: one copy per device.
//
// - Each call goes to the least busy instance: the fewest calls in flight; among those the fewest calls so
//   far (so a lone client alternates), then the lowest index. A dynamic batch (infer_batch) is one call.
// - Each instance is a whole model (its own sessions, weights and memory); the Runtime reserved each one's
//   memory before loading it. The group owns them and destroys them with itself.
// - metadata() is instance 0's with `instances` set to the group's size. drain() drains every instance;
//   reset() resets them.
// - Observable: per instance its device, calls and calls in flight, and the most instances that were
//   running a call at the same moment (peak_concurrent): what tests read instead of timing.
// Text-generating models are not grouped (llama.cpp runs concurrent requests as parallel sequences of one
// context); the Runtime refuses that combination before loading.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gantry/backend/model.h"

namespace gantry::runtime {

struct InstanceStats {
  std::string device;  // "cpu", "cuda:1"
  uint64_t calls = 0;
  int in_flight = 0;
};

class InstanceGroup final : public backend::Model {
 public:
  struct Instance {
    std::unique_ptr<backend::Model> model;
    std::string device;
  };
  // `instances` not empty; every model non-null.
  explicit InstanceGroup(std::vector<Instance> instances);
  ~InstanceGroup() override;

  const backend::ModelMetadata& metadata() const override { return meta_; }
  Status init() override;
  Result<std::vector<backend::NamedTensor>> infer_one(std::span<const backend::NamedTensor> inputs) override;
  Result<std::vector<backend::NamedTensor>> infer_cancellable(std::span<const backend::NamedTensor> inputs,
                                                              const backend::CancelCheck& cancelled) override;
  Result<std::vector<std::vector<backend::NamedTensor>>> infer_batch(
      std::span<const std::vector<backend::NamedTensor>> requests) override;
  Status drain() override;
  Status reset() override;
  backend::ModelStats stats() const override;

  size_t size() const { return slots_.size(); }
  backend::Model& instance(size_t i) { return *slots_[i]->model; }
  std::vector<InstanceStats> instance_stats() const;
  int peak_concurrent() const { return peak_.load(); }

 private:
  struct Slot {
    std::unique_ptr<backend::Model> model;
    std::string device;
    int in_flight = 0;  // guarded by mu_
    uint64_t calls = 0;
  };
  // Takes the least busy slot (counted in flight) and releases it on destruction.
  class Lease;
  Lease lease();

  backend::ModelMetadata meta_;
  std::vector<std::unique_ptr<Slot>> slots_;
  mutable std::mutex mu_;
  int busy_ = 0;  // slots with a call in flight, guarded by mu_
  std::atomic<int> peak_{0};
};

}  // namespace gantry::runtime
