#include "gantry/weights/hub_url.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdlib>

namespace gantry::weights {

namespace {

// Percent-encodes `s` as RFC 3986 wants a path segment (libcurl's curl_easy_escape: all but the
// unreserved characters), or each '/'-separated segment of it where `keep_slash`.
std::string encode(std::string_view s, bool keep_slash) {
  std::string out;
  size_t start = 0;
  while (true) {
    const size_t end = keep_slash ? std::min(s.find('/', start), s.size()) : s.size();
    const std::string_view part = s.substr(start, end - start);
    if (char* e = curl_easy_escape(nullptr, part.data(), static_cast<int>(part.size()))) {
      out += e;
      curl_free(e);
    }
    if (end == s.size()) return out;
    out += '/';
    start = end + 1;
  }
}

bool has_control(std::string_view s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

}  // namespace

bool is_hub_file(std::string_view spec) { return spec.starts_with(kHubScheme); }

HubEnvironment HubEnvironment::from_process() {
  HubEnvironment env;
  // NOLINTBEGIN(concurrency-mt-unsafe): read once per resolution, never set by Gantry.
  if (const char* e = std::getenv("HF_ENDPOINT"); e != nullptr && *e != '\0') env.endpoint = e;
  if (const char* t = std::getenv("HF_TOKEN"); t != nullptr && *t != '\0') env.token = t;
  // NOLINTEND(concurrency-mt-unsafe)
  return env;
}

Result<HubFile> resolve_hub_file(std::string_view spec, const HubEnvironment& env) {
  const std::string what(spec);
  const auto bad = [&](const std::string& why) {
    return InvalidArgument(what + ": " + why + " (expected hf://OWNER/REPO[@REVISION]/PATH)");
  };
  if (!is_hub_file(spec)) return bad("not an hf:// name");
  if (has_control(spec)) return bad("a control character");
  std::string_view rest = spec.substr(kHubScheme.size());
  const auto owner_end = rest.find('/');
  if (owner_end == std::string_view::npos || owner_end == 0) return bad("no repository owner");
  const std::string_view owner = rest.substr(0, owner_end);
  rest.remove_prefix(owner_end + 1);
  // The repository ends at the first '/' or '@'; a revision runs from '@' to the next '/'. A revision
  // holding '/' is written percent-encoded, as huggingface_hub's HfFileSystem writes it (refs%2Fpr%2F3).
  const auto repo_end = rest.find_first_of("@/");
  if (repo_end == std::string_view::npos || repo_end == 0) return bad("no repository or no file path");
  const std::string_view repo = rest.substr(0, repo_end);
  std::string revision = "main";
  if (rest[repo_end] == '@') {
    rest.remove_prefix(repo_end + 1);
    const auto rev_end = rest.find('/');
    if (rev_end == std::string_view::npos || rev_end == 0) return bad("an empty revision or no file path");
    revision = std::string(rest.substr(0, rev_end));
    rest.remove_prefix(rev_end + 1);
  } else {
    rest.remove_prefix(repo_end + 1);
  }
  const std::string_view path = rest;
  if (path.empty() || path.back() == '/') return bad("no file path");
  for (std::string_view segment : {owner, repo})
    if (segment == "." || segment == "..")
      return bad("'" + std::string(segment) + "' is not a repository name");
  for (size_t start = 0; start <= path.size();) {
    const auto end = std::min(path.find('/', start), path.size());
    const std::string_view segment = path.substr(start, end - start);
    if (segment.empty() || segment == "." || segment == "..")
      return bad("the path has an empty, '.' or '..' segment");
    start = end + 1;
  }
  std::string endpoint = env.endpoint;
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  if (!endpoint.starts_with("http://") && !endpoint.starts_with("https://"))
    return bad("HF_ENDPOINT '" + endpoint + "' is not an http:// or https:// URL");
  // "refs%2Fpr%2F3" given encoded is taken as written; a plain revision is encoded whole.
  const std::string rev_segment =
      revision.find('%') != std::string::npos ? revision : encode(revision, false);
  HubFile f;
  f.url = endpoint + "/" + encode(owner, false) + "/" + encode(repo, false) + "/resolve/" + rev_segment +
          "/" + encode(path, /*keep_slash=*/true);
  f.revision = std::move(revision);
  if (env.token) {
    if (has_control(*env.token)) return bad("HF_TOKEN holds a control character");
    f.headers.push_back("Authorization: Bearer " + *env.token);
  }
  return f;
}

}  // namespace gantry::weights
