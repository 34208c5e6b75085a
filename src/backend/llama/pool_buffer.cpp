#include "backend/llama/pool_buffer.h"

// ggml's backend interface structs live in its internal header (pinned llama.cpp source, see setup.sh).
#include <ggml-backend-impl.h>

#include <map>
#include <memory>
#include <mutex>

#include "gantry/core/log.h"

namespace gantry::llama {
namespace {

memory::BlockPool& pool_of(ggml_backend_buffer_type_t buft) {
  return *static_cast<memory::BlockPool*>(buft->context);
}

const char* pool_name(ggml_backend_buffer_type_t) { return "CPU_GANTRY_POOL"; }

size_t pool_alignment(ggml_backend_buffer_type_t) {
  return ggml_backend_buft_get_alignment(ggml_backend_cpu_buffer_type());
}

bool pool_is_host(ggml_backend_buffer_type_t) { return true; }

void pool_free_buffer(ggml_backend_buffer_t buffer) {
  if (Status s = pool_of(buffer->buft).free(buffer->context); !s.ok())
    GANTRY_LOG_WARN("llama.cpp weights: {}", s.message());
}

// ggml's CPU buffer functions (get_base reads the pointer from `context`, the copies are memcpy), taken from
// a buffer over a dummy pointer, with a free that returns the memory to the pool.
ggml_backend_buffer_i pool_buffer_iface() {
  static const ggml_backend_buffer_i iface = [] {
    alignas(64) static char probe[64];
    ggml_backend_buffer_t b = ggml_backend_cpu_buffer_from_ptr(probe, sizeof probe);
    ggml_backend_buffer_i i = b->iface;
    ggml_backend_buffer_free(b);
    i.free_buffer = pool_free_buffer;
    return i;
  }();
  return iface;
}

ggml_backend_buffer_t pool_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
  auto p = pool_of(buft).allocate(size, pool_alignment(buft));
  if (!p.ok()) {
    // llama.cpp reports the failed buffer with its size; the pool's reason goes to the log.
    GANTRY_LOG_WARN("llama.cpp weights: {}", p.status().message());
    return nullptr;
  }
  return ggml_backend_buffer_init(buft, pool_buffer_iface(), *p, size);
}

}  // namespace

ggml_backend_buffer_type_t pool_buffer_type(memory::BlockPool& pool) {
  // The registry of buffer types, one per pool: ggml holds buffer types by pointer for as long as any
  // buffer of theirs lives, so they are never freed (a few bytes per pool a process ever makes).
  static std::mutex mu;
  static std::map<memory::BlockPool*, std::unique_ptr<ggml_backend_buffer_type>> types;
  std::lock_guard lock(mu);
  auto& t = types[&pool];
  if (!t) {
    t = std::make_unique<ggml_backend_buffer_type>();
    t->iface = ggml_backend_buffer_type_i{
        /*.get_name =*/pool_name,
        /*.alloc_buffer =*/pool_alloc_buffer,
        /*.get_alignment =*/pool_alignment,
        /*.get_max_size =*/nullptr,
        /*.get_alloc_size =*/nullptr,
        /*.is_host =*/pool_is_host,
    };
    t->device = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    t->context = &pool;
  }
  return t.get();
}

}  // namespace gantry::llama
