#include "gantry/core/npy.h"

#include <bit>
#include <cctype>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "gantry/core/file_io.h"

namespace gantry {
namespace {

static_assert(std::endian::native == std::endian::little, ".npy support assumes a little-endian host");

constexpr std::string_view kMagic = "\x93NUMPY";

// The parsed header dict: {'descr': ..., 'fortran_order': ..., 'shape': (...)}.
struct Header {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<int64_t>> shape;
};

// A tiny reader for the Python literal numpy writes as the header.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  Result<Header> parse() {
    Header h;
    skip_ws();
    if (!eat('{')) return error("expected '{'");
    while (true) {
      skip_ws();
      if (eat('}')) break;
      auto key = parse_string();
      if (!key) return error("expected a quoted key");
      skip_ws();
      if (!eat(':')) return error("expected ':' after '" + *key + "'");
      skip_ws();
      if (*key == "descr") {
        if (h.descr) return error("duplicate key 'descr'");
        if (peek() == '[') return Unsupported("structured (record) dtypes are not supported");
        auto v = parse_string();
        if (!v) return error("'descr' must be a quoted dtype string");
        h.descr = *v;
      } else if (*key == "fortran_order") {
        if (h.fortran_order) return error("duplicate key 'fortran_order'");
        if (s_.substr(pos_).starts_with("True")) {
          h.fortran_order = true;
          pos_ += 4;
        } else if (s_.substr(pos_).starts_with("False")) {
          h.fortran_order = false;
          pos_ += 5;
        } else {
          return error("'fortran_order' must be True or False");
        }
      } else if (*key == "shape") {
        if (h.shape) return error("duplicate key 'shape'");
        auto v = parse_tuple();
        if (!v.ok()) return v.status();
        h.shape = std::move(*v);
      } else {
        return error("unexpected key '" + *key + "'");
      }
      skip_ws();
      if (eat(',')) continue;
      skip_ws();
      if (eat('}')) break;
      return error("expected ',' or '}'");
    }
    skip_ws();
    if (pos_ != s_.size()) return error("unexpected text after the header dict");
    if (!h.descr || !h.fortran_order || !h.shape)
      return error("the header must hold 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  Status error(const std::string& what) const {
    return Corrupt("bad .npy header at offset " + std::to_string(pos_) + ": " + what);
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  std::optional<std::string> parse_string() {
    const char q = peek();
    if (q != '\'' && q != '"') return std::nullopt;
    const size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) return std::nullopt;
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  Result<std::vector<int64_t>> parse_tuple() {
    if (!eat('(')) return error("'shape' must be a tuple");
    std::vector<int64_t> dims;
    while (true) {
      skip_ws();
      if (eat(')')) break;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) return error("'shape' holds a non-integer");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        const int d = s_[pos_++] - '0';
        if (v > (INT64_MAX - d) / 10) return error("a dimension of 'shape' overflows int64");
        v = v * 10 + d;
      }
      // Python writes 3L in some old files.
      if (peek() == 'L') ++pos_;
      dims.push_back(v);
      skip_ws();
      if (eat(',')) continue;
      skip_ws();
      if (eat(')')) break;
      return error("expected ',' or ')' in 'shape'");
    }
    if (dims.size() > 64) return error("'shape' has more than 64 dimensions");
    return dims;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

struct Descr {
  DType dtype;
  size_t item_size;  // bytes per element in the file
};

Result<Descr> parse_descr(const std::string& descr) {
  if (descr.size() < 2) return Corrupt("bad .npy dtype '" + descr + "'");
  const char order = descr[0];
  const char kind = descr[1];
  const std::string size_text = descr.substr(2);
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return Unsupported(".npy dtype '" + descr + "' is not supported (expected e.g. '<f4')");
  if (size_text.empty() || size_text.size() > 9 ||
      size_text.find_first_not_of("0123456789") != std::string::npos)
    return Unsupported(".npy dtype '" + descr + "' is not supported");
  const size_t size = std::stoul(size_text);
  std::optional<DType> t;
  switch (kind) {
    case 'f':
      t = size == 2   ? DType::kFloat16
          : size == 4 ? DType::kFloat32
          : size == 8 ? DType::kFloat64
                      : std::optional<DType>();
      break;
    case 'i':
      t = size == 1   ? DType::kInt8
          : size == 2 ? DType::kInt16
          : size == 4 ? DType::kInt32
          : size == 8 ? DType::kInt64
                      : std::optional<DType>();
      break;
    case 'u':
      t = size == 1   ? DType::kUInt8
          : size == 2 ? DType::kUInt16
          : size == 4 ? DType::kUInt32
          : size == 8 ? DType::kUInt64
                      : std::optional<DType>();
      break;
    case 'b':
      if (size == 1) t = DType::kBool;
      break;
    case 'U':
      t = DType::kString;
      break;
    default:
      break;
  }
  if (!t)
    return Unsupported(".npy dtype '" + descr +
                       "' is not supported (supported: f2/f4/f8, i1-i8, u1-u8, b1, U)");
  if (kind == 'U' && size == 0)
    return Unsupported(".npy dtype '" + descr + "' (zero-width strings) is not supported");
  const size_t item = kind == 'U' ? size * 4 : size;
  if (order == '>' && item > 1 && size > 1)
    return Unsupported(".npy dtype '" + descr +
                       "' is big-endian; convert it with arr.astype(arr.dtype.newbyteorder('<'))");
  return Descr{*t, item};
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes UTF-8 into code points; nullopt on malformed input.
std::optional<std::vector<uint32_t>> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || i + static_cast<size_t>(extra) >= s.size()) return std::nullopt;
    uint32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1F) : extra == 2 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
    out.push_back(cp);
    i += 1 + extra;
  }
  return out;
}

