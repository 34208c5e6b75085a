#include "gantry/core/file_io.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

namespace gantry {

Result<std::string> read_file(const std::filesystem::path& path, uint64_t max_bytes) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return NotFound(path.string() + ": no such file");
  if (std::filesystem::is_directory(st))
    return InvalidArgument(path.string() + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path.string() + ": cannot open: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return IoError(path.string() + ": cannot determine the file size");
  if (static_cast<uint64_t>(size) > max_bytes)
    return InvalidArgument(path.string() + ": file of " + std::to_string(size) +
                           " bytes exceeds the limit of " + std::to_string(max_bytes) + " bytes");
  in.seekg(0, std::ios::beg);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (size > 0 && !in.read(bytes.data(), size))
    return IoError(path.string() + ": read failed after " + std::to_string(in.gcount()) + " bytes");
  return bytes;
}

Status write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return IoError(path.string() + ": cannot create: " + std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      return IoError(path.string() + ": write failed: " + std::strerror(errno));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return IoError(path.string() + ": cannot replace: " + ec.message());
  }
  return Status::Ok();
}

}  // namespace gantry
