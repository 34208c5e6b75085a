#include "grpc_service.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server_posix.h>
#include <unistd.h>

#include <climits>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>

#include "gantry/build_info.h"
#include "gantry/core/log.h"
#include "gantry/protocol/kserve_grpc_codec.h"
#include "gantry/runtime/model_queue.h"
#include "grpc_predict_v2.grpc.pb.h"
#include "server_state.h"

namespace gantry::server {
namespace {
using Clock = std::chrono::steady_clock;
using grpc::CallbackServerContext;

// One accepted call. It counts as in flight from creation (so Server::drain waits for it) until
// finish(), which answers it once and records the request metrics with protocol "grpc" and the HTTP
// status the same answer would have had (one "code" label across protocols). A call dropped
// unanswered (a bug) answers INTERNAL rather than hanging the client and the server's shutdown.
class Call {
 public:
  using Answer = std::function<void(const grpc::Status&)>;
  // `ctx`: the call's context, valid until finish() answers (it says when the client cancelled).
  Call(Server::State& s, CallbackServerContext* ctx, Answer answer)
      : s_(s), ctx_(ctx), answer_(std::move(answer)) {
    s_.inflight.fetch_add(1);
  }
  ~Call() { finish(grpc::Status(grpc::StatusCode::INTERNAL, "internal error: the call ended unanswered")); }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  // The model the request names, the metrics label ("-" for none); set before the call is shared.
  void set_model(std::string_view model) { model_ = model.empty() ? "-" : std::string(model); }
  Clock::time_point received() const { return received_; }
  // Whose the call is (its key's tenant) and its deadline: set from the metadata before it is read.
  void set_admission(runtime::Admission a) { admission_ = std::move(a); }
  const runtime::Admission& admission() const { return admission_; }
  void finish(const grpc::Status& status) {
    if (done_.exchange(true)) return;
    s_.metrics.request(model_, protocol_name(Protocol::kGrpc),
                       protocol::kserve_grpc::http_status_for_grpc(status.error_code()),
                       std::chrono::duration<double>(Clock::now() - received_));
    answer_(status);
    s_.inflight.fetch_sub(1);
  }
  void finish(const Status& status) { finish(protocol::kserve_grpc::to_grpc(status)); }
  // Work on the call's behalf stops when this says so: the client cancelled (or its deadline passed), or
  // the server is stopping. Only while the call is unanswered (the work runs before finish()).
  backend::CancelCheck cancel_check() {
    return [this] { return s_.stopping.load(std::memory_order_relaxed) || (ctx_ && ctx_->IsCancelled()); };
  }

 private:
  Server::State& s_;
  CallbackServerContext* ctx_;
  Answer answer_;
  std::string model_ = "-";
  Clock::time_point received_ = Clock::now();
  runtime::Admission admission_;
  std::atomic<bool> done_{false};
};

class Service;

// What an RPC does with its request: answers `call` once (at once, or later from any thread), having
// filled `response`. `request` and `response` live until the call is answered.
template <class Req, class Resp>
struct Rpc {
  void (Service::*handler)(std::shared_ptr<Call> call, const Req& request, Resp& response);
  bool needs_key = true;  // false: ServerLive, ServerReady (health probes)
};

// The model a request names (for the metrics label).
template <class Req>
std::string_view model_of(const Req&) {
  return {};
}
std::string_view model_of(const inference::ModelInferRequest& r) { return r.model_name(); }
std::string_view model_of(const inference::ModelReadyRequest& r) { return r.name(); }
std::string_view model_of(const inference::ModelMetadataRequest& r) { return r.name(); }
std::string_view model_of(const inference::RepositoryModelLoadRequest& r) { return r.model_name(); }
std::string_view model_of(const inference::RepositoryModelUnloadRequest& r) { return r.model_name(); }

// The reactor of one call. Every RPC is registered as client-streaming, which a unary RPC is on the
// wire too (one message each way, then the status), so that gRPC hands the call over as soon as its
// headers have arrived: a unary registration makes gRPC's core read the whole request message first
// (whatever its size, from anyone) and only then show the call, metadata and all. Here a call without a
// valid key, or while draining, is answered from its metadata before any of its message is read (gRPC
// drops what arrives of it afterwards).
template <class Req, class Resp>
class OneRequest final : public grpc::ServerReadReactor<Req> {
 public:
  OneRequest(Service& service, CallbackServerContext* ctx, Resp* response, Rpc<Req, Resp> rpc);
  void OnReadDone(bool ok) override;
  void OnDone() override { delete this; }

