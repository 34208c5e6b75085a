#include "gantry/kernels/signature.h"

#include <cctype>
#include <map>

namespace gantry::kernels {

namespace {

// The source with comments and string/char literals blanked (same length, newlines kept), so that a
// commented-out or quoted "saxpy(" is not taken for the entry.
std::string strip_comments(std::string_view s) {
  std::string out(s);
  size_t i = 0;
  while (i < out.size()) {
    if (out.compare(i, 2, "//") == 0) {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    } else if (out.compare(i, 2, "/*") == 0) {
      size_t end = out.find("*/", i + 2);
      end = end == std::string::npos ? out.size() : end + 2;
      for (; i < end; ++i)
        if (out[i] != '\n') out[i] = ' ';
    } else if (out[i] == '"' || out[i] == '\'') {
      const char quote = out[i++];
      while (i < out.size() && out[i] != quote && out[i] != '\n') {
        if (out[i] == '\\' && i + 1 < out.size()) out[i++] = ' ';
        out[i++] = ' ';
      }
      ++i;
    } else {
      ++i;
    }
  }
  return out;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::vector<std::string> tokens(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (ident_char(c)) {
      size_t j = i;
      while (j < text.size() && ident_char(text[j])) ++j;
      out.emplace_back(text.substr(i, j - i));
      i = j;
    } else {
      out.emplace_back(1, c);
      ++i;
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty() && p != "*" && out.back() != '*') out += ' ';
    if (!out.empty() && p != "*" && out.back() == '*') out += ' ';
    out += p;
  }
  return out;
}

const std::map<std::string, DType, std::less<>>& element_types() {
  static const std::map<std::string, DType, std::less<>> m = {
      {"float", DType::kFloat32},
      {"double", DType::kFloat64},
      {"half", DType::kFloat16},
      {"__half", DType::kFloat16},
      {"_Float16", DType::kFloat16},
      {"__nv_bfloat16", DType::kBFloat16},
      {"__bf16", DType::kBFloat16},
      {"bool", DType::kBool},
      {"_Bool", DType::kBool},
      {"char", DType::kInt8},
      {"signed char", DType::kInt8},
      {"int8_t", DType::kInt8},
      {"unsigned char", DType::kUInt8},
      {"uint8_t", DType::kUInt8},
      {"short", DType::kInt16},
      {"int16_t", DType::kInt16},
      {"unsigned short", DType::kUInt16},
      {"uint16_t", DType::kUInt16},
      {"int", DType::kInt32},
      {"signed", DType::kInt32},
      {"signed int", DType::kInt32},
      {"int32_t", DType::kInt32},
      {"unsigned", DType::kUInt32},
      {"unsigned int", DType::kUInt32},
      {"uint32_t", DType::kUInt32},
      {"long", DType::kInt64},  // LP64 (Linux x86-64/aarch64, CUDA on them)
      {"long int", DType::kInt64},
      {"long long", DType::kInt64},
      {"long long int", DType::kInt64},
      {"int64_t", DType::kInt64},
      {"ptrdiff_t", DType::kInt64},
      {"unsigned long", DType::kUInt64},
      {"unsigned long long", DType::kUInt64},
      {"uint64_t", DType::kUInt64},
      {"size_t", DType::kUInt64},
  };
  return m;
}

std::optional<ScalarType> scalar_of(DType d) {
  switch (d) {
    case DType::kBool:
      return ScalarType::kBool;
    case DType::kInt8:
      return ScalarType::kI8;
    case DType::kUInt8:
      return ScalarType::kU8;
    case DType::kInt16:
      return ScalarType::kI16;
    case DType::kUInt16:
      return ScalarType::kU16;
    case DType::kInt32:
      return ScalarType::kI32;
    case DType::kInt64:
      return ScalarType::kI64;
    case DType::kUInt32:
      return ScalarType::kU32;
    case DType::kUInt64:
      return ScalarType::kU64;
    case DType::kFloat32:
      return ScalarType::kF32;
    case DType::kFloat64:
      return ScalarType::kF64;
    default:
      return std::nullopt;
  }
}

Result<KernelParam> parse_param(const std::vector<std::string>& toks, size_t position) {
  KernelParam p;
  std::vector<std::string> base;  // the type's words without qualifiers
  std::vector<std::string> written;
  int stars = 0;
  bool const_before_star = false;
  for (size_t i = 0; i < toks.size(); ++i) {
    const std::string& t = toks[i];
    written.push_back(t);
    if (t == "const") {
      if (stars == 0) const_before_star = true;
    } else if (t == "volatile" || t == "__restrict__" || t == "__restrict" || t == "restrict" ||
               t == "struct" || t == "std" || t == ":") {
      // qualifiers (and std:: prefixes) do not change what is passed
    } else if (t == "*") {
      ++stars;
    } else if (t == "&" || t == "[" || t == "<" || t == "(" || t == "=") {
      return InvalidArgument("parameter " + std::to_string(position) + " '" + join(toks) +
                             "': references, arrays, templates, function pointers and default values "
                             "cannot be passed to a kernel; use a pointer or a scalar");
    } else {
      base.push_back(t);
    }
  }
  // The last word is the name unless the type is all there is ("float*", "int").
  auto is_type_word = [](const std::string& w) {
    static const char* const words[] = {"unsigned", "signed", "long", "short", "int",  "char",
                                        "float",    "double", "bool", "void",  "_Bool"};
    for (const char* k : words)
      if (w == k) return true;
    return element_types().count(w) > 0;
  };
  if (!base.empty() && !is_type_word(base.back())) {
    p.name = base.back();
    base.pop_back();
    if (!written.empty() && written.back() == p.name) written.pop_back();
  }
  std::string type;
  for (const auto& w : base) type += (type.empty() ? "" : " ") + w;
  p.type_text = join(written);
  const std::string where = "parameter " + std::to_string(position) + " '" + join(toks) + "'";
  if (stars > 1)
    return InvalidArgument(where + ": a pointer to a pointer cannot be passed; use a tensor pointer");
  if (stars == 1) {
    p.is_pointer = true;
    p.is_const = const_before_star;
    if (type == "void") return p;
    auto it = element_types().find(type);
    if (it == element_types().end())
      return InvalidArgument(where + ": Gantry has no tensor element type for '" + type +
                             "'; use float/double/half/intN_t/uintN_t/bool, or void*");
    p.element = it->second;
    return p;
  }
  auto it = element_types().find(type);
  std::optional<ScalarType> s = it == element_types().end() ? std::nullopt : scalar_of(it->second);
  if (!s)
    return InvalidArgument(
        where + ": scalar type '" + type +
        "' cannot be passed; scalars are bool, int8_t, uint8_t, int16_t, uint16_t, int32_t, int64_t, "
        "uint32_t, uint64_t, float, double");
  p.scalar = *s;
  return p;
}

// Splits the text between the parentheses at top-level commas and parses each parameter. `ctx_first`:
// a leading `const gantry_kernel_ctx*` parameter is the CPU convention's and is taken off.
Result<KernelSignature> parse_params(std::string_view text, std::string_view entry) {
  KernelSignature sig;
  sig.entry = std::string(entry);
  std::vector<std::vector<std::string>> params(1);
  int depth = 0;
  for (auto& t : tokens(text)) {
    if (t == "(" || t == "<" || t == "[") ++depth;
    if (t == ")" || t == ">" || t == "]") --depth;
    if (t == "," && depth == 0) {
      params.emplace_back();
      continue;
    }
    params.back().push_back(t);
  }
  if (params.size() == 1 && (params[0].empty() || (params[0].size() == 1 && params[0][0] == "void")))
    return sig;  // no parameters
  size_t position = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& toks = params[i];
    if (i == 0) {
      bool ctx = false;
      for (const auto& t : toks) ctx = ctx || t == "gantry_kernel_ctx";
      if (ctx) {
        sig.cpu_context = true;
        continue;
      }
    }
    ++position;
    if (toks.empty())
      return InvalidArgument("parameter " + std::to_string(position) + " of " + sig.entry + " is empty");
    GANTRY_ASSIGN_OR_RETURN(auto p, parse_param(toks, position));
    sig.params.push_back(std::move(p));
  }
  return sig;
}

}  // namespace

