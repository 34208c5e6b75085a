// Test doubles for hw probes: a Machine over a fixture tree with injectable failures, and a loader
// whose libraries are tables of test functions.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "gantry/hw/detect.h"
#include "gantry/hw/loader.h"
#include "gantry/hw/machine.h"

namespace gantry::hw::testing {

inline std::string fixture(const std::string& name) {
  return std::string(GANTRY_SOURCE_DIR) + "/tests/fixtures/hw/" + name;
}

// Reads a fixture tree (through the real disk Machine) with overrides:
//  fail(path, status)      read_file/list_dir of `path` returns `status` (e.g. permission denied)
//  set_file(path, text)    `path` reads as `text`
//  hide(path)              `path` (and everything under it) reads as absent
//  vanish_after_list(dir)  once `dir` has been listed, everything under it is gone (hot-unplug)
class FakeMachine final : public Machine {
 public:
  explicit FakeMachine(std::string root, std::map<std::string, std::string> env = {})
      : disk_(make_disk_machine(std::move(root), env)) {}

  void fail(const std::string& path, Status s) { failures_[path] = std::move(s); }
  void set_file(const std::string& path, std::string text) { files_[path] = std::move(text); }
  void hide(const std::string& path) { hidden_.insert(path); }
  void vanish_after_list(const std::string& dir) { vanishing_.insert(dir); }
  // read_link(path) answers `target` (a fixture tree keeps no symbolic links).
  void set_link(const std::string& path, std::string target) { links_[path] = std::move(target); }
  // device_of(path) answers (major, minor) for `path` (a captured tree has no device numbers).
  void set_device_of(const std::string& path, unsigned major, unsigned minor) {
    devices_[path] = {major, minor};
  }

  Result<std::string> read_file(std::string_view path) const override {
    if (auto s = check(path); !s.ok()) return s;
    if (auto it = files_.find(std::string(path)); it != files_.end()) return it->second;
    return disk_->read_file(path);
  }
  Result<std::vector<std::string>> list_dir(std::string_view path) const override {
    if (auto s = check(path); !s.ok()) return s;
    auto r = disk_->list_dir(path);
    if (vanishing_.count(std::string(path))) {
      std::lock_guard<std::mutex> lock(mu_);
      gone_.insert(std::string(path) + "/");
    }
    return r;
  }
  bool exists(std::string_view path) const override {
    return check(path).ok() && (files_.count(std::string(path)) || disk_->exists(path));
  }
  Result<std::string> read_link(std::string_view path) const override {
    if (auto s = check(path); !s.ok()) return s;
    if (auto it = links_.find(std::string(path)); it != links_.end()) return it->second;
    return disk_->read_link(path);
  }
  Result<std::pair<unsigned, unsigned>> device_of(std::string_view path) const override {
    auto it = devices_.find(std::string(path));
    if (it == devices_.end()) return NotFound("no device number set for " + std::string(path));
    return it->second;
  }
  std::optional<std::string> getenv(std::string_view name) const override { return disk_->getenv(name); }
  bool is_local_root() const override { return false; }
  std::string root() const override { return disk_->root(); }

 private:
  Status check(std::string_view path) const {
    const std::string p(path);
    if (auto it = failures_.find(p); it != failures_.end()) return it->second;
    for (const auto& h : hidden_) {
      if (p == h || p.rfind(h + "/", 0) == 0) return NotFound("hidden by test: " + p);
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& g : gone_) {
      if (p.rfind(g, 0) == 0) return NotFound("vanished: " + p);
    }
    return Status::Ok();
  }

  std::unique_ptr<Machine> disk_;
  std::map<std::string, Status> failures_;
  std::map<std::string, std::string> files_;
  std::map<std::string, std::string> links_;
  std::set<std::string> hidden_;
  std::set<std::string> vanishing_;
  std::map<std::string, std::pair<unsigned, unsigned>> devices_;
  mutable std::mutex mu_;
  mutable std::set<std::string> gone_;
};

// A library whose symbols are entries of a table.
class FakeLibrary final : public DynamicLibrary {
 public:
  explicit FakeLibrary(std::map<std::string, void*> symbols) : symbols_(std::move(symbols)) {}
  void* symbol(const char* name) const override {
    auto it = symbols_.find(name);
    return it == symbols_.end() ? nullptr : it->second;
  }

 private:
  std::map<std::string, void*> symbols_;
};

class FakeLoader final : public LibraryLoader {
 public:
  void add(const std::string& soname, std::map<std::string, void*> symbols) {
    libs_[soname] = std::move(symbols);
  }
  Result<std::unique_ptr<DynamicLibrary>> open(std::string_view soname) const override {
    auto it = libs_.find(std::string(soname));
    if (it == libs_.end()) return Unavailable(std::string(soname) + ": not in the fake loader");
    return std::unique_ptr<DynamicLibrary>(std::make_unique<FakeLibrary>(it->second));
  }

 private:
  std::map<std::string, std::map<std::string, void*>> libs_;
};

inline Registry detect_fixture(const std::string& name, std::map<std::string, std::string> env = {}) {
  FakeMachine m(fixture(name), std::move(env));
  FakeLoader loader;
  return detect(m, loader);
}

inline const Device* find_id(const Registry& r, const std::string& id) {
  for (const auto& d : r.devices) {
    if (d.id == id) return &d;
  }
  return nullptr;
}

inline int count_family(const Registry& r, std::string_view family) {
  int n = 0;
  for (const auto& d : r.devices) n += d.family == family;
  return n;
}

}  // namespace gantry::hw::testing