 private:
  void dispatch();

  Service& service_;
  CallbackServerContext* ctx_;
  Resp* response_;
  Rpc<Req, Resp> rpc_;
  Req request_;
  std::shared_ptr<Call> call_;  // until dispatched: then the handler holds it (and answers it)
};

// Why the callback API: ModelInfer waits on a DynamicBatcher that completes on its own thread. With
// the callback API a call is a reactor that any thread may finish, so gRPC's threads only accept calls
// and hand them to the server's worker pool (as the HTTP front end does), and 32 or 1000 concurrent
// streams hold no thread while they wait. The synchronous API would park one gRPC thread per waiting
// call (its pool then caps concurrency, or grows without bound); the completion-queue API would do the
// same as this with far more code.
//
// The service is registered by hand rather than through the generated CallbackService, whose methods
// are unary (see OneRequest); the messages and the method names are those of proto/grpc_predict_v2.proto.
class Service final : public grpc::Service {
 public:
  Service(Server::State& s, size_t global_limit);

  Server::State& state() { return s_; }

  // The checks the HTTP front end makes from the header alone, made from the metadata before any of the
  // message is read: the API key (where the RPC needs one), draining. An answer when the call may not go on.
  std::optional<grpc::Status> refused_before_body(CallbackServerContext* ctx, bool needs_key) const {
    if (!needs_key) return std::nullopt;
    const auto& metadata = ctx->client_metadata();
    const bool allowed =
        s_.api_keys()->allows([&metadata](std::string_view name) -> std::optional<std::string_view> {
          auto it = metadata.find(grpc::string_ref(name.data(), name.size()));
          if (it == metadata.end()) return std::nullopt;
          return std::string_view(it->second.data(), it->second.size());
        });
    if (!allowed)
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "missing or wrong API key: send metadata 'authorization: Bearer <key>' (or "
                          "'api-key' / 'x-api-key')");
    if (s_.draining.load()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
    return std::nullopt;
  }

  // Why a call's request message did not arrive (OnReadDone(false)). A message over the receive limit
  // (--max-body-size) makes gRPC's core cancel the call itself, answering RESOURCE_EXHAUSTED "Received
  // message larger than max (N vs. LIMIT)" before this answer could; to the reactor that looks like a call
  // the client cancelled or reset, which is what this answer (for the metrics) says. A message that does
  // not parse as the request type (which a unary registration answered UNIMPLEMENTED with no text) fails
  // the read without a cancel.
  grpc::Status no_request(CallbackServerContext* ctx) const {
    if (ctx->IsCancelled())
      return grpc::Status(grpc::StatusCode::CANCELLED,
                          "no request message: the call was cancelled before it arrived (by the client, or "
                          "by gRPC for a message over the limit of " +
                              std::to_string(max_message()) + " bytes, --max-body-size)");
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "no request message: the call ended without one, or it is not a valid message of "
                        "the RPC's request type");
  }

  // The largest request message gRPC accepts (the HTTP body limit).
  int max_message() const { return static_cast<int>(std::min<uint64_t>(s_.options.max_body_bytes, INT_MAX)); }

  void server_live(std::shared_ptr<Call> call, const inference::ServerLiveRequest&,
                   inference::ServerLiveResponse& response) {
    response.set_live(!s_.watchdog || s_.watchdog->alive().ok());  // the watchdog's verdict, as HTTP's
    call->finish(grpc::Status::OK);
  }

  void server_ready(std::shared_ptr<Call> call, const inference::ServerReadyRequest&,
                    inference::ServerReadyResponse& response) {
    response.set_ready(s_.ready());
    call->finish(grpc::Status::OK);
  }

  void server_metadata(std::shared_ptr<Call> call, const inference::ServerMetadataRequest&,
                       inference::ServerMetadataResponse& response) {
    response.set_name("gantry");
    response.set_version(GANTRY_VERSION_STRING);
    response.add_extensions("binary_tensor_data");
    response.add_extensions("model_repository");
    call->finish(grpc::Status::OK);
  }

