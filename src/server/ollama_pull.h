// Pulling a model for Ollama's /api/pull (private to src/server/): from a source laid out like an Ollama
// registry into the model repository directory, verified against the manifest's sha256 as it arrives.
//
// A source is either
// - a directory laid out like Ollama's own model store (~/.ollama/models):
//   manifests/<host>/<namespace>/<model>/<tag> (the manifest JSON) and blobs/sha256-<hex>; or
// - an http(s) base URL of a registry speaking Ollama's (OCI distribution) API:
//   <base>/v2/<namespace>/<model>/manifests/<tag> and <base>/v2/<namespace>/<model>/blobs/sha256:<hex>
//   (read with the weights' libcurl client: bounded, http/https redirects only).
// The manifest's model layer (mediaType application/vnd.ollama.image.model, a GGUF file) is the only
// blob fetched; other layers (template, params, license) are ignored: the GGUF carries its template.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/protocol/ollama_codec.h"
#include "protocols.h"

namespace gantry::server {

// Downloads the model `path` names from `source` into `dir` as "<served_name(path)>.gguf" and returns
// that file. `progress` gets each NDJSON progress line (pulling manifest, pulling <digest> with
// total/completed, verifying sha256 digest, writing manifest) and returns false to stop (the client
// left: Cancelled). The download goes to a hidden, locked temporary file beside the target, renamed
// over it once verified (see remove_stale_partials). Nothing is left in `dir` on failure: NotFound when the
// source has no such model, Corrupt when the blob's size, digest or format is not what the manifest says,
// IoError when `dir` cannot be written. Removes from `dir` the unfinished downloads
// (".NAME.gguf.partial-PID-N", written by pull_model) that no live process is writing: the process PID is
// gone and nobody holds the file's lock (a writer holds it from creating the file until it is renamed or
// removed, so a server sharing the directory, even from another PID namespace, keeps its own). Returns the
// files removed. ModelRepository never lists them (hidden files), so a crash mid-download never keeps a
// server from starting; this only frees the space.
std::vector<std::filesystem::path> remove_stale_partials(const std::filesystem::path& dir);

Result<std::filesystem::path> pull_model(std::string_view source, const ollama::ModelPath& path,
                                         const std::filesystem::path& dir,
                                         const std::function<bool(std::string)>& progress);

}  // namespace gantry::server
