#include "gantry/runtime/instance_group.h"

namespace gantry::runtime {

class InstanceGroup::Lease {
 public:
  Lease(InstanceGroup* g, Slot* s) : group_(g), slot_(s) {}
  Lease(Lease&& o) noexcept : group_(o.group_), slot_(o.slot_) { o.slot_ = nullptr; }
  Lease(const Lease&) = delete;
  ~Lease() {
    if (!slot_) return;
    std::lock_guard lock(group_->mu_);
    if (--slot_->in_flight == 0) --group_->busy_;
  }
  backend::Model& model() const { return *slot_->model; }

 private:
  InstanceGroup* group_;
  Slot* slot_;
};

InstanceGroup::InstanceGroup(std::vector<Instance> instances) {
  for (auto& i : instances) {
    auto slot = std::make_unique<Slot>();
    slot->model = std::move(i.model);
    slot->device = std::move(i.device);
    slots_.push_back(std::move(slot));
  }
  meta_ = slots_.front()->model->metadata();
  meta_.instances = static_cast<int>(slots_.size());
}

InstanceGroup::~InstanceGroup() = default;

InstanceGroup::Lease InstanceGroup::lease() {
  std::lock_guard lock(mu_);
  Slot* best = nullptr;
  for (const auto& s : slots_) {
    if (!best || s->in_flight < best->in_flight ||
        (s->in_flight == best->in_flight && s->calls < best->calls))
      best = s.get();
  }
  if (best->in_flight++ == 0) {
    ++busy_;
    int peak = peak_.load();
    while (busy_ > peak && !peak_.compare_exchange_weak(peak, busy_)) {
    }
  }
  ++best->calls;
  return Lease(this, best);
}

Status InstanceGroup::init() {
  for (auto& s : slots_) GANTRY_RETURN_IF_ERROR(s->model->init());
  return Status::Ok();
}

Result<std::vector<backend::NamedTensor>> InstanceGroup::infer_one(
    std::span<const backend::NamedTensor> inputs) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  Lease l = lease();
  auto out = l.model().infer_one(inputs);
  if (!out.ok()) count_failure();
  return out;
}

Result<std::vector<backend::NamedTensor>> InstanceGroup::infer_cancellable(
    std::span<const backend::NamedTensor> inputs, const backend::CancelCheck& cancelled) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  Lease l = lease();
  auto out = l.model().infer_cancellable(inputs, cancelled);
  if (!out.ok()) count_failure();
  return out;
}

Result<std::vector<std::vector<backend::NamedTensor>>> InstanceGroup::infer_batch(
    std::span<const std::vector<backend::NamedTensor>> requests) {
  auto guard = enter();
  if (!guard.ok()) return guard.status();
  Lease l = lease();
  auto out = l.model().infer_batch(requests);
  if (!out.ok()) count_failure();
  return out;
}

Status InstanceGroup::drain() {
  GANTRY_RETURN_IF_ERROR(Model::drain());
  for (auto& s : slots_) GANTRY_RETURN_IF_ERROR(s->model->drain());
  return Status::Ok();
}

Status InstanceGroup::reset() {
  for (auto& s : slots_) GANTRY_RETURN_IF_ERROR(s->model->reset());
  return Model::reset();
}

backend::ModelStats InstanceGroup::stats() const { return Model::stats(); }

std::vector<InstanceStats> InstanceGroup::instance_stats() const {
  std::lock_guard lock(mu_);
  std::vector<InstanceStats> out;
  for (const auto& s : slots_) out.push_back({s->device, s->calls, s->in_flight});
  return out;
}

}  // namespace gantry::runtime