  void model_ready(std::shared_ptr<Call> call, const inference::ModelReadyRequest& request,
                   inference::ModelReadyResponse& response) {
    if (unknown_version(*call, request.name(), request.version())) return;
    auto entry = s_.repository.find(request.name());
    if (!entry)
      return call->finish(
          grpc::Status(grpc::StatusCode::NOT_FOUND, "model '" + request.name() + "' is not served here"));
    auto info = s_.runtime.manager().info(entry->runtime_name);
    response.set_ready(info && info->state == runtime::ModelState::kReady);
    call->finish(grpc::Status::OK);
  }

  void model_metadata(std::shared_ptr<Call> call, const inference::ModelMetadataRequest& request,
                      inference::ModelMetadataResponse& response) {
    if (unknown_version(*call, request.name(), request.version())) return;
    // State::model may load the model (on demand): not on a gRPC thread.
    post_task(s_.metadata_pool(), "grpc ModelMetadata", [this, call, &request, &response] {
      auto handle = s_.model(request.name());
      if (!handle.ok()) return call->finish(handle.status());
      protocol::kserve_grpc::model_metadata(request.name(), handle->model().metadata(), response);
      call->finish(grpc::Status::OK);
    });
  }

  void model_infer(std::shared_ptr<Call> call, const inference::ModelInferRequest& request,
                   inference::ModelInferResponse& response) {
    if (at_capacity(*call, request.model_name()) ||
        unknown_version(*call, request.model_name(), request.model_version()))
      return;
    // A loaded batchable model: validating and queueing is cheap (raw contents are not even copied),
    // so it happens here, saving the hop to a worker; the batcher's answer is encoded on a worker.
    // Anything that may take long (a load on demand, an unbatched inference) goes to a worker.
    if (auto loaded = s_.runtime.get(request.model_name()); loaded.ok() && loaded->queue().batched())
      return infer(call, request, response);
    post_task(s_.workers, "grpc ModelInfer",
              [this, call, &request, &response] { infer(call, request, response); });
  }

  void repository_index(std::shared_ptr<Call> call, const inference::RepositoryIndexRequest& request,
                        inference::RepositoryIndexResponse& response) {
    for (const RepositoryModel& m : server::repository_index(s_)) {
      if (request.ready() && m.state != "READY") continue;
      auto* out = response.add_models();
      out->set_name(m.name);
      out->set_version(m.version);
      out->set_state(m.state);
      out->set_reason(m.reason);
    }
    call->finish(grpc::Status::OK);
  }

  void repository_load(std::shared_ptr<Call> call, const inference::RepositoryModelLoadRequest& request,
                       inference::RepositoryModelLoadResponse&) {
    load(std::move(call), request.model_name(), true);
  }

  void repository_unload(std::shared_ptr<Call> call, const inference::RepositoryModelUnloadRequest& request,
                         inference::RepositoryModelUnloadResponse&) {
    load(std::move(call), request.model_name(), false);
  }

 private:
  template <class Req, class Resp>
  void add(const char* path, Rpc<Req, Resp> rpc) {
    AddMethod(
        new grpc::internal::RpcServiceMethod(path, grpc::internal::RpcMethod::CLIENT_STREAMING, nullptr));
    MarkMethodCallback(methods_++, new grpc::internal::CallbackClientStreamingHandler<Req, Resp>(
                                       [this, rpc](CallbackServerContext* ctx, Resp* response) {
                                         return new OneRequest<Req, Resp>(*this, ctx, response, rpc);
                                       }));
  }

  // Inference answers RESOURCE_EXHAUSTED when the server or the model's queue is full.
  bool at_capacity(Call& call, const std::string& model) {
    // This call is already counted in inflight, an HTTP request not yet: hence '>'.
    bool full = s_.inflight.load() > global_limit_;
    if (!full) full = s_.model_full(model);
    if (!full) return false;
    call.finish(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        "the server is at capacity (--max-queue " + std::to_string(s_.options.max_queue) + "); retry later"));
    return true;
  }

