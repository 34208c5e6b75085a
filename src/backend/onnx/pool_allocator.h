// PoolAllocator: an OrtAllocator over a memory::BlockPool, so that ONNX Runtime sessions draw their
// memory (initializers through Reserve, activations and outputs through Alloc) from Gantry's pool and
// every byte is attributed to the model whose memory::OwnerScope is open on the allocating thread.
//
// ORT crashes when Alloc returns nullptr for a non-zero size, so a refused allocation (pool full,
// budget refused) throws std::bad_alloc, which ORT turns into an error status of the call (session
// creation or Run); the refusal's own message is kept per thread (last_failure()) so the caller can
// report the numbers.
//
// Private to the backend (it implements ONNX Runtime's C allocator interface).
// Registration (OrtRuntime::use_pool) is process-wide; sessions opt in with the session config entry
// "session.use_env_allocators" = "1". The adapter must outlive every session created while it was
// registered, and the pool must outlive the adapter's use.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <string>

#include "gantry/memory/block_pool.h"

namespace gantry::onnx {

class PoolAllocator {
 public:
  // `info` describes the memory the pool hands out (CPU, or the EP device's DEFAULT memory).
  PoolAllocator(memory::BlockPool* pool, Ort::MemoryInfo info);
  // `info` borrowed: it must outlive the adapter (an EP device's memory info lives with the plugin).
  PoolAllocator(memory::BlockPool* pool, const OrtMemoryInfo* info);
  PoolAllocator(const PoolAllocator&) = delete;
  PoolAllocator& operator=(const PoolAllocator&) = delete;

  OrtAllocator* ort() { return &base_; }
  memory::BlockPool* pool() const { return pool_; }
  const OrtMemoryInfo* info() const { return info_; }

  // The message of the last allocation this thread had refused by any PoolAllocator ("" when none),
  // and clearing it.
  static const std::string& last_failure();
  static void clear_last_failure();

 private:
  static void* alloc(OrtAllocator* self, size_t size);
  static void free(OrtAllocator* self, void* p);
  static const OrtMemoryInfo* info_of(const OrtAllocator* self);
  static void* reserve(OrtAllocator* self, size_t size);
  static OrtStatus* stats(const OrtAllocator* self, OrtKeyValuePairs** out) noexcept;

  OrtAllocator base_{};  // first member: ORT's callbacks get &base_ and cast back
  memory::BlockPool* pool_;
  Ort::MemoryInfo owned_info_{nullptr};
  const OrtMemoryInfo* info_ = nullptr;
};

// The session config entry that makes a session use the env's registered allocators.
inline constexpr const char* kUseEnvAllocators = "session.use_env_allocators";

}  // namespace gantry::onnx
