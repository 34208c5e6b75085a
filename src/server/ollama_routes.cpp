// Ollama-compatible routes: /api/tags, /api/ps, /api/version, /api/show, /api/generate and /api/chat
// (NDJSON streams or one object, on the model's continuous-batching engine, through the same
// GenerationCall as the OpenAI routes, and the model's chat layer: tools, tool calls, thinking),
// /api/embed and the older /api/embeddings, and the repository's /api/copy, /api/delete, /api/pull.
//
// Models are the repository's text models (GGUF), listed as "<name>:latest" and found by "<name>" or
// "<name>:latest". keep_alive sets the ModelManager's keep-alive for the model when the server loads
// on demand; a server that loaded its models at start keeps them (keep_alive is then ignored, and an
// unload request is refused with what to do instead).
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "gantry/backend/chat_generation.h"
#include "gantry/hw/registry.h"
#include "gantry/model/gguf.h"
#include "gantry/model/manifest.h"
#include "gantry/model/package.h"
#include "gantry/model/sha256.h"
#include "gantry/protocol/ollama_codec.h"
#include "gantry/runtime/model_queue.h"
#include "generation_call.h"
#include "gguf_header_cache.h"
#include "ollama_pull.h"
#include "route_table.h"
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

// A chat the model cannot generate: 400 naming the part at fault (a model without a chat template
// too: /api/generate with raw takes the prompt as it is).
void send_refusal(Reply& reply, const backend::ChatRefusal& r) {
  const Status& st = r.status;
  const int code = st.code() == StatusCode::kFailedPrecondition ? 400 : http_status_for(st);
  reply.error(code,
              r.field.empty() || r.field == "model" ? st.message() : "'" + r.field + "': " + st.message());
}

// The served model a requested name means: the name itself, or "x" for "x:latest".
std::shared_ptr<const model::RepositoryEntry> find_model(Server::State& s, std::string_view requested) {
  if (auto e = s.repository.find(requested)) return e;
  const std::string untagged = ollama::untagged_name(requested);
  return untagged.empty() ? nullptr : s.repository.find(untagged);
}

std::string not_found(std::string_view requested) {
  return "model '" + std::string(requested) +
         "' not found: it is not served here (GET /api/tags lists the models)";
}