std::string_view scalar_type_name(ScalarType t) {
  switch (t) {
    case ScalarType::kBool:
      return "bool";
    case ScalarType::kI8:
      return "i8";
    case ScalarType::kU8:
      return "u8";
    case ScalarType::kI16:
      return "i16";
    case ScalarType::kU16:
      return "u16";
    case ScalarType::kI32:
      return "i32";
    case ScalarType::kI64:
      return "i64";
    case ScalarType::kU32:
      return "u32";
    case ScalarType::kU64:
      return "u64";
    case ScalarType::kF32:
      return "f32";
    case ScalarType::kF64:
      return "f64";
  }
  return "?";
}

std::optional<ScalarType> parse_scalar_type(std::string_view name) {
  for (ScalarType t : {ScalarType::kBool, ScalarType::kI8, ScalarType::kU8, ScalarType::kI16,
                       ScalarType::kU16, ScalarType::kI32, ScalarType::kI64, ScalarType::kU32,
                       ScalarType::kU64, ScalarType::kF32, ScalarType::kF64})
    if (scalar_type_name(t) == name) return t;
  return std::nullopt;
}

size_t scalar_size(ScalarType t) {
  switch (t) {
    case ScalarType::kBool:
    case ScalarType::kI8:
    case ScalarType::kU8:
      return 1;
    case ScalarType::kI16:
    case ScalarType::kU16:
      return 2;
    case ScalarType::kI32:
    case ScalarType::kU32:
    case ScalarType::kF32:
      return 4;
    default:
      return 8;
  }
}

