#include "backend/onnx/pool_allocator.h"

#include <new>

namespace gantry::onnx {

namespace {
thread_local std::string t_last_failure;
}

PoolAllocator::PoolAllocator(memory::BlockPool* pool, Ort::MemoryInfo info)
    : PoolAllocator(pool, static_cast<const OrtMemoryInfo*>(info)) {
  owned_info_ = std::move(info);
}

PoolAllocator::PoolAllocator(memory::BlockPool* pool, const OrtMemoryInfo* info) : pool_(pool), info_(info) {
  static_assert(std::is_standard_layout_v<PoolAllocator>);
  base_.version = ORT_API_VERSION;
  base_.Alloc = &PoolAllocator::alloc;
  base_.Free = &PoolAllocator::free;
  base_.Info = &PoolAllocator::info_of;
  base_.Reserve = &PoolAllocator::reserve;
  base_.GetStats = &PoolAllocator::stats;
  base_.AllocOnStream = nullptr;  // Alloc is used
  base_.Shrink = nullptr;
}

const std::string& PoolAllocator::last_failure() { return t_last_failure; }
void PoolAllocator::clear_last_failure() { t_last_failure.clear(); }

void* PoolAllocator::alloc(OrtAllocator* self, size_t size) {
  auto* a = reinterpret_cast<PoolAllocator*>(self);
  if (size == 0) return nullptr;  // as ORT's own CPU allocator
  auto r = a->pool_->allocate(size);
  if (!r.ok()) {
    t_last_failure = r.status().message();
    throw std::bad_alloc();
  }
  return *r;
}

void* PoolAllocator::reserve(OrtAllocator* self, size_t size) { return alloc(self, size); }

void PoolAllocator::free(OrtAllocator* self, void* p) {
  // A bad pointer is counted and logged by the pool; nothing else can be done from here.
  (void)reinterpret_cast<PoolAllocator*>(self)->pool_->free(p);
}

const OrtMemoryInfo* PoolAllocator::info_of(const OrtAllocator* self) {
  return reinterpret_cast<const PoolAllocator*>(self)->info_;
}

OrtStatus* PoolAllocator::stats(const OrtAllocator* self, OrtKeyValuePairs** out) noexcept {
  const auto* a = reinterpret_cast<const PoolAllocator*>(self);
  const memory::PoolStats s = a->pool_->stats();
  const OrtApi& api = Ort::GetApi();
  api.CreateKeyValuePairs(out);
  auto add = [&](const char* k, uint64_t v) { api.AddKeyValuePair(*out, k, std::to_string(v).c_str()); };
  const uint64_t cap = a->pool_->options().capacity;
  api.AddKeyValuePair(*out, "Limit", cap ? std::to_string(cap).c_str() : "-1");
  add("InUse", s.bytes_in_use);
  add("TotalAllocated", s.bytes_reserved);
  add("MaxInUse", s.peak_in_use);
  add("NumAllocs", s.total_allocations);
  add("NumReserves", s.blocks_mapped);
  add("NumArenaExtensions", s.blocks_mapped);
  add("NumArenaShrinkages", s.blocks_unmapped);
  add("NumFailed", s.failed);
  add("NumBadFrees", s.bad_frees);
  return nullptr;
}

}  // namespace gantry::onnx