// The GGUF file of a repository entry when it is known without loading it: a .gguf file, or a package
// directory whose manifest says gguf. (A .tar package is known once loaded.)
std::optional<fs::path> gguf_file(const model::RepositoryEntry& e) {
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

// A ready model's text facet, through a handle (nullopt: not loaded, or not a text model). Taking the
// handle counts as a use of the model (its keep-alive restarts): only for requests about that model.
std::optional<backend::TextModelInfo> loaded_text_info(Server::State& s, const model::RepositoryEntry& e) {
  auto info = s.runtime.manager().info(e.runtime_name);
  if (!info || info->state != runtime::ModelState::kReady) return std::nullopt;
  auto h = s.runtime.get(e.runtime_name);
  if (!h.ok()) return std::nullopt;
  const backend::TextModel* text = h->model().text();
  if (!text) return std::nullopt;
  return text->text_info();
}

// Whether an entry is a text model: by its file's format, else (a .tar package) by the loaded model.
bool is_text(Server::State& s, const model::RepositoryEntry& e) {
  if (gguf_file(e)) return true;
  if (e.source.extension() != ".tar") return false;
  return loaded_text_info(s, e).has_value();
}

// What /api/tags and /api/show say about an entry's file: its header's facts come from the server's
// GgufHeaderCache (read once per version of the file, whatever the number of names serving it).
struct FileFacts {
  ollama::ModelEntry entry;                 // name and digest are the entry's own (set by with_name)
  std::shared_ptr<const GgufFacts> header;  // null: not a GGUF known without loading (a .tar package)
};

// The facts of a source (shared by every name that serves it), nullopt when it is not a text model.
std::optional<FileFacts> source_facts(Server::State& s, const model::RepositoryEntry& e) {
  auto path = gguf_file(e);
  if (!path && !is_text(s, e)) return std::nullopt;  // not a text model
  FileFacts f;
  f.entry.details.format = "gguf";
  const fs::path file = path.value_or(e.source);
  std::optional<FileStamp> stamp;
  if (path) {
    if (auto found = s.headers.get(*path)) {
      stamp = found->stamp;
      f.header = std::move(found->facts);
      if (f.header->readable) f.entry.details = f.header->details;
    }
  } else {
    stamp = file_stamp(file);
  }
  f.entry.size = stamp ? stamp->size : 0;
  const auto modified = stamp ? SysClock::time_point(std::chrono::duration_cast<SysClock::duration>(
                                    std::chrono::nanoseconds(stamp->mtime_ns)))
                              : SysClock::time_point{};
  f.entry.modified_at = ollama::rfc3339(modified);
  f.entry.digest = file.string();  // with_name() turns it into the entry's digest
  return f;
}

// `f` (a source's facts) as the entry `e` names it.
FileFacts with_name(FileFacts f, const model::RepositoryEntry& e) {
  f.entry.name = ollama::tagged_name(e.name);
  // Identifies this version of the file (name, path, size, modification time) without reading gigabytes
  // on every listing; it is not the file's content hash.
  f.entry.digest = model::sha256_hex(e.name + '\n' + f.entry.digest + '\n' + std::to_string(f.entry.size) +
                                     '\n' + f.entry.modified_at);
  return f;
}

std::optional<FileFacts> file_facts(Server::State& s, const model::RepositoryEntry& e) {
  auto f = source_facts(s, e);
  if (!f) return std::nullopt;
  return with_name(std::move(*f), e);
}

void tags(Server::State& s, Reply& reply) {
  std::vector<ollama::ModelEntry> models;
  // Each source once per listing, however many names (copies) serve it.
  std::map<fs::path, std::optional<FileFacts>> sources;
  for (const auto& e : s.repository.entries()) {
    auto it = sources.find(e.source);
    if (it == sources.end()) it = sources.emplace(e.source, source_facts(s, e)).first;
    if (it->second) models.push_back(with_name(*it->second, e).entry);
  }
  reply.json(200, ollama::tags_response(models));
}

void ps(Server::State& s, Reply& reply) {
  std::vector<ollama::ModelEntry> models;
  const auto sys_now = SysClock::now();
  const auto now = Clock::now();
  std::map<std::string, runtime::ModelInfo, std::less<>> loaded;
  for (auto& info : s.runtime.manager().list()) {
    if (info.state == runtime::ModelState::kReady) loaded.emplace(info.name, std::move(info));
  }
  // Every served name of a loaded model (a copy shares its original's).
  for (const auto& e : s.repository.entries()) {
    auto it = loaded.find(e.runtime_name);
    if (it == loaded.end()) continue;
    const runtime::ModelInfo& info = it->second;
    // By the file's format: a ready model's handle would count as a use and restart its keep-alive.
    if (!gguf_file(e) && e.source.extension() != ".tar") continue;
    auto f = file_facts(s, e);
    if (!f) continue;
    ollama::ModelEntry m = std::move(f->entry);
    m.size = 0;
    m.size_vram = 0;
    for (const auto& [device, bytes] : info.reserved_bytes) {
      m.size += bytes;
      if (!hw::is_host_memory(device)) m.size_vram += bytes;
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
    m.context_length = info.context_length;
    models.push_back(std::move(m));
  }
  reply.json(200, ollama::ps_response(models));
}

void show(Server::State& s, Reply& reply, const HttpRequest& request) {
  auto parsed = ollama::parse_show_request(request.body);
  if (auto* e = std::get_if<ollama::ApiError>(&parsed)) return send_error(reply, e->http_status, e->message);
  const auto& req = std::get<ollama::ShowRequest>(parsed);
  auto entry = find_model(s, req.model);
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
  // What the model can do: from its text facet when loaded, else from the GGUF file (every GGUF model
  // here generates and can pool embeddings; tools and thinking need its template, read when loaded).
  const auto text = loaded_text_info(s, *entry);
  info.capabilities = {"completion"};
  if (text && text->chat.tools) info.capabilities.push_back("tools");
  if (!text || text->embeds) info.capabilities.push_back("embedding");
  if (text && text->chat.thinking) info.capabilities.push_back("thinking");
  const bool header = f->header && f->header->readable;
  if (!text && header) {
    // Not loaded: the template decides (Ollama's own test is whether it mentions tools / thinking).
    const std::string& tmpl = f->header->chat_template;
    if (tmpl.find("tools") != std::string::npos)
      info.capabilities.insert(info.capabilities.begin() + 1, "tools");
    if (tmpl.find("enable_thinking") != std::string::npos || tmpl.find("<think>") != std::string::npos)
      info.capabilities.push_back("thinking");
  }
  std::string parameters;
  const int64_t n_ctx = text ? text->context_length : 0;  // unknown until loaded
  if (n_ctx > 0) parameters += "num_ctx " + std::to_string(n_ctx) + "\n";
  parameters += "num_predict " + std::to_string(s.options.max_tokens_default) + "\n";
  info.parameters = parameters;
  info.modelfile = "# Modelfile of '" + entry->name + "' as gantry serve runs it\nFROM " + entry->name + "\n";
  for (size_t start = 0; start < parameters.size();) {
    const size_t end = parameters.find('\n', start);
    info.modelfile += "PARAMETER " + parameters.substr(start, end - start) + "\n";
    start = end + 1;
  }
  if (header) {
    info.model_info_json = f->header->model_info;
    if (req.verbose) {
      // The arrays (the vocabulary) are asked for: read from the file for this request, never cached.
      if (auto path = gguf_file(*entry)) {
        if (auto g = model::GgufFile::open(*path); g.ok())
          info.model_info_json = ollama::gguf_model_info(*g, true);
      }
    }
    info.template_text = f->header->chat_template;
    // "<arch>.context_length": the context the model was trained with (the file's, else the facet's).
    if (text && text->trained_context > 0 && !f->header->architecture.empty()) {
      auto mi = nlohmann::json::parse(info.model_info_json, nullptr, false);
      const std::string key = f->header->architecture + ".context_length";
      if (mi.is_object() && !mi.contains(key)) {
        mi[key] = text->trained_context;
        info.model_info_json = mi.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
    }
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
  auto entry = s.repository.find(name);
  Status st = s.runtime.unload(entry ? entry->runtime_name : name);
  if (!st.ok() && st.code() != StatusCode::kNotFound)
    return send_error(reply, http_status_for(st), st.message());
  reply.json(200, ollama::load_response(req.endpoint, req.model, ollama::rfc3339(SysClock::now()), "unload"));
}

// The conversation a request gives the model: its messages (chat), or the prompt with its system
// message (generate); nullopt for a raw prompt or a model without a chat template (the prompt as it
// is, after the system text).
std::optional<backend::ChatRequest> chat_for(const backend::TextModel& text, const ollama::TextRequest& req) {
  if (req.endpoint == ollama::Endpoint::kChat) return ollama::chat_request(req);
  if (req.raw || !text.text_info().chat.present) return std::nullopt;
  ollama::TextRequest conversation = req;
  conversation.messages.clear();
  if (!req.system.empty()) conversation.messages.emplace_back("system", req.system);
  conversation.messages.emplace_back("user", req.prompt);
  return ollama::chat_request(conversation);
}

// How many tokens to generate: num_predict (negative: until the context is full) or the server's
// default, never more than the room the prompt leaves in one sequence's context (the engine would
// fail the generation when it runs out of cells, where Ollama's user expects it to stop).
int max_tokens_for(const Server::State& s, const backend::TextModel& text, const ollama::TextRequest& req,
                   const std::string& prompt) {
  int64_t room = 0;
  if (const int64_t n_ctx = text.text_info().context_length; n_ctx > 0) {
    auto tokens = text.token_count(prompt);
    if (tokens.ok()) room = n_ctx - *tokens - 1;
  }
  int64_t want = req.num_predict.value_or(s.options.max_tokens_default);
  if (want < 0) want = room;
  if (room >= 1) want = std::min(want, room);
  return static_cast<int>(std::clamp<int64_t>(want, 1, std::numeric_limits<int32_t>::max()));
}

// Streams a chat's parsed answer as Ollama does: content and thinking as they come, each tool call in
// one line once it is complete (a later call began, or the answer ended). Not thread-safe: one per
// generation, fed by its hooks in order.
class ChatStream {
 public:
  ChatStream(std::shared_ptr<backend::ChatOutputParser> parser, std::string model)
      : parser_(std::move(parser)), model_(std::move(model)) {}

  std::string add(std::string_view piece, bool final) {
    const std::string at = ollama::rfc3339(SysClock::now());
    std::string lines;
    for (const auto& d : parser_->add(piece, final)) lines += ollama::chat_delta_chunk(model_, at, d);
    const auto& calls = parser_->output().tool_calls;
    // A call is complete once another follows it, or at the end.
    const size_t complete = final ? calls.size() : (calls.empty() ? 0 : calls.size() - 1);
    if (complete > calls_sent_) {
      lines += ollama::chat_tool_calls_chunk(
          model_, at, std::span(calls).subspan(calls_sent_, complete - calls_sent_), calls_sent_);
      calls_sent_ = complete;
    }
    return lines;
  }

 private:
  std::shared_ptr<backend::ChatOutputParser> parser_;
  std::string model_;
  size_t calls_sent_ = 0;
};

void text(Server::State& s, std::shared_ptr<Reply> reply, const HttpRequest& request,
          ollama::Endpoint endpoint) {
  auto parsed = ollama::parse_text_request(request.body, endpoint);
  if (auto* e = std::get_if<ollama::ApiError>(&parsed)) return send_error(*reply, e->http_status, e->message);
  auto req = std::make_shared<const ollama::TextRequest>(std::move(std::get<ollama::TextRequest>(parsed)));
  auto entry = find_model(s, req->model);
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
  const backend::Model& model = held->model();
  if (auto refused = backend::check_generates(model, name)) return send_refusal(*reply, *refused);
  const backend::TextModel* text = model.text();
  if (load_only) {
    return reply->json(200,
                       ollama::load_response(endpoint, req->model, ollama::rfc3339(SysClock::now()), "load"));
  }
  if (req->think.value_or(false) && !text->text_info().chat.thinking) {
    return send_error(*reply, 400, "'think': model '" + req->model + "' does not support thinking");
  }
  GenerationStart start;
  start.model = name;
  start.stream = req->stream;
  start.stream_content_type = "application/x-ndjson";
  backend::GenerationRequest& g = start.request;
  const bool chat = endpoint == ollama::Endpoint::kChat;
  // A chat's answer is parsed back (content, thinking, tool calls) by the model's chat layer.
  std::shared_ptr<backend::ChatOutputParser> parser;
  if (auto conversation = chat_for(*text, *req)) {
    auto made = backend::prepare_chat(model, name, *conversation, req->generation, chat ? 1 : 0);
    if (auto* refused = std::get_if<backend::ChatRefusal>(&made)) return send_refusal(*reply, *refused);
    auto& prepared = std::get<backend::ChatGeneration>(made);
    g = std::move(prepared.request);
    if (chat) parser = std::move(prepared.parsers.front());
  } else {
    g = req->generation;
    g.prompt = req->system.empty() ? req->prompt : req->system + "\n\n" + req->prompt;
    g.render_special = false;
  }
  g.max_tokens = max_tokens_for(s, *text, *req, g.prompt);

  auto stream = parser ? std::make_shared<ChatStream>(parser, req->model) : nullptr;
  GenerationHooks hooks;
  hooks.text_event = [req, stream](std::string_view piece) {
    if (stream) return stream->add(piece, false);
    return ollama::generate_chunk(req->model, ollama::rfc3339(SysClock::now()), piece);
  };
  hooks.done = [req, chat, load_ns, held, parser, stream](Reply& reply, const backend::GenerationResult& r) {
    ollama::Timing t;
    t.total_ns = ns_since(reply.received());
    t.load_ns = load_ns;
    t.prompt_eval_ns = ms_to_ns(r.prompt_ms);
    t.eval_ns = ms_to_ns(r.generation_ms);
    if (!req->stream) {
      const std::string at = ollama::rfc3339(SysClock::now());
      if (parser) parser->add(r.text, true);
      return reply.json(200, chat ? ollama::chat_final(req->model, at, r, t, &parser->output(), false)
                                  : ollama::generate_final(req->model, at, r, t, r.text, false));
    }
    if (stream) {
      if (std::string rest = stream->add("", true); !rest.empty()) reply.event(std::move(rest));
    }
    const std::string at = ollama::rfc3339(SysClock::now());
    reply.event(chat ? ollama::chat_final(req->model, at, r, t, nullptr, true)
                     : ollama::generate_final(req->model, at, r, t, "", true));
    reply.end_stream(200);
  };
  hooks.failed = [stream = req->stream, held](Reply& reply, const Status& st, bool at_start) {
    const int code = status_for(st);
    if (!stream || at_start) return reply.error(code, st.message());  // no stream began at start
    reply.event(ollama::stream_error_line(st.message()));
    reply.end_stream(code);
  };
  start_generation_call(s, reply, held->queue(), std::move(start), std::move(hooks));
}

void embed(Server::State& s, Reply& reply, const HttpRequest& request, bool legacy) {
  auto parsed = ollama::parse_embed_request(request.body, legacy);
  if (auto* e = std::get_if<ollama::ApiError>(&parsed)) return send_error(reply, e->http_status, e->message);
  auto& req = std::get<ollama::EmbedRequest>(parsed);
  auto entry = find_model(s, req.model);
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
    // Ollama's /api/embed answers unit vectors; the older /api/embeddings the raw pooled ones.
    auto v = handle->queue().embed(req.input, !legacy, work_cancel(s, reply), reply.admission());
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

// POST /api/copy: a second name for the same model (one loaded model serves both).
void copy(Server::State& s, Reply& reply, const HttpRequest& request) {
  auto parsed = ollama::parse_copy_request(request.body);
  if (auto* e = std::get_if<ollama::ApiError>(&parsed)) return send_error(reply, e->http_status, e->message);
  const auto& req = std::get<ollama::CopyRequest>(parsed);
  auto from = find_model(s, req.source);
  if (!from) return send_error(reply, 404, not_found(req.source));
  reply.set_model(from->name);
  // "x:latest" is served as "x"; other tags keep their name.
  std::string to = ollama::untagged_name(req.destination);
  if (to.empty()) to = req.destination;
  if (!ollama::valid_model_name(to)) {
    return send_error(reply, 400,
                      "'destination': '" + req.destination.substr(0, 200) +
                          "' is not a model name (letters, digits, '_', '-', '.', and an optional ':tag')");
  }
  // Bounded (--max-model-copies): every name is listed by /api/tags and /v1/models.
  Status st = s.repository.copy(from->name, to, s.options.max_model_copies);
  if (!st.ok()) return send_error(reply, st.code() == StatusCode::kNotFound ? 404 : 400, st.message());
  GANTRY_LOG_INFO("model '{}' is also served as '{}'", from->name, to);
  reply.send(HttpResponse{});  // Ollama answers 200 with no body
}

// DELETE /api/delete: the name leaves the repository; the model is unloaded unless another name (a
// copy) still serves it. The file stays on disk.
void remove(Server::State& s, Reply& reply, const HttpRequest& request) {
  auto parsed = ollama::parse_delete_request(request.body);
  if (auto* e = std::get_if<ollama::ApiError>(&parsed)) return send_error(reply, e->http_status, e->message);
  const auto& req = std::get<ollama::DeleteRequest>(parsed);
  auto entry = find_model(s, req.model);
  if (!entry) return send_error(reply, 404, not_found(req.model));
  reply.set_model(entry->name);
  s.repository.remove(entry->name);
  if (!s.repository.in_use(entry->runtime_name)) {
    Status st = s.runtime.unload(entry->runtime_name);
    if (!st.ok() && st.code() != StatusCode::kNotFound)
      GANTRY_LOG_WARN("deleted model '{}' could not be unloaded: {}", entry->name, st.message());
  }
  GANTRY_LOG_INFO("model '{}' deleted (no longer served; {} stays on disk)", entry->name,
                  entry->source.string());
  reply.send(HttpResponse{});
}

// POST /api/pull: from --pull-source into the --model-repository directory (ollama_pull.h), then served
// under the name served_name() gives it.
void pull(Server::State& s, Reply& reply, const HttpRequest& request) {
  auto parsed = ollama::parse_pull_request(request.body);
  if (auto* e = std::get_if<ollama::ApiError>(&parsed)) return send_error(reply, e->http_status, e->message);
  const auto& req = std::get<ollama::PullRequest>(parsed);
  if (s.options.pull_source.empty()) {
    return send_error(
        reply, 501,
        "pulling is off: start gantry serve with --pull-source URL|DIR (an Ollama registry or a "
        "directory laid out like ~/.ollama/models) and --model-repository DIR");
  }
  if (s.options.model_repository.empty()) {
    return send_error(
        reply, 501,
        "pulling needs somewhere to put the model: start gantry serve with --model-repository DIR");
  }
  auto path = ollama::parse_model_path(req.model);
  if (!path.ok()) return send_error(reply, 400, "'model': " + path.status().message());
  const std::string name = ollama::served_name(*path);
  reply.set_model(name);
  if (auto existing = s.repository.find(name)) {
    const fs::path target = fs::path(s.options.model_repository) / (name + ".gguf");
    std::error_code ec;
    if (!fs::equivalent(existing->source, target, ec)) {
      return send_error(
          reply, 400,
          "'model': the name '" + name + "' is taken by " + existing->source.string() + " (delete it first)");
    }
  }
  if (req.stream) reply.begin_stream("application/x-ndjson");
  auto progress = [&](std::string line) { return !req.stream || reply.event(std::move(line)); };
  auto file = pull_model(s.options.pull_source, *path, s.options.model_repository, progress);
  Status st = file.ok() ? s.repository.add(*file) : file.status();
  if (st.ok() && !s.options.load_on_demand) {
    // A server that loads its models at start serves a pulled one at once too.
    if (auto entry = s.repository.find(name)) {
      auto loaded = s.runtime.load(entry->source.string(), s.load_options(*entry));
      if (!loaded.ok()) st = loaded.status().with_context("pulled '" + name + "', but loading it failed");
      if (loaded.ok()) s.clear_failure(entry->runtime_name);  // a pull over a file that failed at start
    }
  }
  if (!st.ok()) {
    GANTRY_LOG_WARN("pull '{}' failed: {}", req.model, st.message());
    const int code = http_status_for(st);
    if (!req.stream) return send_error(reply, code, st.message());
    reply.event(ollama::stream_error_line(st.message()));
    return reply.end_stream(code);
  }
  GANTRY_LOG_INFO("pulled '{}' into {} (served as '{}')", req.model, file->string(), name);
  if (!req.stream) return reply.json(200, ollama::pull_status("success", false));
  reply.event(ollama::pull_status("success"));
  reply.end_stream(200);
}

}  // namespace

// Ollama's API under /api: what reads state runs on the control pool (show reads the file's header,
// never loads the model), the rest on the workers.
namespace {
using Runs = Route::Runs;
using Params = const RouteParams&;

const Route kRoutes[] = {
    {.method = "GET",
     .pattern = "/api/tags",
     .protocol = Protocol::kOllama,
     .runs = Runs::kControl,
     .handle = [](Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, Params) { tags(s, *reply); }},
    {.method = "GET",
     .pattern = "/api/ps",
     .protocol = Protocol::kOllama,
     .runs = Runs::kControl,
     .handle = [](Server::State& s, std::shared_ptr<Reply> reply, HttpRequest&, Params) { ps(s, *reply); }},
    {.method = "GET",
     .pattern = "/api/version",
     .protocol = Protocol::kOllama,
     .runs = Runs::kControl,
     .handle = [](Server::State&, std::shared_ptr<Reply> reply, HttpRequest&,
                  Params) { reply->json(200, ollama::version_response(kOllamaApiVersion)); }},
    {.method = "POST",
     .pattern = "/api/show",
     .protocol = Protocol::kOllama,
     .runs = Runs::kControl,
     .handle = [](Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& r,
                  Params) { show(s, *reply, r); }},
    {.method = "POST",
     .pattern = "/api/generate",
     .protocol = Protocol::kOllama,
     .runs = Runs::kWorkers,
     .handle = [](Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& r,
                  Params) { text(s, reply, r, ollama::Endpoint::kGenerate); },
     .inference = true},
    {.method = "POST",
     .pattern = "/api/chat",
     .protocol = Protocol::kOllama,
     .runs = Runs::kWorkers,
     .handle = [](Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& r,
                  Params) { text(s, reply, r, ollama::Endpoint::kChat); },
     .inference = true},
    {.method = "POST",
     .pattern = "/api/embed",
     .protocol = Protocol::kOllama,
     .runs = Runs::kWorkers,
     .handle = [](Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& r,
                  Params) { embed(s, *reply, r, false); },
     .inference = true},
    {.method = "POST",
     .pattern = "/api/embeddings",
     .protocol = Protocol::kOllama,
     .runs = Runs::kWorkers,
     .handle = [](Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& r,
                  Params) { embed(s, *reply, r, true); },
     .inference = true},
    {.method = "POST",
     .pattern = "/api/copy",
     .protocol = Protocol::kOllama,
     .runs = Runs::kWorkers,
     .handle = [](Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& r,
                  Params) { copy(s, *reply, r); }},
    {.method = "DELETE",
     .pattern = "/api/delete",
     .protocol = Protocol::kOllama,
     .runs = Runs::kWorkers,
     .handle = [](Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& r,
                  Params) { remove(s, *reply, r); }},
    {.method = "POST",
     .pattern = "/api/pull",
     .protocol = Protocol::kOllama,
     .runs = Runs::kWorkers,
     .handle = [](Server::State& s, std::shared_ptr<Reply> reply, HttpRequest& r,
                  Params) { pull(s, *reply, r); }},
};
}  // namespace

std::span<const Route> ollama_routes() { return kRoutes; }

}  // namespace gantry::server
