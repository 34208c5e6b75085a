#include "gantry/hw/loader.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>

namespace gantry::hw {
namespace {

class DlLibrary final : public DynamicLibrary {
 public:
  explicit DlLibrary(void* handle) : handle_(handle) {}
  void* symbol(const char* name) const override { return ::dlsym(handle_, name); }

 private:
  void* handle_;  // intentionally never dlclose()d (see loader.h)
};

class DlLoader final : public LibraryLoader {
 public:
  Result<std::unique_ptr<DynamicLibrary>> open(std::string_view soname) const override {
    const std::string name(soname);
    {
      // A library that was absent once is absent for this loader: detect() asks twice (whether to give a
      // probe a thread, then the probe itself), and each failed search costs dozens of file lookups.
      std::lock_guard lock(mu_);
      auto it = absent_.find(name);
      if (it != absent_.end()) return it->second;
    }
    void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      Status s = Unavailable(name + " is not loadable: " + (why != nullptr ? why : "unknown reason"));
      std::lock_guard lock(mu_);
      absent_.emplace(name, s);
      return s;
    }
    return std::unique_ptr<DynamicLibrary>(std::make_unique<DlLibrary>(handle));
  }

 private:
  mutable std::mutex mu_;
  mutable std::map<std::string, Status> absent_;
};

class NullLoader final : public LibraryLoader {
 public:
  Result<std::unique_ptr<DynamicLibrary>> open(std::string_view soname) const override {
    return Unavailable(std::string(soname) + " is not loaded when probing a sysroot");
  }
};

}  // namespace

std::unique_ptr<LibraryLoader> make_dl_loader() { return std::make_unique<DlLoader>(); }
std::unique_ptr<LibraryLoader> make_null_loader() { return std::make_unique<NullLoader>(); }

}  // namespace gantry::hw