  bool unknown_version(Call& call, const std::string& model, const std::string& version) {
    if (version.empty() || version == "1") return false;
    call.finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                             "model '" + model + "' has no version '" + version + "' (its versions: 1)"));
    return true;
  }

  // Like the HTTP route: look up (or load) the model, parse against its metadata, run through the
  // batcher or alone, encode.
  void infer(std::shared_ptr<Call> call, const inference::ModelInferRequest& request,
             inference::ModelInferResponse& response) {
    const std::string& name = request.model_name();
    auto handle = s_.model(name);
    if (!handle.ok()) return call->finish(handle.status());
    // Aligned raw inputs point into `request` and hold `call`: the request lives until the call is
    // finished, which happens only in the done callback below, after the model has read its inputs.
    auto parsed = protocol::kserve_grpc::parse_infer_request(request, handle->model().metadata(), call);
    if (!parsed.ok()) return call->finish(parsed.status());
    // Too large for the model (RESOURCE_EXHAUSTED), or in memory it cannot bind: before any queue.
    if (Status a = backend::check_admission(handle->model().metadata(), parsed->inputs); !a.ok())
      return call->finish(a);
    auto infer = std::make_shared<kserve::InferRequest>(std::move(*parsed));
    const runtime::Admission who = call->admission();
    run_inference(
        s_, name, std::move(*handle), infer->inputs, call, call->received(),
        [call, infer, name, &response](Result<std::vector<NamedTensor>> out) {
          if (!out.ok()) return call->finish(out.status());
          call->finish(protocol::kserve_grpc::encode_infer_response(name, *infer, *out, response));
        },
        who, call->cancel_check());
  }

  void load(std::shared_ptr<Call> call, const std::string& name, bool load) {
    post_task(s_.workers, "grpc repository load", [this, call, name, load] {
      Status st = server::repository_load(s_, name, load);
      call->finish(st);
    });
  }

  Server::State& s_;
  size_t global_limit_;
  int methods_ = 0;
};

Service::Service(Server::State& s, size_t global_limit) : s_(s), global_limit_(global_limit) {
  using namespace inference;
  // The order and names of proto/grpc_predict_v2.proto's service GRPCInferenceService.
  add<ServerLiveRequest, ServerLiveResponse>("/inference.GRPCInferenceService/ServerLive",
                                             {&Service::server_live, false});
  add<ServerReadyRequest, ServerReadyResponse>("/inference.GRPCInferenceService/ServerReady",
                                               {&Service::server_ready, false});
  add<ModelReadyRequest, ModelReadyResponse>("/inference.GRPCInferenceService/ModelReady",
                                             {&Service::model_ready});
  add<ServerMetadataRequest, ServerMetadataResponse>("/inference.GRPCInferenceService/ServerMetadata",
                                                     {&Service::server_metadata});
  add<ModelMetadataRequest, ModelMetadataResponse>("/inference.GRPCInferenceService/ModelMetadata",
                                                   {&Service::model_metadata});
  add<ModelInferRequest, ModelInferResponse>("/inference.GRPCInferenceService/ModelInfer",
                                             {&Service::model_infer});
  add<RepositoryIndexRequest, RepositoryIndexResponse>("/inference.GRPCInferenceService/RepositoryIndex",
                                                       {&Service::repository_index});
  add<RepositoryModelLoadRequest, RepositoryModelLoadResponse>(
      "/inference.GRPCInferenceService/RepositoryModelLoad", {&Service::repository_load});
  add<RepositoryModelUnloadRequest, RepositoryModelUnloadResponse>(
      "/inference.GRPCInferenceService/RepositoryModelUnload", {&Service::repository_unload});
}

template <class Req, class Resp>
OneRequest<Req, Resp>::OneRequest(Service& service, CallbackServerContext* ctx, Resp* response,
                                  Rpc<Req, Resp> rpc)
    : service_(service),
      ctx_(ctx),
      response_(response),
      rpc_(rpc),
      call_(std::make_shared<Call>(service.state(), ctx,
                                   [this](const grpc::Status& st) { this->Finish(st); })) {
  if (auto refusal = service_.refused_before_body(ctx_, rpc_.needs_key)) {
    std::exchange(call_, nullptr)->finish(*refusal);
    return;
  }
  const auto& metadata = ctx_->client_metadata();
  call_->set_admission(service.state().admission(
      [&metadata](std::string_view key) -> std::optional<std::string_view> {
        auto it = metadata.find(grpc::string_ref(key.data(), key.size()));
        if (it == metadata.end()) return std::nullopt;
        return std::string_view(it->second.data(), it->second.size());
      },
      call_->received()));
  // Even the health probes' empty requests are read before the answer: finishing a call whose client
  // is still sending resets its stream, which some clients (curl) report as a failed probe.
  this->StartRead(&request_);
}

