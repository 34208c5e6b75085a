#include "gantry/model/package.h"

#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "gantry/core/cleanup_registry.h"
#include "gantry/core/file_io.h"
#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/model/memory_image.h"
#include "gantry/model/onnx_info.h"
#include "gantry/model/sha256.h"
#include "gantry/model/tar.h"

namespace gantry::model {
namespace fs = std::filesystem;
namespace {

bool ends_with_tar(const fs::path& path) { return path.extension() == ".tar"; }

// A fresh private directory under the system temp dir, removed when the last owner goes away.
Result<std::shared_ptr<const fs::path>> make_temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "gantry-package-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr)
    return IoError("cannot create a temporary directory in " + fs::temp_directory_path().string());
  // Registered for removal on SIGINT/SIGTERM too: an interrupted extraction leaves nothing in /tmp.
  const int slot = register_cleanup_path(tmpl);
  return std::shared_ptr<const fs::path>(new fs::path(tmpl), [slot](const fs::path* p) {
    std::error_code ec;
    fs::remove_all(*p, ec);
    unregister_cleanup_path(slot);
    delete p;
  });
}

bool inside(const fs::path& canonical_root, const fs::path& canonical_path) {
  const auto rel = canonical_path.lexically_relative(canonical_root);
  return !rel.empty() && *rel.begin() != ".." && rel != ".";
}

Status check_format_matches(const Manifest& m, const fs::path& model_path) {
  GANTRY_ASSIGN_OR_RETURN(const std::string magic, read_prefix(model_path, 4));
  const bool gguf_magic = magic == "GGUF";
  if (m.format == ModelFormat::kGguf && !gguf_magic)
    return InvalidArgument("format: the manifest says gguf but " + m.model_file +
                           " does not start with the GGUF magic");
  if (m.format == ModelFormat::kOnnx && gguf_magic)
    return InvalidArgument("format: the manifest says onnx but " + m.model_file + " is a GGUF file");
  return Status::Ok();
}

Status load_directory(const fs::path& dir, const LoadOptions& options, Manifest& manifest, fs::path& root) {
  std::error_code ec;
  root = fs::canonical(dir, ec);
  if (ec) return IoError("cannot resolve the package directory: " + ec.message());
  // Resolved like every file the manifest names: a gantry.json that is a symlink out of the package is
  // refused.
  auto manifest_path = resolve_package_file(root, kManifestFileName, kManifestFileName);
  if (!manifest_path.ok() && manifest_path.status().code() == StatusCode::kNotFound)
    return NotFound("no " + std::string(kManifestFileName) +
                    " in the package; create one with 'gantry pack <model> -o <package>'");
  if (!manifest_path.ok()) return manifest_path.status();
  GANTRY_ASSIGN_OR_RETURN(manifest, read_manifest(*manifest_path));
  GANTRY_ASSIGN_OR_RETURN(auto model_path, resolve_package_file(root, manifest.model_file, "model_file"));
  GANTRY_RETURN_IF_ERROR(check_format_matches(manifest, model_path));
  if (options.verify_checksums) GANTRY_RETURN_IF_ERROR(verify_checksums(manifest, root));
  return Status::Ok();
}

// Files a source directory contributes to a package, relative names sorted.
Result<std::vector<std::pair<std::string, fs::path>>> collect_files(const fs::path& src) {
  std::vector<std::pair<std::string, fs::path>> files;
  std::error_code ec;
  const fs::path root = fs::canonical(src, ec);
  if (ec) return IoError(src.string() + ": " + ec.message());
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const auto& p = it->path();
    if (it->is_directory(ec)) continue;
    if (ec) return IoError(p.string() + ": " + ec.message());
    const std::string rel = p.lexically_relative(root).generic_string();
    if (rel == kManifestFileName) continue;
    const fs::path real = fs::canonical(p, ec);
    if (ec) return IoError(p.string() + ": " + ec.message());
    if (!inside(root, real))
      return InvalidArgument(p.string() + " is a symlink to " + real.string() +
                             ", outside the source directory; copy the file in instead");
    if (!fs::is_regular_file(real)) continue;
    GANTRY_RETURN_IF_ERROR(check_relative_package_path(rel, src.string()));
    files.emplace_back(rel, real);
  }
  if (ec) return IoError(src.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

// A gantry.json already in the source directory: its fields are kept; the sha256 table may be missing.
Result<std::optional<Manifest>> read_base_manifest(const fs::path& src_dir) {
  auto resolved =
      resolve_package_file(src_dir, kManifestFileName, (src_dir / std::string(kManifestFileName)).string());
  if (!resolved.ok() && resolved.status().code() == StatusCode::kNotFound) return std::optional<Manifest>();
  if (!resolved.ok()) return resolved.status();
  const fs::path path = src_dir / std::string(kManifestFileName);
  GANTRY_ASSIGN_OR_RETURN(auto text, read_file(*resolved, 16 << 20));
  auto parsed = parse_json_unique_keys<nlohmann::json>(text, path.string());
  if (parsed.ok()) {  // a parse error is reported by parse_manifest below
    auto& j = *parsed;
    if (j.is_object() && !j.contains("sha256") && j.contains("model_file") && j["model_file"].is_string()) {
      j["sha256"] = {{j["model_file"].get<std::string>(), std::string(64, '0')}};
      text = j.dump();
    }
  }
  GANTRY_ASSIGN_OR_RETURN(auto m, parse_manifest(text, path.string()));
  return std::optional<Manifest>(std::move(m));
}

void fill_io_from_onnx(Manifest& m, const fs::path& model_path) {
  auto info = read_onnx_info(model_path);
  if (!info.ok()) return;
  IoSpec io;
  auto convert = [](const std::vector<OnnxValueInfo>& values, std::vector<TensorSpec>& out) {
    for (const auto& v : values) {
      TensorSpec s;
      s.name = v.name;
      s.dtype = v.dtype;
      s.shape = v.shape;
      s.dim_names = v.dim_names;
      out.push_back(std::move(s));
    }
  };
  convert(info->inputs, io.inputs);
  convert(info->outputs, io.outputs);
  m.io = std::move(io);
}

}  // namespace

std::string_view package_kind_name(PackageKind k) {
  switch (k) {
    case PackageKind::kDirectory:
      return "directory";
    case PackageKind::kTar:
      return "tar";
    case PackageKind::kBareModel:
      return "model file";
    case PackageKind::kMemory:
      return "memory";
  }
  return "unknown";
}

fs::path Package::model_path() const {
  if (image_) return image_->path();
  return root_ / manifest_.model_file;
}

const std::string& Package::model_sha256() const {
  static const std::string kNone;
  auto it = manifest_.sha256.find(manifest_.model_file);
  return it == manifest_.sha256.end() ? kNone : it->second;
}

Result<bool> is_package_archive(const fs::path& path) {
  if (path.extension() == ".tar") return true;
  GANTRY_ASSIGN_OR_RETURN(const std::string head, read_prefix(path, 262));
  return head.size() == 262 && head.compare(257, 5, "ustar") == 0;
}

Result<ModelFormat> detect_model_format(const fs::path& model_file) {
  GANTRY_ASSIGN_OR_RETURN(const std::string magic, read_prefix(model_file, 4));
  if (magic.empty()) return Corrupt(model_file.string() + ": empty file, not a model");
  if (magic == "GGUF") return ModelFormat::kGguf;
  const auto ext = model_file.extension().string();
  if (ext == ".gguf")
    return Corrupt(model_file.string() + ": not a GGUF file (it does not start with the 'GGUF' magic)");
  if (ext == ".onnx") return ModelFormat::kOnnx;
  return InvalidArgument(model_file.string() +
                         ": cannot tell the model format; expected a .onnx file or a GGUF file");
}

Result<Manifest> synthesize_manifest(const fs::path& model_file) {
  GANTRY_ASSIGN_OR_RETURN(auto format, detect_model_format(model_file));
  Manifest m;
  m.name = model_file.stem().string();
  m.version = "0.0.0";
  m.format = format;
  m.model_file = model_file.filename().string();
  GANTRY_RETURN_IF_ERROR(check_relative_package_path(m.model_file, model_file.string()));
  GANTRY_ASSIGN_OR_RETURN(auto digest, sha256_file(model_file));
  m.sha256.emplace(m.model_file, std::move(digest));
  return m;
}

Result<fs::path> resolve_package_file(const fs::path& root, std::string_view relative,
                                      std::string_view field) {
  GANTRY_RETURN_IF_ERROR(check_relative_package_path(relative, field));
  std::error_code ec;
  const fs::path real_root = fs::canonical(root, ec);
  if (ec) return IoError(root.string() + ": " + ec.message());
  const fs::path p = real_root / std::string(relative);
  auto type = file_type_of(p);
  if (!type.ok() && type.status().code() == StatusCode::kNotFound)
    return NotFound(std::string(field) + ": '" + std::string(relative) + "' is not in the package (" +
                    real_root.string() + ")");
  if (!type.ok()) return type.status().with_context(field);
  const fs::path real = fs::canonical(p, ec);
  if (ec) return IoError(p.string() + ": " + ec.message());
  if (!inside(real_root, real))
    return InvalidArgument(std::string(field) + ": '" + std::string(relative) + "' resolves to " +
                           real.string() + ", outside the package directory (a symlink escapes it)");
  if (*type != fs::file_type::regular)
    return InvalidArgument(std::string(field) + ": '" + std::string(relative) + "' " +
                           std::string(file_type_name(*type)) + ", not a regular file");
  return real;
}

Status verify_checksums(const Manifest& manifest, const fs::path& root) {
  for (const auto& [file, expected] : manifest.sha256) {
    GANTRY_ASSIGN_OR_RETURN(auto path, resolve_package_file(root, file, "sha256"));
    GANTRY_ASSIGN_OR_RETURN(auto actual, sha256_file(path));
    if (actual != expected)
      return Corrupt(file + ": sha256 mismatch (manifest " + expected + ", file " + actual +
                     "); the file changed or is corrupt — re-run 'gantry pack' if the change is intended");
  }
  return Status::Ok();
}

Result<Package> load_package(const fs::path& path, const LoadOptions& options) {
  const std::string ctx = "package " + path.string();
  std::error_code ec;
  GANTRY_ASSIGN_OR_RETURN(const fs::file_type type, file_type_of(path));
  Package pkg;
  pkg.source_ = path;
  if (type == fs::file_type::directory) {
    pkg.kind_ = PackageKind::kDirectory;
    auto s = load_directory(path, options, pkg.manifest_, pkg.root_);
    if (!s.ok()) return s.with_context(ctx);
    return pkg;
  }
  if (type != fs::file_type::regular)
    return InvalidArgument(path.string() + ": not a regular file or directory (a FIFO, socket or device?)");
  GANTRY_ASSIGN_OR_RETURN(const bool is_tar, is_package_archive(path));
  if (is_tar) {
    pkg.kind_ = PackageKind::kTar;
    GANTRY_ASSIGN_OR_RETURN(pkg.temp_dir_, make_temp_dir());
    auto s = extract_tar(path, *pkg.temp_dir_);
    if (!s.ok()) return s.with_context(ctx);
    s = load_directory(*pkg.temp_dir_, options, pkg.manifest_, pkg.root_);
    if (!s.ok()) return s.with_context(ctx);
    return pkg;
  }
  pkg.kind_ = PackageKind::kBareModel;
  auto m = synthesize_manifest(path);
  if (!m.ok()) return m.status();
  pkg.manifest_ = std::move(*m);
  pkg.root_ = fs::canonical(path, ec).parent_path();
  if (ec) return IoError(path.string() + ": " + ec.message());
  return pkg;
}

Result<Manifest> pack_package(const fs::path& source, const fs::path& destination,
                              const PackOptions& options) {
  std::error_code ec;
  if (!fs::exists(source, ec)) return NotFound(source.string() + ": no such file or directory");
  std::vector<std::pair<std::string, fs::path>> files;
  std::optional<Manifest> base;
  std::string model_file = options.model_file;
  if (fs::is_directory(source, ec)) {
    const fs::path real_src = fs::canonical(source, ec);
    const fs::path real_dst = fs::weakly_canonical(fs::absolute(destination), ec);
    if (real_dst == real_src || inside(real_src, real_dst))
      return InvalidArgument(destination.string() +
                             ": the package cannot be written inside its source directory " +
                             source.string());
    GANTRY_ASSIGN_OR_RETURN(files, collect_files(source));
    GANTRY_ASSIGN_OR_RETURN(base, read_base_manifest(source));
    if (model_file.empty() && base) model_file = base->model_file;
    if (model_file.empty()) {
      std::vector<std::string> models;
      for (const auto& [rel, real] : files) {
        const auto ext = fs::path(rel).extension();
        if (ext == ".onnx" || ext == ".gguf") models.push_back(rel);
      }
      if (models.empty())
        return NotFound(source.string() + ": no .onnx or .gguf model file in the directory");
      if (models.size() > 1) {
        std::string list;
        for (const auto& mname : models) list += (list.empty() ? "" : ", ") + mname;
        return InvalidArgument(source.string() + ": several model files (" + list +
                               "); name the one to load with --model-file");
      }
      model_file = models.front();
    }
    if (std::none_of(files.begin(), files.end(), [&](const auto& f) { return f.first == model_file; }))
      return NotFound(source.string() + ": model file '" + model_file + "' is not in the directory");
  } else {
    model_file = source.filename().string();
    files.emplace_back(model_file, fs::canonical(source, ec));
  }
  const fs::path model_path =
      std::find_if(files.begin(), files.end(), [&](const auto& f) { return f.first == model_file; })->second;
  GANTRY_ASSIGN_OR_RETURN(auto format, detect_model_format(model_path));

  Manifest m = base.value_or(Manifest{});
  if (base && base->format != format)
    return InvalidArgument(source.string() + ": gantry.json says format " +
                           std::string(model_format_name(base->format)) + " but " + model_file + " is " +
                           std::string(model_format_name(format)));
  m.format = format;
  m.model_file = model_file;
  if (!options.name.empty()) m.name = options.name;
  if (m.name.empty()) m.name = fs::path(model_file).stem().string();
  if (!options.version.empty()) m.version = options.version;
  if (m.version.empty()) m.version = "0.0.0";
  if (!options.task.empty()) m.task = options.task;
  if (options.preferred_provider) m.hardware_requirements.preferred_provider = options.preferred_provider;
  if (!options.fallback_providers.empty())
    m.hardware_requirements.fallback_providers = options.fallback_providers;
  if (!m.io && format == ModelFormat::kOnnx) {
    auto info = read_onnx_info(model_path);
    if (!info.ok()) return info.status();
    fill_io_from_onnx(m, model_path);
  }
  m.sha256.clear();
  for (const auto& [rel, real] : files) {
    GANTRY_ASSIGN_OR_RETURN(auto digest, sha256_file(real));
    m.sha256.emplace(rel, std::move(digest));
  }
  GANTRY_RETURN_IF_ERROR(validate_manifest(m));
  const std::string json = manifest_to_json(m);

  const bool exists = fs::exists(fs::symlink_status(destination, ec));
  if (ends_with_tar(destination)) {
    if (exists && !options.overwrite)
      return InvalidArgument(destination.string() + ": already exists; pass --force to replace it");
    if (destination.has_parent_path()) {
      fs::create_directories(destination.parent_path(), ec);
      if (ec) return IoError(destination.parent_path().string() + ": cannot create: " + ec.message());
    }
    std::vector<TarMember> members;
    members.push_back({std::string(kManifestFileName), {}, json});
    for (const auto& [rel, real] : files) members.push_back({rel, real, std::nullopt});
    GANTRY_RETURN_IF_ERROR(write_tar(destination, members));  // atomic: a temporary renamed over it
    return m;
  }
  if (exists) {
    if (!fs::is_directory(destination, ec))
      return InvalidArgument(destination.string() + ": exists and is not a directory");
    if (!fs::is_empty(destination, ec) && !options.overwrite)
      return InvalidArgument(destination.string() +
                             ": directory is not empty; pass --force to replace its files");
  }
  fs::create_directories(destination, ec);
  if (ec) return IoError(destination.string() + ": cannot create: " + ec.message());
  for (const auto& [rel, real] : files) {
    const fs::path target = destination / rel;
    fs::create_directories(target.parent_path(), ec);
    if (ec) return IoError(target.parent_path().string() + ": cannot create: " + ec.message());
    GANTRY_RETURN_IF_ERROR(copy_regular_file(real, target));
  }
  GANTRY_RETURN_IF_ERROR(write_file(destination / std::string(kManifestFileName), json));
  GANTRY_LOG_DEBUG("packed {} ({} files) into {}", m.name, files.size(), destination.string());
  return m;
}

}  // namespace gantry::model
