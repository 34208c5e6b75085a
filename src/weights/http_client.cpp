#include "weights/http_client.h"

#include <curl/curl.h>

#include <mutex>
#include <utility>

namespace gantry::weights {
namespace {

// curl_global_init is not thread-safe before 7.84; run it once.
void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  std::string body;
  uint64_t limit = 0;  // abort when the body would exceed this
  bool over_limit = false;
  std::string content_range;
};

size_t on_body(char* ptr, size_t size, size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * nmemb;
  if (t->body.size() + n > t->limit) {
    t->over_limit = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  t->body.append(ptr, n);
  return n;
}

size_t on_header(char* buffer, size_t size, size_t nitems, void* user) {
  const size_t n = size * nitems;
  take_header_line(std::string_view(buffer, n), static_cast<Transfer*>(user)->content_range);
  return n;
}

struct Response {
  long code = 0;
  Transfer transfer;
};

Result<Response> get(const std::string& url, const std::string& range, uint64_t limit, const HttpOptions& o) {
  global_init();
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) return Internal("curl_easy_init failed");
  Response r;
  r.transfer.limit = limit;
  char err[CURL_ERROR_SIZE] = {0};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, o.max_redirects);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(o.timeout.count()));
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, static_cast<long>(o.stall_timeout.count()));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, nullptr);  // identity: byte ranges of the file itself
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE,
                   static_cast<curl_off_t>(std::min<uint64_t>(limit, INT64_MAX)));
  curl_easy_setopt(c, CURLOPT_USERAGENT, "gantry-weights");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.transfer);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.transfer);
  if (!range.empty()) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  // Custom headers (checked for CR/LF by WeightSource::url). curl sends an Authorization header given
  // here to the original host only, not to another host a redirect leads to.
  curl_slist* list = nullptr;
  for (const std::string& h : o.headers) {
    curl_slist* next = curl_slist_append(list, h.c_str());
    if (next == nullptr) {
      curl_slist_free_all(list);
      return Internal("curl_slist_append failed");
    }
    list = next;
  }
  const std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(list, &curl_slist_free_all);
  if (headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  const CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.code);
  if ((r.transfer.over_limit || rc == CURLE_FILESIZE_EXCEEDED) && r.code == 200 && !range.empty() &&
      range != "0-0")
    return Corrupt(url + ": asked for bytes " + range +
                   ", the server ignored the Range request and sent more");
  if (r.transfer.over_limit || rc == CURLE_FILESIZE_EXCEEDED)
    return ResourceExhausted(url + ": the server sent more than the " + std::to_string(limit) +
                             " bytes expected (raise the limit or check the URL)");
  if (rc == CURLE_PARTIAL_FILE)
    return IoError(url + ": truncated download: the connection closed after " +
                   std::to_string(r.transfer.body.size()) + " bytes, before the length the server announced");
  if (rc == CURLE_UNSUPPORTED_PROTOCOL)
    return InvalidArgument(url + ": only http:// and https:// are allowed (also for redirects): " + err);
  if (rc != CURLE_OK)
    return IoError(url + ": " + curl_easy_strerror(rc) + (err[0] ? std::string(" (") + err + ")" : ""));
  if (r.code == 404) return NotFound(url + ": HTTP 404 (not found)");
  if (r.code != 200 && r.code != 206)
    return IoError(url + ": HTTP " + std::to_string(r.code) + " (expected 200 or 206)");
  return r;
}

}  // namespace

Result<HttpProbe> http_probe(const std::string& url, const HttpOptions& options) {
  GANTRY_ASSIGN_OR_RETURN(Response r,
                          get(url, "0-0", std::min(options.max_bytes, options.max_unranged_bytes), options));
  return probe_answer(url,
                      HttpAnswer{r.code, std::move(r.transfer.content_range), std::move(r.transfer.body)},
                      options.max_bytes);
}

Result<std::string> http_get_range(const std::string& url, uint64_t offset, uint64_t n, uint64_t total,
                                   const HttpOptions& options) {
  if (n == 0) return std::string();
  const std::string range = std::to_string(offset) + "-" + std::to_string(offset + n - 1);
  // A server that ignores Range sends the whole file: allow reading that far only to report it.
  GANTRY_ASSIGN_OR_RETURN(Response r, get(url, range, n, options));
  return range_answer(url, offset, n, total,
                      HttpAnswer{r.code, std::move(r.transfer.content_range), std::move(r.transfer.body)});
}

}  // namespace gantry::weights
