// A file on the Hugging Face Hub named by repository and revision, as huggingface_hub names it:
//
//   hf://OWNER/REPO/PATH            the file at the repository's main branch
//   hf://OWNER/REPO@REVISION/PATH   at a branch, tag or commit ("v1.0", a 40-digit sha, or
//                                   "refs%2Fpr%2F3": a revision with '/' percent-encoded, as HfFileSystem)
//
// resolve_hub_file() turns it into the download URL huggingface_hub uses,
// ENDPOINT/OWNER/REPO/resolve/REVISION/PATH (each part percent-encoded), with ENDPOINT from $HF_ENDPOINT
// (default https://huggingface.co) and, when $HF_TOKEN is set, an "Authorization: Bearer" header for that
// request only (curl does not forward it to another host on a redirect, so the CDN the Hub redirects to never
// sees it).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::weights {

inline constexpr std::string_view kHubScheme = "hf://";
inline constexpr std::string_view kDefaultHubEndpoint = "https://huggingface.co";

bool is_hub_file(std::string_view spec);  // starts with hf://

// Where the Hub is and who asks: from $HF_ENDPOINT and $HF_TOKEN by default.
struct HubEnvironment {
  std::string endpoint = std::string(kDefaultHubEndpoint);
  std::optional<std::string> token;
  static HubEnvironment from_process();
};

struct HubFile {
  std::string url;                   // the download URL
  std::string revision;              // "main" when the spec names none
  std::vector<std::string> headers;  // "Authorization: Bearer ..." with a token; else none
};

// InvalidArgument naming what is wrong for a spec that is not hf://OWNER/REPO[@REVISION]/PATH (an empty
// part, a ".." segment, a control character, an endpoint that is not http(s)).
Result<HubFile> resolve_hub_file(std::string_view spec,
                                 const HubEnvironment& env = HubEnvironment::from_process());

}  // namespace gantry::weights
