// Ollama-compatible routes: /api/tags, /api/ps, /api/version, /api/show, /api/generate and /api/chat
// (NDJSON streams or one object, on the model's continuous-batching engine, through the same
// GenerationCall as the OpenAI routes), /api/embed and the older /api/embeddings.
//
// Models are the repository's text models (GGUF), listed as "<name>:latest" and found by "<name>" or
// "<name>:latest". keep_alive sets the ModelManager's keep-alive for the model when the server loads
// on demand; a server that loaded its models at start keeps them (keep_alive is then ignored, and an
// unload request is refused with what to do instead).
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "gantry/model/gguf.h"
#include "gantry/model/manifest.h"
#include "gantry/model/package.h"
#include "gantry/model/sha256.h"
#include "gantry/server/ollama_codec.h"
#include "generation_call.h"
#include "server_state.h"

namespace gantry::server {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using SysClock = std::chrono::system_clock;

// The Ollama server version whose API these routes follow (structured outputs, /api/embed, load and
// unload answers, capabilities in /api/show). Clients gate features on it; gantry's own version is
// in GET /v2.
constexpr std::string_view kOllamaApiVersion = "0.6.0";

int64_t ns_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

int64_t ms_to_ns(double ms) { return static_cast<int64_t>(ms * 1e6); }

void send_error(Reply& reply, int status, std::string_view message) { reply.error(status, message); }

// The served model a requested name means: the name itself, or "x" for "x:latest".
const RepositoryEntry* find_model(Server::State& s, std::string_view requested) {
  if (const RepositoryEntry* e = s.repository.find(requested)) return e;
  const std::string untagged = ollama::untagged_name(requested);
  return untagged.empty() ? nullptr : s.repository.find(untagged);
}

std::string not_found(std::string_view requested) {
  return "model '" + std::string(requested) +
         "' not found: it is not served here (GET /api/tags lists the models)";
}

// The GGUF file of a repository entry when it is known without loading it: a .gguf file, or a package
// directory whose manifest says gguf. (A .tar package is known once loaded.)
std::optional<fs::path> gguf_file(const RepositoryEntry& e) {
  std::error_code ec;
  if (fs::is_directory(e.source, ec)) {
    auto m = model::read_manifest(e.source / std::string(model::kManifestFileName));
    if (m.ok() && m->format == model::ModelFormat::kGguf) return e.source / m->model_file;
    return std::nullopt;
  }
  if (e.source.extension() == ".tar") return std::nullopt;
  auto format = model::detect_model_format(e.source);
  if (format.ok() && *format == model::ModelFormat::kGguf) return e.source;
  return std::nullopt;
}

bool loaded_as_text(Server::State& s, const std::string& name) {
  auto info = s.runtime.manager().info(name);
  return info && info->state == runtime::ModelState::kReady && info->backend == "llama.cpp";
}

// What /api/tags and /api/show say about an entry's file.
struct FileFacts {
  ollama::ModelEntry entry;
  std::optional<model::GgufFile> gguf;
};

std::optional<FileFacts> file_facts(Server::State& s, const RepositoryEntry& e) {
  auto path = gguf_file(e);
  if (!path && !loaded_as_text(s, e.name)) return std::nullopt;  // not a text model
  FileFacts f;
  f.entry.name = ollama::tagged_name(e.name);
  f.entry.details.format = "gguf";
  const fs::path file = path.value_or(e.source);
  std::error_code ec;
  const uint64_t size = fs::file_size(file, ec);
  f.entry.size = ec ? 0 : size;
  const auto mtime = fs::last_write_time(file, ec);
  const auto modified = ec ? SysClock::time_point{} : std::chrono::file_clock::to_sys(mtime);
  f.entry.modified_at = ollama::rfc3339(std::chrono::time_point_cast<SysClock::duration>(modified));
  // Identifies this version of the file (name, path, size, modification time) without reading gigabytes
  // on every listing; it is not the file's content hash.
  f.entry.digest = model::sha256_hex(e.name + '\n' + file.string() + '\n' + std::to_string(f.entry.size) +
                                     '\n' + f.entry.modified_at);
  if (path) {
    auto g = model::GgufFile::open(*path);
    if (g.ok()) {
      f.entry.details = ollama::gguf_details(*g);
      f.gguf.emplace(std::move(*g));
    }
  }
  return f;
}

// The context the model runs with, when the server fixed it (--ctx-size); 0 when the backend chose.
int64_t configured_context(const Server::State& s) { return s.options.load.factory.llama.n_ctx.value_or(0); }

void tags(Server::State& s, Reply& reply) {
  std::vector<ollama::ModelEntry> models;
  for (const auto& e : s.repository.entries()) {
    if (auto f = file_facts(s, e)) models.push_back(std::move(f->entry));
  }
  reply.json(200, ollama::tags_response(models));
}

void ps(Server::State& s, Reply& reply) {
  std::vector<ollama::ModelEntry> models;
  const auto sys_now = SysClock::now();
  const auto now = Clock::now();
  for (const auto& info : s.runtime.manager().list()) {
    if (info.state != runtime::ModelState::kReady || info.backend != "llama.cpp") continue;
    const RepositoryEntry* e = s.repository.find(info.name);
    if (!e) continue;
    auto f = file_facts(s, *e);
    if (!f) continue;
    ollama::ModelEntry m = std::move(f->entry);
    m.size = 0;
    m.size_vram = 0;
    for (const auto& [device, bytes] : info.reserved_bytes) {
      m.size += bytes;
      if (device != "cpu") m.size_vram += bytes;
    }
    // Pinned or negative keep-alive: it stays (a century from now); in use: keep-alive after now.
    SysClock::time_point expires;
    if (info.pinned || info.keep_alive.count() < 0) {
      expires = sys_now + std::chrono::hours(24 * 365 * 100);
    } else if (info.handles > 0) {
      expires = sys_now + info.keep_alive;
    } else {
      expires =
          sys_now + std::chrono::duration_cast<SysClock::duration>(info.last_used + info.keep_alive - now);
    }
    m.expires_at = ollama::rfc3339(expires);
    m.context_length = configured_context(s);
    models.push_back(std::move(m));
  }
  reply.json(200, ollama::ps_response(models));
}

void show(Server::State& s, Reply& reply, const HttpRequest& request) {
  auto parsed = ollama::parse_show_request(request.body);
  if (auto* e = std::get_if<ollama::ApiError>(&parsed)) return send_error(reply, e->http_status, e->message);
  const auto& req = std::get<ollama::ShowRequest>(parsed);
  const RepositoryEntry* entry = find_model(s, req.model);
  if (!entry) return send_error(reply, 404, not_found(req.model));
  reply.set_model(entry->name);
  auto f = file_facts(s, *entry);
  if (!f) {
    return send_error(reply, 400,
                      "model '" + entry->name +
                          "' is not a text model: Ollama's API serves GGUF models (use "
                          "/v2/models/" +
                          entry->name + " for it)");
  }
  ollama::ShowInfo info;
  info.details = f->entry.details;
  info.modified_at = f->entry.modified_at;
  info.capabilities = {"completion"};
  std::string parameters;
  if (const int64_t n_ctx = configured_context(s)) parameters += "num_ctx " + std::to_string(n_ctx) + "\n";
  parameters += "num_predict " + std::to_string(s.options.max_tokens_default) + "\n";
  info.parameters = parameters;
  info.modelfile = "# Modelfile of '" + entry->name + "' as gantry serve runs it\nFROM " + entry->name + "\n";
  for (size_t start = 0; start < parameters.size();) {
    const size_t end = parameters.find('\n', start);
    info.modelfile += "PARAMETER " + parameters.substr(start, end - start) + "\n";
    start = end + 1;
  }
  if (f->gguf) {
    info.model_info_json = ollama::gguf_model_info(*f->gguf, req.verbose);
    info.template_text = f->gguf->get_string("tokenizer.chat_template").value_or("");
  }
  reply.json(200, ollama::show_response(info));
}

// The HTTP status of a failed generation or embedding (a prompt longer than the context is an
// InvalidArgument: 400).
int status_for(const Status& st) {
  if (st.code() == StatusCode::kCancelled) return 503;
  return http_status_for(st);
}

// keep_alive applies to models the server loads on demand; ones loaded at start stay for its life.
void apply_keep_alive(Server::State& s, const std::string& name,
                      std::optional<std::chrono::milliseconds> ka) {
  if (!ka || !s.options.load_on_demand) return;
  (void)s.runtime.manager().set_keep_alive(name, *ka);
}

// /api/generate or /api/chat with no prompt/messages and keep_alive 0: unload the model.
void unload(Server::State& s, Reply& reply, const ollama::TextRequest& req, const std::string& name) {
  if (!s.options.load_on_demand) {
    return send_error(reply, 400,
                      "model '" + name +
                          "' was loaded when gantry serve started and stays loaded (keep_alive "
                          "applies with --load-on-demand); unload it with POST /v2/repository/models/" +
                          name + "/unload");
  }
  Status st = s.runtime.unload(name);
  if (!st.ok() && st.code() != StatusCode::kNotFound)
    return send_error(reply, http_status_for(st), st.message());
  reply.json(200, ollama::load_response(req.endpoint, req.model, ollama::rfc3339(SysClock::now()), "unload"));
}

// The prompt a request gives the model: the conversation (chat) or the prompt (generate) in the
// model's chat template; a raw prompt, or one for a model without a template, as it is.
Result<std::string> build_prompt(const backend::Model& model, const ollama::TextRequest& req) {
  if (req.endpoint == ollama::Endpoint::kChat) return model.format_chat(req.messages, true);
  if (req.raw) return req.prompt;
  const auto& props = model.metadata().properties;
  auto t = props.find("chat_template");
  if (t != props.end() && t->second == "yes") {
    std::vector<backend::ChatMessage> messages;
    if (!req.system.empty()) messages.push_back({"system", req.system});
    messages.push_back({"user", req.prompt});
    return model.format_chat(messages, true);
  }
  return req.system.empty() ? req.prompt : req.system + "\n\n" + req.prompt;
}

// How many tokens to generate: num_predict (negative: until the context is full) or the server's
// default, never more than the room the prompt leaves in one sequence's context (the engine would
// fail the generation when it runs out of cells, where Ollama's user expects it to stop).
int max_tokens_for(const Server::State& s, const backend::Model& model, const ollama::TextRequest& req,
                   const std::string& prompt) {
  const auto& props = model.metadata().properties;
  int64_t room = 0;
  auto ctx = props.find("n_ctx");
  auto parallel = props.find("parallel");
  if (ctx != props.end()) {
    const int64_t n_ctx = std::atoll(ctx->second.c_str());
    const int64_t n_seq =
        parallel != props.end() ? std::max<int64_t>(1, std::atoll(parallel->second.c_str())) : 1;
    auto tokens = model.token_count(prompt);
    if (tokens.ok()) room = n_ctx / n_seq - *tokens - 1;
  }
  int64_t want = req.num_predict.value_or(s.options.max_tokens_default);
  if (want < 0) want = room;
  if (room >= 1) want = std::min(want, room);
  return static_cast<int>(std::clamp<int64_t>(want, 1, std::numeric_limits<int32_t>::max()));
}

void text(Server::State& s, std::shared_ptr<Reply> reply, const HttpRequest& request,
          ollama::Endpoint endpoint) {
  auto parsed = ollama::parse_text_request(request.body, endpoint);
  if (auto* e = std::get_if<ollama::ApiError>(&parsed)) return send_error(*reply, e->http_status, e->message);
  auto req = std::make_shared<const ollama::TextRequest>(std::move(std::get<ollama::TextRequest>(parsed)));
  const RepositoryEntry* entry = find_model(s, req->model);
  if (!entry) return send_error(*reply, 404, not_found(req->model));
  const std::string name = entry->name;
  reply->set_model(name);
  const bool load_only = ollama::is_load_only(*req);
  if (load_only && req->keep_alive && req->keep_alive->count() == 0) return unload(s, *reply, *req, name);

  const auto t0 = Clock::now();
  auto handle = s.model(name);
  const int64_t load_ns = ns_since(t0);
  if (!handle.ok()) return send_error(*reply, http_status_for(handle.status()), handle.status().message());
  apply_keep_alive(s, name, req->keep_alive);
  // The hooks hold the handle until the generation ends: the model is in use (never evicted or
  // expired) meanwhile, and keep_alive counts from the answer, as Ollama's does.
  auto held = std::make_shared<runtime::ModelHandle>(std::move(*handle));
  backend::Model& model = held->model();
  const backend::ModelMetadata& md = model.metadata();
  if (md.properties.find("n_ctx") == md.properties.end()) {
    return send_error(*reply, 400,
                      "model '" + name + "' does not generate text (" + md.backend + "); use /v2/models/" +
                          name + "/infer");
  }
  if (load_only) {
    return reply->json(200,
                       ollama::load_response(endpoint, req->model, ollama::rfc3339(SysClock::now()), "load"));
  }
  if (!admit_generation(s, *reply, name, md)) return;
  auto prompt = build_prompt(model, *req);
  if (!prompt.ok()) {
    s.release(name);
    return send_error(*reply, 400, prompt.status().message());
  }
  GenerationStart start;
  start.model = name;
  start.stream = req->stream;
  start.stream_content_type = "application/x-ndjson";
  backend::GenerationRequest& g = start.request;
  g = req->generation;
  g.max_tokens = max_tokens_for(s, model, *req, *prompt);
  g.prompt = std::move(*prompt);
  g.render_special = false;

  const bool chat = endpoint == ollama::Endpoint::kChat;
  GenerationHooks hooks;
  hooks.text_event = [req, chat](std::string_view piece) {
    const std::string at = ollama::rfc3339(SysClock::now());
    return chat ? ollama::chat_chunk(req->model, at, piece) : ollama::generate_chunk(req->model, at, piece);
  };
  hooks.done = [req, chat, load_ns, held](Reply& reply, const backend::GenerationResult& r) {
    ollama::Timing t;
    t.total_ns = ns_since(reply.received());
    t.load_ns = load_ns;
    t.prompt_eval_ns = ms_to_ns(r.prompt_ms);
    t.eval_ns = ms_to_ns(r.generation_ms);
    const std::string at = ollama::rfc3339(SysClock::now());
    const std::string_view body_text = req->stream ? std::string_view() : std::string_view(r.text);
    std::string body = chat ? ollama::chat_final(req->model, at, r, t, body_text, req->stream)
                            : ollama::generate_final(req->model, at, r, t, body_text, req->stream);
    if (!req->stream) return reply.json(200, std::move(body));
    reply.event(std::move(body));
    reply.end_stream(200);
  };
  hooks.failed = [stream = req->stream, held](Reply& reply, const Status& st, bool at_start) {
    const int code = status_for(st);
    if (!stream || at_start) return reply.error(code, st.message());  // no stream began at start
    reply.event(ollama::stream_error_line(st.message()));
    reply.end_stream(code);
  };
  start_generation_call(s, reply, model, std::move(start), std::move(hooks));
}

void embed(Server::State& s, Reply& reply, const HttpRequest& request, bool legacy) {
  auto parsed = ollama::parse_embed_request(request.body, legacy);
  if (auto* e = std::get_if<ollama::ApiError>(&parsed)) return send_error(reply, e->http_status, e->message);
  auto& req = std::get<ollama::EmbedRequest>(parsed);
  const RepositoryEntry* entry = find_model(s, req.model);
  if (!entry) return send_error(reply, 404, not_found(req.model));
  const std::string name = entry->name;
  reply.set_model(name);
  const auto t0 = Clock::now();
  auto handle = s.model(name);
  const int64_t load_ns = ns_since(t0);
  if (!handle.ok()) return send_error(reply, http_status_for(handle.status()), handle.status().message());
  apply_keep_alive(s, name, req.keep_alive);
  std::vector<std::vector<float>> vectors;
  int tokens = 0;
  if (!req.input.empty()) {
    if (!s.admit(name, 1)) return send_error(reply, 429, "model '" + name + "' is at capacity; retry later");
    // Ollama's /api/embed answers unit vectors; the older /api/embeddings the raw pooled ones.
    auto v = handle->model().embed(req.input, !legacy);
    s.release(name);
    if (!v.ok()) return send_error(reply, status_for(v.status()), v.status().message());
    vectors = std::move(*v);
    for (const auto& text : req.input) {
      auto n = handle->model().token_count(text);
      if (n.ok()) tokens += *n;
    }
  }
  if (legacy)
    return reply.json(200, ollama::embeddings_response(vectors.empty() ? std::vector<float>{} : vectors[0]));
  if (req.dimensions) ollama::truncate_embeddings(vectors, static_cast<size_t>(*req.dimensions));
  ollama::Timing t;
  t.total_ns = ns_since(reply.received());
  t.load_ns = load_ns;
  reply.json(200, ollama::embed_response(req.model, vectors, t, tokens));
}

}  // namespace

void ollama_route(Server::State& s, std::shared_ptr<Reply> reply, HttpRequest request, OllamaRoute route) {
  switch (route) {
    case OllamaRoute::kTags:
      return tags(s, *reply);
    case OllamaRoute::kPs:
      return ps(s, *reply);
    case OllamaRoute::kVersion:
      return reply->json(200, ollama::version_response(kOllamaApiVersion));
    case OllamaRoute::kShow:
      return show(s, *reply, request);
    case OllamaRoute::kGenerate:
      return text(s, reply, request, ollama::Endpoint::kGenerate);
    case OllamaRoute::kChat:
      return text(s, reply, request, ollama::Endpoint::kChat);
    case OllamaRoute::kEmbed:
      return embed(s, *reply, request, false);
    case OllamaRoute::kEmbeddings:
      return embed(s, *reply, request, true);
  }
  reply->error(404, "no route");
}

}  // namespace gantry::server
