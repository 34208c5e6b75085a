#include "route_table.h"

#include <array>
#include <optional>
#include <vector>

namespace gantry::server {
namespace {

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) {
      // Percent-decode a segment (a model name may hold any character).
      std::string seg;
      for (size_t k = i; k < j; ++k) {
        if (path[k] == '%' && k + 2 < j) {
          auto hex = [](char c) -> int {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
          };
          int hi = hex(path[k + 1]), lo = hex(path[k + 2]);
          if (hi >= 0 && lo >= 0) {
            seg += static_cast<char>(hi * 16 + lo);
            k += 2;
            continue;
          }
        }
        seg += path[k];
      }
      out.push_back(std::move(seg));
    }
    i = j;
  }
  return out;
}

// Whether `pattern` matches the path's segments; fills `params` with what it captured.
bool matches(std::string_view pattern, const std::vector<std::string>& segments, RouteParams& params) {
  RouteParams got;
  size_t n = 0;
  size_t i = 0;
  while (i < pattern.size()) {
    if (pattern[i] == '/') {
      ++i;
      continue;
    }
    size_t j = pattern.find('/', i);
    if (j == std::string_view::npos) j = pattern.size();
    const std::string_view want = pattern.substr(i, j - i);
    i = j;
    if (want == "**") {
      params = std::move(got);
      return true;
    }
    if (n == segments.size()) return false;
    const std::string& seg = segments[n++];
    if (want == "{model}")
      got.model = seg;
    else if (want == "{version}")
      got.version = seg;
    else if (want == "{asset}")
      got.asset = seg;
    else if (want == "{id}")
      got.id = seg;
    else if (want != seg)
      return false;
  }
  if (n != segments.size()) return false;
  params = std::move(got);
  return true;
}

bool takes(const Route& route, std::string_view method) {
  return method == route.method || (method == "HEAD" && route.method == "GET");
}

}  // namespace

RouteMatch find_route(std::string_view path, std::string_view method) {
  static const std::array<std::span<const Route>, 10> kTables = {
      kserve_routes(),    metrics_routes(),   dashboard_routes(), openai_routes(), chat_store_routes(),
      anthropic_routes(), responses_routes(), rerank_routes(),    ollama_routes(), llama_server_routes()};
  const auto segments = split_path(path);
  RouteMatch out;
  if (!segments.empty() && segments[0] == "v2") out.protocol = Protocol::kKserve;
  if (!segments.empty() && segments[0] == "v1") out.protocol = Protocol::kOpenai;
  if (segments.size() > 1 && segments[0] == "v1" && segments[1] == "messages")
    out.protocol = Protocol::kAnthropic;
  if (!segments.empty() && segments[0] == "api") out.protocol = Protocol::kOllama;
  const Route* first = nullptr;  // the first route whose pattern matches (405 when it takes another method)
  RouteParams first_params;
  std::optional<RouteParams> labels;  // what a pattern without a handler captured (a 404's labels)
  for (const auto& table : kTables) {
    for (const Route& route : table) {
      RouteParams params;
      if (!matches(route.pattern, segments, params)) continue;
      if (!route.handle) {
        if (!labels) labels = std::move(params);
      } else if (takes(route, method)) {
        out.route = &route;
        out.params = std::move(params);
        out.protocol = route.protocol;
        return out;
      } else if (!first) {
        first = &route;
        first_params = std::move(params);
      }
    }
  }
  if (first) {
    out.route = first;
    out.params = std::move(first_params);
    out.protocol = first->protocol;
  } else if (labels) {
    out.params = std::move(*labels);
  }
  return out;
}

}  // namespace gantry::server