std::string KernelSignature::to_string() const {
  std::string out = entry + "(";
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    if (i) out += ", ";
    if (p.is_pointer) {
      out += p.is_const ? "const " : "";
      out += p.element ? std::string(dtype_name(*p.element)) : "void";
      out += "*";
    } else {
      out += scalar_type_name(p.scalar);
    }
    if (!p.name.empty()) out += " " + p.name;
  }
  return out + ")";
}

Result<KernelSignature> parse_parameter_list(std::string_view params, std::string_view entry) {
  auto sig = parse_params(params, entry);
  if (!sig.ok()) return sig.status().with_context("signature of " + std::string(entry));
  return sig;
}

Result<KernelSignature> parse_signature(std::string_view source, std::string_view entry) {
  if (entry.empty()) return InvalidArgument("no kernel entry name given");
  const std::string text = strip_comments(source);
  size_t pos = 0;
  while ((pos = text.find(entry, pos)) != std::string::npos) {
    const size_t end = pos + entry.size();
    const bool starts = pos == 0 || !ident_char(text[pos - 1]);
    size_t k = end;
    while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k]))) ++k;
    // A function named `entry`: a whole word followed by '(' and preceded by a return type (not a call:
    // the word before it is an identifier such as void/__global__, not '=', ',' or '(').
    size_t b = pos;
    while (b > 0 && std::isspace(static_cast<unsigned char>(text[b - 1]))) --b;
    const bool declared = b > 0 && (ident_char(text[b - 1]) || text[b - 1] == '*');
    if (starts && k < text.size() && text[k] == '(' && declared) {
      int depth = 0;
      size_t close = k;
      for (; close < text.size(); ++close) {
        if (text[close] == '(') ++depth;
        if (text[close] == ')' && --depth == 0) break;
      }
      if (close == text.size())
        return InvalidArgument("the parameter list of " + std::string(entry) + " has no closing ')'");
      auto sig = parse_params(std::string_view(text).substr(k + 1, close - k - 1), entry);
      if (!sig.ok()) return sig.status().with_context("kernel " + std::string(entry));
      return sig;
    }
    pos = end;
  }
  return NotFound("the source has no function named '" + std::string(entry) +
                  "' (check --entry; the name is case-sensitive)");
}

}  // namespace gantry::kernels
