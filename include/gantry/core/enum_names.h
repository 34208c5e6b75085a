// EnumNames: one constexpr table of {value, name} pairs that gives an enum both directions,
// value -> name and text -> value, so that no enum keeps a hand-written switch pair.
//
//   constexpr auto kKinds = enum_names<Kind>("device kind", {{Kind::kCpu, "cpu"}, {Kind::kGpu, "gpu"}});
//   kKinds.name_of(Kind::kGpu)  -> "gpu"
//   kKinds.find("gpu")          -> Kind::kGpu (std::optional)
//   kKinds.parse("tpu")         -> InvalidArgument("device kind 'tpu' is not one of cpu, gpu")
//
// Contract: the first entry for a value is its canonical name (what name_of returns); later entries
// for the same value are aliases that find/parse accept. Matching is exact (case-sensitive).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

template <typename E, size_t N>
class EnumNames {
 public:
  constexpr EnumNames(std::string_view what, const std::array<EnumName<E>, N>& entries)
      : what_(what), entries_(entries) {}

  // The canonical name of `value`, or `fallback` when the table has no entry for it.
  constexpr std::string_view name_of(E value, std::string_view fallback = "unknown") const {
    for (const auto& e : entries_)
      if (e.value == value) return e.name;
    return fallback;
  }

  // The value named `text` (canonical name or alias), or nullopt.
  constexpr std::optional<E> find(std::string_view text) const {
    for (const auto& e : entries_)
      if (e.name == text) return e.value;
    return std::nullopt;
  }

  // Like find, but an unknown name is InvalidArgument naming `what` and the canonical names.
  Result<E> parse(std::string_view text) const {
    if (auto v = find(text)) return *v;
    return InvalidArgument(std::string(what_) + " '" + std::string(text) + "' is not one of " + names());
  }

  // The canonical names in table order ("a, b, c"), or every name, aliases included.
  std::string names(bool with_aliases = false, std::string_view separator = ", ") const {
    std::string out;
    for (size_t i = 0; i < N; ++i) {
      if (!with_aliases && !is_canonical(i)) continue;
      if (!out.empty()) out += separator;
      out += entries_[i].name;
    }
    return out;
  }

  std::string_view what() const { return what_; }
  const std::array<EnumName<E>, N>& entries() const { return entries_; }

 private:
  constexpr bool is_canonical(size_t i) const {
    for (size_t j = 0; j < i; ++j)
      if (entries_[j].value == entries_[i].value) return false;
    return true;
  }

  std::string_view what_;
  std::array<EnumName<E>, N> entries_;
};

// Builds an EnumNames, deducing the table size: enum_names<E>("what", {{E::kA, "a"}, ...}).
template <typename E, size_t N>
constexpr EnumNames<E, N> enum_names(std::string_view what, const EnumName<E> (&entries)[N]) {
  std::array<EnumName<E>, N> a{};
  for (size_t i = 0; i < N; ++i) a[i] = entries[i];
  return EnumNames<E, N>(what, a);
}

}  // namespace gantry
