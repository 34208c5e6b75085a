#include "gantry/model/tar.h"

#include <archive.h>
#include <archive_entry.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

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
  if (archive_write_set_format_pax_restricted(a.get()) != ARCHIVE_OK ||
      archive_write_open_filename(a.get(), path.c_str()) != ARCHIVE_OK)
    return IoError(path.string() + ": cannot create archive: " + archive_message(a.get()));
  std::vector<char> buf(1 << 20);
  for (const auto& m : members) {
    GANTRY_RETURN_IF_ERROR(check_relative_package_path(m.name, path.string()));
    std::ifstream in;
    uint64_t size = 0;
    if (m.contents) {
      size = m.contents->size();
    } else {
      std::error_code ec;
      size = std::filesystem::file_size(m.source, ec);
      if (ec) return IoError(m.source.string() + ": " + ec.message());
      in.open(m.source, std::ios::binary);
      if (!in) return IoError(m.source.string() + ": cannot open: " + std::strerror(errno));
    }
    std::unique_ptr<archive_entry, EntryDeleter> e(archive_entry_new());
    archive_entry_set_pathname(e.get(), m.name.c_str());
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
      while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        const auto got = in.gcount();
        if (got > 0 && archive_write_data(a.get(), buf.data(), static_cast<size_t>(got)) < 0)
          return IoError(path.string() + ": writing '" + m.name + "': " + archive_message(a.get()));
      }
      if (in.bad()) return IoError(m.source.string() + ": read failed");
    }
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK)
    return IoError(path.string() + ": cannot finish archive: " + archive_message(a.get()));
  return Status::Ok();
}

Status extract_tar(const std::filesystem::path& path, const std::filesystem::path& destination) {
  std::unique_ptr<archive, ReadDeleter> a(archive_read_new());
  if (!a) return Internal("libarchive could not create a reader");
  archive_read_support_format_tar(a.get());  // plain tar only: no decompression filters (no zip bombs)
  const std::string label = path.string();
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK)
    return Corrupt(label + ": not a readable tar archive: " + archive_message(a.get()));
  std::vector<char> buf(1 << 16);
  size_t entries = 0;
  while (true) {
    archive_entry* e = nullptr;
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
      return Corrupt(label + ": corrupt or truncated tar archive: " + archive_message(a.get()));
    ++entries;
    const char* raw_name = archive_entry_pathname(e);
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
    const auto target = destination / name;
    std::error_code ec;
    if (type == AE_IFDIR) {
      std::filesystem::create_directories(target, ec);
      if (ec) return IoError(entry + ": cannot create directory: " + ec.message());
      continue;
    }
    std::filesystem::create_directories(target.parent_path(), ec);
    if (ec) return IoError(entry + ": cannot create directory: " + ec.message());
    if (std::filesystem::exists(std::filesystem::symlink_status(target, ec)))
      return InvalidArgument(entry + " appears twice in the archive");
    std::ofstream out(target, std::ios::binary | std::ios::trunc);
    if (!out) return IoError(entry + ": cannot create: " + std::strerror(errno));
    while (true) {
      const la_ssize_t got = archive_read_data(a.get(), buf.data(), buf.size());
      if (got < 0) return Corrupt(entry + ": truncated or corrupt data: " + archive_message(a.get()));
      if (got == 0) break;
      out.write(buf.data(), got);
      if (!out) return IoError(entry + ": write failed: " + std::strerror(errno));
    }
  }
  if (entries == 0) return Corrupt(label + ": empty tar archive");
  return Status::Ok();
}

}  // namespace gantry::model
