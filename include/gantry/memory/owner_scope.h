// OwnerScope: names who the memory allocated on this thread is for (a loaded model, usually).
//
//   { memory::OwnerScope scope("resnet50"); session.Run(...); }  // the pool charges "resnet50"
//
// Scopes nest (the innermost wins) and are per thread: work a library hands to its own threads is
// "unattributed" unless that thread opens a scope too. A scope must be destroyed on the thread that
// created it, in reverse order of creation (as any local variable is).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gantry::memory {

inline constexpr std::string_view kUnattributed = "unattributed";

class OwnerScope {
 public:
  explicit OwnerScope(std::string owner);
  ~OwnerScope();
  OwnerScope(const OwnerScope&) = delete;
  OwnerScope& operator=(const OwnerScope&) = delete;

  // The innermost open scope's owner on this thread, or kUnattributed. Valid while that scope lives.
  static std::string_view current();
  // A number unique to the innermost open scope on this thread (0 when none): lets a pool cache its
  // owner lookup per thread without comparing strings.
  static uint64_t current_serial();

 private:
  std::string owner_;
  uint64_t serial_;
  OwnerScope* previous_;
};

}  // namespace gantry::memory
