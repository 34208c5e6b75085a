#include "gantry/model/tar.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "gantry/core/file_io.h"
#include "gantry/model/manifest.h"

namespace gantry::model {
namespace {

struct ReadDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct WriteDeleter {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryDeleter {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

std::string archive_message(archive* a) {
  const char* s = archive_error_string(a);
  return s ? s : "unknown libarchive error";
}

}  // namespace

Status write_tar(const std::filesystem::path& path, const std::vector<TarMember>& members) {
  std::unique_ptr<archive, WriteDeleter> a(archive_write_new());
  if (!a) return Internal("libarchive could not create a writer");
  // Written to a fresh temporary beside `path` and renamed over it: never through a planted symlink or
  // a stale '.partial' file, and no half-written archive is left at `path`.
  GANTRY_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(path));
  if (archive_write_set_format_pax_restricted(a.get()) != ARCHIVE_OK ||
      archive_write_set_bytes_in_last_block(a.get(), 1) != ARCHIVE_OK ||
      archive_write_open_fd(a.get(), file.fd()) != ARCHIVE_OK)
    return IoError(path.string() + ": cannot create archive: " + archive_message(a.get()));
  std::vector<std::byte> buf(1 << 20);
  for (const auto& m : members) {
    GANTRY_RETURN_IF_ERROR(check_relative_package_path(m.name, path.string()));
    UniqueFd in;
    uint64_t size = 0;
    if (m.contents) {
      size = m.contents->size();
    } else {
      GANTRY_ASSIGN_OR_RETURN(in, open_for_read(m.source));
      struct stat st {};
      if (::fstat(in.get(), &st) != 0)
        return IoError(m.source.string() + ": cannot stat: " + std::strerror(errno));
      size = static_cast<uint64_t>(st.st_size);
    }
    std::unique_ptr<archive_entry, EntryDeleter> e(archive_entry_new());
    // The UTF-8 setter: names are stored as UTF-8 whatever the process locale ("C" cannot translate them).
    archive_entry_set_pathname_utf8(e.get(), m.name.c_str());
    if (archive_entry_pathname(e.get()) == nullptr)  // libarchive would crash on it in the pax writer
      return InvalidArgument(path.string() + ": '" + m.name +
                             "' cannot be stored in the current locale; run with LC_ALL=C.UTF-8");
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(size));
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), 0644);
    archive_entry_set_mtime(e.get(), 0, 0);
    if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK)
      return IoError(path.string() + ": cannot add '" + m.name + "': " + archive_message(a.get()));
    if (m.contents) {
      if (archive_write_data(a.get(), m.contents->data(), m.contents->size()) < 0)
        return IoError(path.string() + ": writing '" + m.name + "': " + archive_message(a.get()));
    } else {
      uint64_t left = size;  // exactly the size in the header, even if the file changes meanwhile
      while (left > 0) {
        const size_t want = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
        GANTRY_ASSIGN_OR_RETURN(size_t got,
                                read_some(in.get(), std::span(buf.data(), want), m.source.string()));
        if (got == 0) return IoError(m.source.string() + ": the file shrank while it was being archived");
        if (archive_write_data(a.get(), buf.data(), got) < 0)
          return IoError(path.string() + ": writing '" + m.name + "': " + archive_message(a.get()));
        left -= got;
      }
    }
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK)
    return IoError(path.string() + ": cannot finish archive: " + archive_message(a.get()));
  return file.commit();
}

Status extract_tar(const std::filesystem::path& path, const std::filesystem::path& destination) {
  std::unique_ptr<archive, ReadDeleter> a(archive_read_new());
  if (!a) return Internal("libarchive could not create a reader");
  archive_read_support_format_tar(a.get());  // plain tar only: no decompression filters (no zip bombs)
  const std::string label = path.string();
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK)
    return Corrupt(label + ": not a readable tar archive: " + archive_message(a.get()));
  // An uncompressed tar cannot hold more file bytes than its own size, except through a sparse entry's
  // holes (3 GB extracted from a 51 KB archive) or a lying header. Sparse entries are refused below, and
  // this bound catches anything else that would expand.
  struct stat archive_stat {};
  if (::stat(path.c_str(), &archive_stat) != 0)
    return IoError(label + ": cannot stat: " + std::strerror(errno));
  const uint64_t limit = static_cast<uint64_t>(archive_stat.st_size);
  uint64_t extracted = 0;
  std::vector<char> buf(1 << 16);
  size_t entries = 0;
  while (true) {
    archive_entry* e = nullptr;
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
      return Corrupt(label + ": corrupt or truncated tar archive: " + archive_message(a.get()));
    ++entries;
    const char* raw_name = archive_entry_pathname_utf8(e);  // locale-independent, like write_tar
    if (raw_name == nullptr) raw_name = archive_entry_pathname(e);
    std::string name = raw_name ? raw_name : "";
    while (name.starts_with("./")) name.erase(0, 2);
    while (name.size() > 1 && name.back() == '/') name.pop_back();
    const auto type = archive_entry_filetype(e);
    if (name.empty() || name == "." || name == "./") {
      if (type == AE_IFDIR) continue;
      return InvalidArgument(label + ": tar entry with an empty name");
    }
    const std::string entry = label + ": tar entry '" + name + "'";
    GANTRY_RETURN_IF_ERROR(check_relative_package_path(name, label + ": tar entry"));
    if (archive_entry_hardlink(e) != nullptr)
      return InvalidArgument(entry + " is a hard link; package archives may hold only files and directories");
    if (type == AE_IFLNK)
      return InvalidArgument(entry + " is a symlink; package archives may hold only files and directories");
    if (type != AE_IFDIR && type != AE_IFREG)
      return InvalidArgument(entry + " is not a regular file or directory");
    if (archive_entry_sparse_count(e) > 0)
      return InvalidArgument(entry + " is a sparse file (its holes would expand on extraction); package " +
                             "archives may hold only plain files: create the archive without --sparse");
    const auto target = destination / name;
    std::error_code ec;
    if (type == AE_IFDIR) {
      std::filesystem::create_directories(target, ec);
      if (ec) return IoError(entry + ": cannot create directory: " + ec.message());
      continue;
    }
    std::filesystem::create_directories(target.parent_path(), ec);
    if (ec) return IoError(entry + ": cannot create directory: " + ec.message());
    // O_EXCL|O_NOFOLLOW: a second entry with the same name (or a symlink in its way) is refused.
    auto out = create_new_file(target, 0644);
    if (!out.ok()) {
      if (out.status().code() == StatusCode::kInvalidArgument)
        return InvalidArgument(entry + " appears twice in the archive");
      return out.status().with_context(entry);
    }
    while (true) {
      const la_ssize_t got = archive_read_data(a.get(), buf.data(), buf.size());
      if (got < 0) return Corrupt(entry + ": truncated or corrupt data: " + archive_message(a.get()));
      if (got == 0) break;
      extracted += static_cast<uint64_t>(got);
      if (extracted > limit)
        return InvalidArgument(entry + ": extracting would write more than the archive's own " +
                               std::to_string(limit) + " bytes (a sparse or malformed entry); refused");
      for (la_ssize_t done = 0; done < got;) {
        const ssize_t n = ::write(out->get(), buf.data() + done, static_cast<size_t>(got - done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return IoError(entry + ": write failed: " + std::strerror(errno));
        done += n;
      }
    }
  }
  if (entries == 0) return Corrupt(label + ": empty tar archive");
  return Status::Ok();
}

}  // namespace gantry::model
