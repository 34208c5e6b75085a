// NumPy .npz: a zip of .npy members (stored or deflated), read with libarchive from memory. Listing
// reads only each member's .npy header; loading extracts one member into owned memory.
#include <archive.h>
#include <archive_entry.h>

#include <memory>

#include "weights/catalog.h"
#include "weights/npy_header.h"

namespace gantry::weights {
namespace {

struct ReadDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};
using Archive = std::unique_ptr<archive, ReadDeleter>;

// libarchive's message, which may be null.
std::string archive_message(archive* a) {
  const char* m = archive_error_string(a);
  return m ? m : "unknown error";
}

constexpr size_t kMaxNpyHeader = size_t{1} << 20;

Result<Archive> open_zip(std::span<const std::byte> bytes, const std::string& label) {
  Archive a(archive_read_new());
  if (!a) return Internal("archive_read_new failed");
  archive_read_support_format_zip(a.get());
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK)
    return Corrupt(label + ": not a readable zip archive: " + archive_message(a.get()));
  return a;
}

// Reads up to buf.size() bytes of the current member; the count read.
Result<size_t> read_member(archive* a, std::span<std::byte> buf, const std::string& what) {
  size_t got = 0;
  while (got < buf.size()) {
    const la_ssize_t n = archive_read_data(a, buf.data() + got, buf.size() - got);
    if (n < 0) return Corrupt(what + ": " + archive_message(a));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

std::string tensor_name(std::string member) {
  if (member.ends_with(".npy")) member.resize(member.size() - 4);
  return member;
}

// Extracts member `index` (its .npy data only) into owned memory of `bytes` bytes.
Result<Bytes> extract(std::span<const std::byte> zip, std::shared_ptr<const void> zip_owner, size_t index,
                      uint64_t bytes, const std::string& what) {
  GANTRY_ASSIGN_OR_RETURN(Archive a, open_zip(zip, what));
  archive_entry* entry = nullptr;
  for (size_t i = 0;; ++i) {
    const int r = archive_read_next_header(a.get(), &entry);
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) return Corrupt(what + ": member vanished from the archive");
    if (i == index) break;
  }
  std::vector<std::byte> head(kMaxNpyHeader);
  // Read the header first, then exactly the data.
  GANTRY_ASSIGN_OR_RETURN(size_t got, read_member(a.get(), std::span(head.data(), 12), what));
  GANTRY_ASSIGN_OR_RETURN(NpyHeader h0, [&]() -> Result<NpyHeader> {
    // Header length from the preamble, then the rest of the header.
    if (got < 10) return Corrupt(what + ": truncated .npy header");
    const uint64_t v = std::to_integer<uint8_t>(head[6]);
    uint64_t len = std::to_integer<uint8_t>(head[8]) | (uint64_t{std::to_integer<uint8_t>(head[9])} << 8);
    uint64_t start = 10;
    if (v >= 2) {
      len |= (uint64_t{std::to_integer<uint8_t>(head[10])} << 16) |
             (uint64_t{std::to_integer<uint8_t>(head[11])} << 24);
      start = 12;
    }
    if (start + len > head.size()) return Corrupt(what + ": .npy header above 1 MiB");
    GANTRY_ASSIGN_OR_RETURN(size_t more,
                            read_member(a.get(), std::span(head.data() + got, start + len - got), what));
    return parse_npy_header(std::span(head.data(), got + more), what);
  }());
  (void)h0;
  auto buf = std::shared_ptr<std::byte[]>(new std::byte[bytes > 0 ? bytes : 1]);
  GANTRY_ASSIGN_OR_RETURN(size_t n, read_member(a.get(), std::span(buf.get(), bytes), what));
  if (n != bytes)
    return Corrupt(what + ": member holds " + std::to_string(n) + " data bytes, its header needs " +
                   std::to_string(bytes));
  std::byte extra[1];
  GANTRY_ASSIGN_OR_RETURN(size_t excess, read_member(a.get(), std::span(extra, 1), what));
  if (excess != 0) return Corrupt(what + ": member holds more data than its header's shape");
  (void)zip_owner;
  return Bytes{std::span<const std::byte>(buf.get(), bytes), std::shared_ptr<const void>(buf, buf.get())};
}

}  // namespace

Result<std::vector<std::string>> zip_member_names(std::span<const std::byte> zip, const std::string& label) {
  GANTRY_ASSIGN_OR_RETURN(Archive a, open_zip(zip, label));
  std::vector<std::string> names;
  archive_entry* entry = nullptr;
  while (true) {
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
      return Corrupt(label + ": bad zip member header: " + archive_message(a.get()));
    const char* n = archive_entry_pathname(entry);
    names.emplace_back(n ? n : "");
    if (names.size() > 1'000'000) return Corrupt(label + ": more than a million zip members");
  }
  return names;
}

Result<Catalog> parse_npz(const WeightSource& src) {
  const std::string& label = src.label();
  GANTRY_ASSIGN_OR_RETURN(Bytes all, src.read(0, src.size()));  // a URL: one bounded download
  Catalog cat;
  cat.meta.format = WeightFormat::kNpz;
  cat.meta.source = label;
  cat.sources.push_back(src);
  cat.keepalive = all.owner;
  GANTRY_ASSIGN_OR_RETURN(Archive a, open_zip(all.data, label));
  archive_entry* entry = nullptr;
  std::vector<std::byte> head(kMaxNpyHeader);
  for (size_t index = 0;; ++index) {
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
      return Corrupt(label + ": bad zip member header: " + archive_message(a.get()));
    const char* raw = archive_entry_pathname(entry);
    const std::string member = raw ? raw : "";
    const std::string name = tensor_name(member);
    const std::string what = label + ": member \"" + member + "\"";
    if (!member.ends_with(".npy")) return Unsupported(what + " is not a .npy array");
    GANTRY_ASSIGN_OR_RETURN(size_t got, read_member(a.get(), head, what));
    GANTRY_ASSIGN_OR_RETURN(NpyHeader h, parse_npy_header(std::span(head.data(), got), what));
    GANTRY_ASSIGN_OR_RETURN(uint64_t bytes, checked_bytes(WeightType{h.dtype}, h.shape, what));
    if (archive_entry_size_is_set(entry)) {
      const auto size = static_cast<uint64_t>(archive_entry_size(entry));
      if (size < h.data_offset || size - h.data_offset != bytes)
        return Corrupt(what + ": " + std::string(dtype_name(h.dtype)) + " " + h.shape.to_string() +
                       " needs " + std::to_string(bytes) + " data bytes, the member holds " +
                       std::to_string(size >= h.data_offset ? size - h.data_offset : 0));
    }
    Entry e;
    e.info = TensorInfo{name, h.dtype, h.shape, bytes, ""};
    const auto zip = all.data;
    auto owner = all.owner;
    e.materialize = [zip, owner, index, bytes, what]() { return extract(zip, owner, index, bytes, what); };
    GANTRY_RETURN_IF_ERROR(cat.add(std::move(e)));
  }
  cat.finish();
  return cat;
}

}  // namespace gantry::weights