Result<Tensor> decode_strings(const Shape& shape, const std::byte* data, size_t count, size_t chars) {
  std::vector<std::string> strings;
  strings.reserve(count);
  for (size_t e = 0; e < count; ++e) {
    std::string s;
    size_t len = chars;
    auto cp_at = [&](size_t k) {
      uint32_t cp;
      std::memcpy(&cp, data + (e * chars + k) * 4, 4);
      return cp;
    };
    while (len > 0 && cp_at(len - 1) == 0) --len;  // numpy pads with NUL
    for (size_t k = 0; k < len; ++k) {
      const uint32_t cp = cp_at(k);
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return Corrupt("element " + std::to_string(e) + " holds an invalid unicode code point");
      append_utf8(s, cp);
    }
    strings.push_back(std::move(s));
  }
  return Tensor::from_strings(shape, std::move(strings));
}

std::string descr_of(DType t) {
  switch (t) {
    case DType::kFloat16:
      return "<f2";
    case DType::kFloat32:
      return "<f4";
    case DType::kFloat64:
      return "<f8";
    case DType::kInt8:
      return "|i1";
    case DType::kInt16:
      return "<i2";
    case DType::kInt32:
      return "<i4";
    case DType::kInt64:
      return "<i8";
    case DType::kUInt8:
      return "|u1";
    case DType::kUInt16:
      return "<u2";
    case DType::kUInt32:
      return "<u4";
    case DType::kUInt64:
      return "<u8";
    case DType::kBool:
      return "|b1";
    default:
      return "";
  }
}

}  // namespace

