#include "kernels/cpu_kernel.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <utility>

#include "gantry/core/file_io.h"
#include "kernels/cache.h"

extern char** environ;

namespace gantry::kernels::internal {

const char* const kCpuPrelude = R"(/* Gantry CPU kernel convention (docs/kernels.md) */
#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif
#define GANTRY_KERNEL_CPU 1
typedef struct gantry_dim3 {
  uint32_t x, y, z;
} gantry_dim3;
typedef struct gantry_kernel_ctx {
  gantry_dim3 grid_dim;  /* blocks in the grid (CUDA gridDim) */
  gantry_dim3 block_dim; /* threads in a block (blockDim) */
  gantry_dim3 block_idx; /* this block (blockIdx) */
  void* shared;          /* this block's dynamic local memory, 64-byte aligned, not zeroed */
  uint64_t shared_bytes; /* its size: launch's shared_bytes + local-memory arguments */
} gantry_kernel_ctx;
static inline int gantry_next_thread_(gantry_dim3* t, const gantry_dim3* d) {
  if (++t->x < d->x) return 1;
  t->x = 0;
  if (++t->y < d->y) return 1;
  t->y = 0;
  ++t->z;
  return t->z < d->z;
}
/* Runs the statement once per thread of the block, x fastest: t is the thread (CUDA threadIdx). */
#define GANTRY_FOR_EACH_THREAD(ctx, t) \
  for (gantry_dim3 t = {0, 0, 0}; t.z < (ctx)->block_dim.z; gantry_next_thread_(&t, &(ctx)->block_dim))
)";

