// JSON "data" elements -> tensor elements for the KServe v2 codec (private to src/server/).
//
// Element conversion is written once for two kinds of leaf: a nlohmann::json value, and a Leaf that the
// "data" pre-scan (kserve_json_scan.h) produced, so both paths accept and reject the same things. Errors
// name the element ("element 3 is 1.5, expected an integer").
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>

#include "gantry/core/dtype.h"
#include "gantry/core/half.h"
#include "gantry/core/status.h"
#include "kserve_json_scan.h"

namespace gantry::protocol::kserve::internal {

// A short, printable description of a JSON value for error messages.
inline std::string describe(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::object:
      return "an object";
    default: {
      std::string s = v.dump();
      return s.size() > 40 ? s.substr(0, 40) + "..." : s;
    }
  }
}

inline std::string describe(const Leaf& n) {
  switch (n.kind) {
    case Leaf::Kind::kInt:
      return std::to_string(n.i);
    case Leaf::Kind::kUInt:
      return std::to_string(n.u);
    case Leaf::Kind::kFloat:
      return describe(nlohmann::json(n.d));
    case Leaf::Kind::kTrue:
      return "true";
    case Leaf::Kind::kFalse:
      return "false";
    case Leaf::Kind::kNull:
      break;
  }
  return "null";
}

template <typename V, typename T>
Status to_integer(const V& v, size_t i, T& out) {
  using L = std::numeric_limits<T>;
  auto range_error = [&](const std::string& got) {
    return InvalidArgument("element " + std::to_string(i) + " is " + got + ", out of range [" +
                           std::to_string(+L::min()) + ", " + std::to_string(+L::max()) + "]");
  };
  if (v.is_number_unsigned()) {
    const uint64_t u = v.template get<uint64_t>();
    if (u > static_cast<uint64_t>(L::max())) return range_error(std::to_string(u));
    out = static_cast<T>(u);
    return Status::Ok();
  }
  if (v.is_number_integer()) {
    const int64_t s = v.template get<int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (s < 0 || static_cast<uint64_t>(s) > static_cast<uint64_t>(L::max()))
        return range_error(std::to_string(s));
    } else {
      if (s < static_cast<int64_t>(L::min()) || s > static_cast<int64_t>(L::max()))
        return range_error(std::to_string(s));
    }
    out = static_cast<T>(s);
    return Status::Ok();
  }
  if (v.is_number_float()) {
    const double d = v.template get<double>();
    if (!std::isfinite(d) || d != std::trunc(d))
      return InvalidArgument("element " + std::to_string(i) + " is " + describe(v) + ", expected an integer");
    // Bounds as powers of two are exact doubles: [min, max + 1).
    const double hi = std::ldexp(1.0, L::digits);
    const double lo = std::is_signed_v<T> ? -hi : 0.0;
    if (d < lo || d >= hi) return range_error(describe(v));
    out = static_cast<T>(d);
    return Status::Ok();
  }
  return InvalidArgument("element " + std::to_string(i) + " is " + describe(v) + ", expected an integer");
}

template <typename V>
Status to_double(const V& v, size_t i, double& out) {
  if (!v.is_number())
    return InvalidArgument("element " + std::to_string(i) + " is " + describe(v) + ", expected a number");
  out = v.template get<double>();
  return Status::Ok();
}

template <typename V>
Status float_overflow(size_t i, const V& v, std::string_view datatype) {
  return InvalidArgument("element " + std::to_string(i) + " is " + describe(v) + ", out of range for " +
                         std::string(datatype));
}

template <typename T>
auto integer_converter() {
  return [](const auto& v, size_t i, void* dst) { return to_integer(v, i, static_cast<T*>(dst)[i]); };
}

// Calls body(convert) with the element converter for `dtype` and returns what body returns.
// convert(leaf, i, dst) checks leaf `i` (a json value or a Leaf) and writes it as element i of `dst`, the
// tensor's bytes. Choosing the converter once per array keeps the dtype switch out of the element loop.
template <typename Body>
Status with_converter(DType dtype, Body&& body) {
  return visit_dtype(dtype, [&]<DType D>(DTypeTag<D>) -> Status {
    if constexpr (D == DType::kFloat32) {
      // FLT_MAX = 2^128 - 2^104; anything from the midpoint to 2^128 up rounds to infinity.
      const double limit = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);
      return body([limit](const auto& v, size_t i, void* dst) {
        double d = 0;
        GANTRY_RETURN_IF_ERROR(to_double(v, i, d));
        if (std::fabs(d) >= limit) return float_overflow(i, v, "FP32");
        static_cast<float*>(dst)[i] = static_cast<float>(d);
        return Status::Ok();
      });
    } else if constexpr (D == DType::kFloat64) {
      return body(
          [](const auto& v, size_t i, void* dst) { return to_double(v, i, static_cast<double*>(dst)[i]); });
    } else if constexpr (D == DType::kFloat16 || D == DType::kBFloat16) {
      constexpr bool half = D == DType::kFloat16;
      return body([](const auto& v, size_t i, void* dst) {
        double d = 0;
        GANTRY_RETURN_IF_ERROR(to_double(v, i, d));
        bool overflow = false;
        static_cast<uint16_t*>(dst)[i] = half ? float_to_half(d, &overflow) : float_to_bfloat16(d, &overflow);
        if (overflow) return float_overflow(i, v, half ? "FP16 (largest finite 65504)" : "BF16");
        return Status::Ok();
      });
    } else if constexpr (is_integer_dtype(D)) {
      return body(integer_converter<dtype_storage_t<D>>());
    } else if constexpr (D == DType::kBool) {
      return body([](const auto& v, size_t i, void* dst) {
        if (!v.is_boolean())
          return InvalidArgument("element " + std::to_string(i) + " is " + describe(v) +
                                 ", expected true or false");
        static_cast<uint8_t*>(dst)[i] = v.template get<bool>() ? 1 : 0;
        return Status::Ok();
      });
    } else {
      // FP8 (KServe v2 has no FP8 datatype: never parsed, refused on output) and strings (read elsewhere).
      return Internal("with_converter: unhandled dtype");
    }
  });
}

}  // namespace gantry::protocol::kserve::internal