Result<NpyHeader> parse_npy_header(std::span<const std::byte> bytes) {
  const auto* p = reinterpret_cast<const char*>(bytes.data());
  const size_t n = bytes.size();
  if (n < 10)
    return Corrupt("not a .npy file: " + std::to_string(n) + " bytes is shorter than the 10-byte preamble");
  if (std::string_view(p, 6) != kMagic) return Corrupt("not a .npy file: missing the \\x93NUMPY magic");
  const int major = static_cast<unsigned char>(p[6]);
  const int minor = static_cast<unsigned char>(p[7]);
  if (major < 1 || major > 3 || minor != 0)
    return Unsupported(".npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                       " is not supported (1.0, 2.0, 3.0 are)");
  size_t header_len = 0;
  size_t prefix = 0;
  if (major == 1) {
    header_len =
        static_cast<unsigned char>(p[8]) | (static_cast<size_t>(static_cast<unsigned char>(p[9])) << 8);
    prefix = 10;
  } else {
    if (n < 12) return Corrupt(".npy file truncated in its preamble");
    for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(p[8 + i]);
    prefix = 12;
  }
  if (header_len > n - prefix)
    return Corrupt(".npy file truncated: the header claims " + std::to_string(header_len) +
                   " bytes but only " + std::to_string(n - prefix) + " follow");
  auto header = HeaderParser(std::string_view(p + prefix, header_len)).parse();
  if (!header.ok()) return header.status();
  if (*header->fortran_order)
    return Unsupported(".npy array is in Fortran order; save it in C order (np.ascontiguousarray) first");
  auto descr = parse_descr(*header->descr);
  if (!descr.ok()) return descr.status();
  NpyHeader h;
  h.dtype = descr->dtype;
  h.descr = *header->descr;
  h.shape = Shape(*header->shape);
  if (!h.shape.element_count()) return Corrupt(".npy shape " + h.shape.to_string() + " overflows int64");
  h.item_size = descr->item_size;
  h.data_offset = prefix + header_len;
  return h;
}

Result<Tensor> parse_npy(std::span<const std::byte> bytes) {
  auto h = parse_npy_header(bytes);
  if (!h.ok()) return h.status();
  const uint64_t count = static_cast<uint64_t>(*h->shape.element_count());
  const size_t available = bytes.size() - h->data_offset;
  if (h->item_size != 0 && count > available / h->item_size)
    return Corrupt(".npy data truncated: shape " + h->shape.to_string() + " of " + h->descr + " needs " +
                   (count > UINT64_MAX / h->item_size ? std::string("more than 2^64")
                                                      : std::to_string(count * h->item_size)) +
                   " bytes, the file holds " + std::to_string(available));
  const size_t data_bytes = static_cast<size_t>(count) * h->item_size;
  if (data_bytes != available)
    return Corrupt(".npy file has " + std::to_string(available - data_bytes) + " bytes after the array data");
  const std::byte* data = bytes.data() + h->data_offset;
  if (h->dtype == DType::kString)
    return decode_strings(h->shape, data, static_cast<size_t>(count), h->item_size / 4);
  auto t = Tensor::allocate(h->dtype, h->shape);
  if (!t.ok()) return t.status();
  if (data_bytes > 0) std::memcpy(t->data(), data, data_bytes);
  if (h->dtype == DType::kBool) {
    for (auto& b : t->values<uint8_t>())
      if (b > 1) return Corrupt(".npy bool array holds the byte value " + std::to_string(b));
  }
  return t;
}

Result<Tensor> read_npy(const std::filesystem::path& path) {
  auto bytes = read_file(path);
  if (!bytes.ok()) return bytes.status();
  auto t = parse_npy(std::as_bytes(std::span<const char>(bytes->data(), bytes->size())));
  if (!t.ok()) return t.status().with_context(path.string());
  return t;
}

namespace {

// The .npy header, followed for string tensors by their (converted) payload; numeric payloads are the
// tensor's own bytes, appended by the caller without another copy.
Result<std::string> npy_header(ConstTensorView tensor) {
  if (tensor.memory_class() == MemoryClass::kDevice)
    return InvalidArgument("cannot write a tensor in device memory as .npy; copy it to the host first");
  if (tensor.shape().is_dynamic()) return InvalidArgument("cannot write a tensor of dynamic shape as .npy");
  std::string descr;
  size_t max_chars = 1;
  std::vector<std::vector<uint32_t>> code_points;
  if (tensor.dtype() == DType::kString) {
    for (const auto& s : tensor.strings()) {
      auto cps = decode_utf8(s);
      if (!cps)
        return InvalidArgument("string tensor element " + std::to_string(code_points.size()) +
                               " is not valid UTF-8");
      max_chars = std::max(max_chars, cps->size());
      code_points.push_back(std::move(*cps));
    }
    descr = "<U" + std::to_string(max_chars);
  } else {
    descr = descr_of(tensor.dtype());
    if (descr.empty())
      return Unsupported("numpy has no dtype for " + std::string(dtype_name(tensor.dtype())) +
                         "; convert the tensor to f32 before writing .npy");
  }
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  const auto& dims = tensor.shape().dims();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) dict += ", ";
    dict += std::to_string(dims[i]);
  }
  if (dims.size() == 1) dict += ',';
  dict += "), }";
  size_t prefix = 10;
  size_t total = prefix + dict.size() + 1;
  if (total - prefix > 65535) {
    prefix = 12;
    total = prefix + dict.size() + 1;
  }
  const size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  std::string out(kMagic);
  out += static_cast<char>(prefix == 10 ? 1 : 2);
  out += '\0';
  const size_t hl = dict.size();
  out += static_cast<char>(hl & 0xFF);
  out += static_cast<char>((hl >> 8) & 0xFF);
  if (prefix == 12) {
    out += static_cast<char>((hl >> 16) & 0xFF);
    out += static_cast<char>((hl >> 24) & 0xFF);
  }
  out += dict;
  if (tensor.dtype() == DType::kString) {
    for (const auto& cps : code_points) {
      for (size_t k = 0; k < max_chars; ++k) {
        const uint32_t cp = k < cps.size() ? cps[k] : 0;
        char b[4];
        std::memcpy(b, &cp, 4);
        out.append(b, 4);
      }
    }
  }
  return out;
}

}  // namespace

Result<std::string> serialize_npy(ConstTensorView tensor) {
  GANTRY_ASSIGN_OR_RETURN(std::string out, npy_header(tensor));
  if (tensor.dtype() != DType::kString && tensor.byte_size() > 0)
    out.append(static_cast<const char*>(tensor.data()), tensor.byte_size());
  return out;
}

// Written straight from the tensor's buffer: a multi-GB output is not copied first.
Status write_npy(const std::filesystem::path& path, ConstTensorView tensor) {
  auto header = npy_header(tensor);
  if (!header.ok()) return header.status().with_context(path.string());
  GANTRY_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(path));
  GANTRY_RETURN_IF_ERROR(f.write(*header));
  if (tensor.dtype() != DType::kString && tensor.byte_size() > 0)
    GANTRY_RETURN_IF_ERROR(
        f.write(std::span(static_cast<const std::byte*>(tensor.data()), tensor.byte_size())));
  return f.commit();
}

}  // namespace gantry