namespace {

namespace fs = std::filesystem;

std::string c_scalar(ScalarType s) {
  switch (s) {
    case ScalarType::kBool:
      return "bool";
    case ScalarType::kI8:
      return "int8_t";
    case ScalarType::kU8:
      return "uint8_t";
    case ScalarType::kI16:
      return "int16_t";
    case ScalarType::kU16:
      return "uint16_t";
    case ScalarType::kI32:
      return "int32_t";
    case ScalarType::kI64:
      return "int64_t";
    case ScalarType::kU32:
      return "uint32_t";
    case ScalarType::kU64:
      return "uint64_t";
    case ScalarType::kF32:
      return "float";
    case ScalarType::kF64:
      return "double";
  }
  return "int";
}

// The exported function that unpacks args[] into the entry's parameters. C++: conversion templates take
// the exact parameter types (whatever their spelling); C: void* converts to any object pointer.
std::string trampoline(const KernelSignature& sig, bool cxx) {
  std::string s = "\n#line 1 \"<gantry trampoline>\"\n";
  if (cxx)
    s += "namespace {\nstruct gantry_ptr_arg_ { void* p; template <class T> operator T*() const { return "
         "static_cast<T*>(p); } };\n}\nextern \"C\" ";
  s += "__attribute__((visibility(\"default\"))) void gantry_launch_" + sig.entry +
       "(const gantry_kernel_ctx* ctx, void** args) {\n  " + sig.entry + "(ctx";
  for (size_t i = 0; i < sig.params.size(); ++i) {
    const auto& p = sig.params[i];
    const std::string slot = "args[" + std::to_string(i) + "]";
    if (p.is_pointer)
      s += cxx ? ", gantry_ptr_arg_{*(void**)" + slot + "}" : ", *(void**)" + slot;
    else
      s += ", *(const " + c_scalar(p.scalar) + "*)" + slot;
  }
  return s + ");\n}\n";
}

// Runs argv with stdout and stderr into `output`; returns the exit status (-1 when it did not exit).
Result<int> run_process(const std::vector<std::string>& argv, const fs::path& log_file, std::string& output) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return Unavailable("cannot start " + argv[0] + ": " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  auto text = read_file(log_file, uint64_t{16} << 20);
  output = text.ok() ? *text : "";
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A fresh directory under `parent` for one compile, removed with everything in it.
struct ScratchDir {
  explicit ScratchDir(fs::path p) : path(std::move(p)) {}
  ScratchDir(ScratchDir&& o) noexcept : path(std::exchange(o.path, {})) {}
  ScratchDir& operator=(ScratchDir&&) = delete;
  fs::path path;
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

Result<ScratchDir> make_scratch(const fs::path& parent) {
  std::random_device rd;
  ScratchDir d{parent / ("build-" + std::to_string(::getpid()) + "-" + std::to_string(rd()))};
  std::error_code ec;
  fs::create_directories(d.path, ec);
  if (ec) {
    const std::string why = "cannot create " + d.path.string() + ": " + ec.message();
    d.path.clear();
    return IoError(why + " (set GANTRY_KERNEL_CACHE to a writable directory)");
  }
  return d;
}

// "c++ (Debian 12.2.0-14) 12.2.0": the first line of `compiler --version`, run once per compiler and
// process (a cache hit must not pay for a process start).
std::string compiler_identity(const fs::path& compiler, const fs::path& cache_dir) {
  static std::mutex mu;
  static std::map<std::string, std::string> seen;  // a cache of immutable facts, not shared state
  std::lock_guard lock(mu);
  auto it = seen.find(compiler.string());
  if (it != seen.end()) return it->second;
  std::string out;
  auto scratch = make_scratch(cache_dir);
  Result<int> rc = scratch.ok()
                       ? run_process({compiler.string(), "--version"}, scratch->path / "version.txt", out)
                       : Result<int>(scratch.status());
  std::string line = out.substr(0, out.find('\n'));
  if (!rc.ok() || *rc != 0 || line.empty()) line = compiler.string() + " (unknown version)";
  seen.emplace(compiler.string(), line);
  return line;
}

}  // namespace

fs::path find_in_path(std::string_view name) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const auto colon = rest.find(':');
    const std::string dir(rest.substr(0, colon));
    if (!dir.empty()) {
      fs::path candidate = fs::path(dir) / name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return {};
}

Result<CpuBinary> compile_cpu(std::string_view source, const KernelSignature& signature,
                              const std::string& source_name, const std::vector<std::string>& flags,
                              const fs::path& cache_dir, bool use_cache) {
  const bool c = source_name.size() > 2 && source_name.ends_with(".c");
  const char* driver = c ? "cc" : "c++";
  const fs::path compiler = find_in_path(driver);
  if (compiler.empty())
    return Unavailable(std::string("CPU kernels are unavailable: no ") + (c ? "C" : "C++") + " compiler ('" +
                       driver + "') on PATH; install gcc/g++ or clang");
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec)
    return IoError("cannot create the kernel cache directory " + cache_dir.string() + ": " + ec.message() +
                   " (set GANTRY_KERNEL_CACHE to a writable directory)");
  CpuBinary out;
  out.compiler = compiler_identity(compiler, cache_dir);
  std::vector<std::string> argv = {compiler.string(), c ? "-std=c11" : "-std=c++17", "-O2", "-fPIC",
                                   "-shared"};
  for (const auto& f : flags) argv.push_back(f);
  std::string key = "cpu\ncompiler=" + compiler.string() + "\nversion=" + out.compiler + "\nargv=";
  for (const auto& a : argv) key += a + "\x1f";
  key += "\nentry=" + signature.entry + "\nsignature=" + signature.to_string() + "\nname=" + source_name +
         "\nsource=";
  key += source;

  const KernelCache cache(cache_dir);
  out.so_path = cache.path_for(key, ".so");
  if (use_cache) {
    // The .meta entry holds the log and the shared object's checksum: an .so that does not match (a
    // torn write, a bit flip, a hash collision) is rebuilt, never dlopen'ed.
    if (auto meta = cache.read(key, ".so.gk")) {
      auto so = read_file(out.so_path, uint64_t{1} << 30);
      if (so.ok() && meta->payload == std::to_string(fnv1a64(*so)) + ":" + std::to_string(so->size())) {
        out.log = meta->log;
        out.cache_hit = true;
        out.size = so->size();
        return out;
      }
    }
  }

  const auto t0 = std::chrono::steady_clock::now();
  GANTRY_ASSIGN_OR_RETURN(ScratchDir scratch, make_scratch(cache_dir));
  std::string base = fs::path(source_name).filename().string();
  if (base.empty()) base = c ? "kernel.c" : "kernel.cpp";
  const fs::path src = scratch.path / safe_file_name(base);
  const fs::path so = scratch.path / "kernel.so";
  std::string text = kCpuPrelude;
  std::string quoted;
  for (char ch : source_name) {
    if (ch == '"' || ch == '\\') quoted += '\\';
    quoted += ch;
  }
  text += "#line 1 \"" + quoted + "\"\n";
  text += source;
  text += trampoline(signature, !c);
  GANTRY_RETURN_IF_ERROR(write_file(src, text));
  argv.push_back("-o");
  argv.push_back(so.string());
  argv.push_back(src.string());
  if (c) argv.push_back("-lm");
  std::string log;
  GANTRY_ASSIGN_OR_RETURN(int rc, run_process(argv, scratch.path / "log.txt", log));
  while (!log.empty() && log.back() == '\n') log.pop_back();
  if (rc != 0)
    return InvalidArgument("compiling " + source_name + " (entry " + signature.entry + ") with " +
                           out.compiler + " failed (exit " + std::to_string(rc) + "):\n" + log);
  auto bytes = read_file(so, uint64_t{1} << 30);
  if (!bytes.ok()) return bytes.status().with_context("the compiler wrote no shared object");
  out.size = bytes->size();
  out.log = log;
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!use_cache) {
    // Uncached: a private copy that no other load shares.
    out.so_path = scratch.path.parent_path() / ("uncached-" + scratch.path.filename().string() + ".so");
  }
  fs::rename(so, out.so_path, ec);
  if (ec) return IoError("cannot move the compiled kernel to " + out.so_path.string() + ": " + ec.message());
  if (use_cache)
    (void)cache.write(key, ".so.gk",
                      {out.log, std::to_string(fnv1a64(*bytes)) + ":" + std::to_string(out.size)});
  return out;
}

BlockRunner::BlockRunner(unsigned threads) {
  for (unsigned i = 1; i < std::max(1u, threads); ++i) workers_.emplace_back([this, i] { work(i); });
}

BlockRunner::~BlockRunner() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void BlockRunner::run(uint64_t blocks, const std::function<void(unsigned, uint64_t)>& fn) {
  if (blocks == 0) return;
  if (blocks == 1 || workers_.empty()) {
    for (uint64_t b = 0; b < blocks; ++b) fn(0, b);
    return;
  }
  {
    std::lock_guard lock(mu_);
    job_ = &fn;
    blocks_ = blocks;
    next_.store(0);
    busy_ = static_cast<unsigned>(workers_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  for (uint64_t b; (b = next_.fetch_add(1)) < blocks;) fn(0, b);
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [&] { return busy_ == 0; });
  job_ = nullptr;
}

void BlockRunner::work(unsigned worker) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(unsigned, uint64_t)>* job = nullptr;
    uint64_t blocks = 0;
    {
      std::unique_lock lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      blocks = blocks_;
    }
    for (uint64_t b; (b = next_.fetch_add(1)) < blocks;) (*job)(worker, b);
    {
      std::lock_guard lock(mu_);
      --busy_;
    }
    done_cv_.notify_one();
  }
}

}  // namespace gantry::kernels::internal