template <class Req, class Resp>
void OneRequest<Req, Resp>::OnReadDone(bool ok) {
  if (ok) return dispatch();
  std::exchange(call_, nullptr)->finish(service_.no_request(ctx_));
}

template <class Req, class Resp>
void OneRequest<Req, Resp>::dispatch() {
  std::shared_ptr<Call> call = std::exchange(call_, nullptr);
  call->set_model(model_of(request_));
  (service_.*rpc_.handler)(std::move(call), request_, *response_);
}

std::string listen_address(const std::string& host, int port) {
  std::string h = host.substr(0, host.find(','));  // of a comma list, the first
  if (h == "localhost") h = "127.0.0.1";
  if (h.find(':') != std::string::npos) h = "[" + h + "]";
  return h + ":" + std::to_string(port);
}
}  // namespace

struct GrpcServer::Impl {
  explicit Impl(Server::State& s, size_t global_limit) : service(s, global_limit) {}
  Service service;  // declared first: outlives the server that calls it
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::mutex adopt_mu;  // guards stopping against adopt()
  bool stopping = false;
};

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcServer::~GrpcServer() { stop(); }

uint16_t GrpcServer::port() const { return static_cast<uint16_t>(impl_->port); }

void GrpcServer::adopt(int fd) {
  std::lock_guard lock(impl_->adopt_mu);
  if (impl_->stopping || !impl_->server) {
    ::close(fd);
    return;
  }
  // gRPC's endpoints expect a non-blocking socket; one accepted by Asio and only waited on may not be.
  if (const int flags = ::fcntl(fd, F_GETFL); flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    GANTRY_LOG_WARN("gRPC: cannot make an h2c connection non-blocking; closing it");
    ::close(fd);
    return;
  }
  grpc::AddInsecureChannelFromFd(impl_->server.get(), fd);
}

void GrpcServer::stop() {
  {
    std::lock_guard lock(impl_->adopt_mu);
    impl_->stopping = true;
  }
  if (!impl_->server) return;
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  impl_->server->Wait();
  impl_->server.reset();
}

Result<std::unique_ptr<GrpcServer>> GrpcServer::start(Server::State& state, int port, size_t global_limit) {
  const ServeOptions& o = state.options;
  const bool same = port == kGrpcSamePort;
  if (!same && (port < 0 || port > 65535))
    return InvalidArgument(
        "--grpc-port " + std::to_string(port) +
        " is not a port (0 = any free port; -1 turns gRPC off; 'same' shares the HTTP port)");
  auto impl = std::make_unique<Impl>(state, global_limit);
  const std::string address = same ? "the HTTP port" : listen_address(o.host, port);
  grpc::ServerBuilder builder;
  if (!same) builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &impl->port);
  builder.RegisterService(&impl->service);
  // The request size limit is the HTTP body limit.
  builder.SetMaxReceiveMessageSize(impl->service.max_message());
  // What gRPC's transport may hold of requests being received, on all connections together: it buffers
  // each message whole before the service sees it, and 8 calls with the key each sending 59 MiB took the
  // peak RSS from 61 MB to 1.1 GB without a bound (340 MB with it). Over the bound gRPC resets streams
  // (RST_STREAM ENHANCE_YOUR_CALM, which gRPC maps to RESOURCE_EXHAUSTED) until it is back under; one
  // message of the largest size fits.
  grpc::ResourceQuota quota("gantry gRPC");
  quota.Resize(static_cast<size_t>(std::min<uint64_t>(grpc_memory_bound(o.max_body_bytes), SIZE_MAX)));
  builder.SetResourceQuota(quota);
  // gRPC sets SO_REUSEPORT by default: a second server would share the port silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  impl->server = builder.BuildAndStart();
  if (same && impl->server) return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl)));
  if (!impl->server || impl->port == 0)
    return Unavailable("cannot listen for gRPC on " + address +
                       " (in use, or not an address of this machine): pick another --grpc-port, or turn "
                       "gRPC off with --grpc-port -1");
  GANTRY_LOG_INFO("KServe v2 gRPC on {}", listen_address(o.host, impl->port));
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl)));
}

}  // namespace gantry::server
