#include "grpc_service.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <unistd.h>

#include <climits>
#include <mutex>

#include "gantry/build_info.h"
#include "gantry/core/log.h"
#include "grpc_codec.h"
#include "grpc_predict_v2.grpc.pb.h"
#include "server_state.h"

namespace gantry::server {
namespace {
using Clock = std::chrono::steady_clock;
using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;

// One accepted call. It counts as in flight from creation (so Server::drain waits for it) until
// finish(), which answers it once and records the request metrics with protocol "grpc" and the HTTP
// status the same answer would have had (one "code" label across protocols). A call dropped
// unanswered (a bug) answers INTERNAL rather than hanging the client and the server's shutdown.
class Call {
 public:
  Call(Server::State& s, CallbackServerContext* ctx, std::string model)
      : s_(s), reactor_(ctx->DefaultReactor()), model_(model.empty() ? "-" : std::move(model)) {
    s_.inflight.fetch_add(1);
  }
  ~Call() { finish(grpc::Status(grpc::StatusCode::INTERNAL, "internal error: the call ended unanswered")); }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  ServerUnaryReactor* reactor() const { return reactor_; }
  Clock::time_point received() const { return received_; }
  void finish(const grpc::Status& status) {
    if (done_.exchange(true)) return;
    s_.metrics.request(model_, protocol_name(Protocol::kGrpc),
                       grpc_codec::http_status_for_grpc(status.error_code()),
                       std::chrono::duration<double>(Clock::now() - received_));
    reactor_->Finish(status);
    s_.inflight.fetch_sub(1);
  }
  void finish(const Status& status) { finish(grpc_codec::to_grpc(status)); }

 private:
  Server::State& s_;
  ServerUnaryReactor* reactor_;
  std::string model_;
  Clock::time_point received_ = Clock::now();
  std::atomic<bool> done_{false};
};

// Why the callback API: ModelInfer waits on a DynamicBatcher that completes on its own thread. With
// the callback API a call is a reactor that any thread may finish, so gRPC's threads only accept calls
// and hand them to the server's worker pool (as the HTTP front end does), and 32 or 1000 concurrent
// streams hold no thread while they wait. The synchronous API would park one gRPC thread per waiting
// call (its pool then caps concurrency, or grows without bound); the completion-queue API would do the
// same as this with far more code.
class Service final : public inference::GRPCInferenceService::CallbackService {
 public:
  Service(Server::State& s, size_t global_limit) : s_(s), global_limit_(global_limit) {}

  ServerUnaryReactor* ServerLive(CallbackServerContext* ctx, const inference::ServerLiveRequest*,
                                 inference::ServerLiveResponse* response) override {
    Call call(s_, ctx, "");
    response->set_live(!s_.watchdog || s_.watchdog->alive().ok());  // the watchdog's verdict, as HTTP's
    call.finish(grpc::Status::OK);
    return call.reactor();
  }

  ServerUnaryReactor* ServerReady(CallbackServerContext* ctx, const inference::ServerReadyRequest*,
                                  inference::ServerReadyResponse* response) override {
    Call call(s_, ctx, "");
    response->set_ready(s_.ready());
    call.finish(grpc::Status::OK);
    return call.reactor();
  }

  ServerUnaryReactor* ServerMetadata(CallbackServerContext* ctx, const inference::ServerMetadataRequest*,
                                     inference::ServerMetadataResponse* response) override {
    Call call(s_, ctx, "");
    if (refused(call, ctx)) return call.reactor();
    response->set_name("gantry");
    response->set_version(GANTRY_VERSION_STRING);
    response->add_extensions("binary_tensor_data");
    response->add_extensions("model_repository");
    call.finish(grpc::Status::OK);
    return call.reactor();
  }

  ServerUnaryReactor* ModelReady(CallbackServerContext* ctx, const inference::ModelReadyRequest* request,
                                 inference::ModelReadyResponse* response) override {
    Call call(s_, ctx, request->name());
    if (refused(call, ctx) || unknown_version(call, request->name(), request->version()))
      return call.reactor();
    auto entry = s_.repository.find(request->name());
    if (!entry) {
      call.finish(
          grpc::Status(grpc::StatusCode::NOT_FOUND, "model '" + request->name() + "' is not served here"));
      return call.reactor();
    }
    auto info = s_.runtime.manager().info(entry->runtime_name);
    response->set_ready(info && info->state == runtime::ModelState::kReady);
    call.finish(grpc::Status::OK);
    return call.reactor();
  }

  ServerUnaryReactor* ModelMetadata(CallbackServerContext* ctx,
                                    const inference::ModelMetadataRequest* request,
                                    inference::ModelMetadataResponse* response) override {
    auto call = std::make_shared<Call>(s_, ctx, request->name());
    if (refused(*call, ctx) || unknown_version(*call, request->name(), request->version()))
      return call->reactor();
    // State::model may load the model (on demand): not on a gRPC thread.
    post_task(s_.metadata_pool(), "grpc ModelMetadata", [this, call, request, response] {
      auto handle = s_.model(request->name());
      if (!handle.ok()) return call->finish(handle.status());
      grpc_codec::model_metadata(request->name(), handle->model().metadata(), *response);
      call->finish(grpc::Status::OK);
    });
    return call->reactor();
  }

  ServerUnaryReactor* ModelInfer(CallbackServerContext* ctx, const inference::ModelInferRequest* request,
                                 inference::ModelInferResponse* response) override {
    auto call = std::make_shared<Call>(s_, ctx, request->model_name());
    if (refused(*call, ctx, request->model_name()) ||
        unknown_version(*call, request->model_name(), request->model_version()))
      return call->reactor();
    // A loaded batchable model: validating and queueing is cheap (raw contents are not even copied),
    // so it happens here, saving the hop to a worker; the batcher's answer is encoded on a worker.
    // Anything that may take long (a load on demand, an unbatched inference) goes to a worker.
    if (s_.options.dynamic_batching) {
      auto loaded = s_.runtime.get(request->model_name());
      if (loaded.ok() && loaded->model().metadata().batchable) {
        infer(call, *request, *response);
        return call->reactor();
      }
    }
    post_task(s_.workers, "grpc ModelInfer",
              [this, call, request, response] { infer(call, *request, *response); });
    return call->reactor();
  }

  ServerUnaryReactor* RepositoryIndex(CallbackServerContext* ctx,
                                      const inference::RepositoryIndexRequest* request,
                                      inference::RepositoryIndexResponse* response) override {
    Call call(s_, ctx, "");
    if (refused(call, ctx)) return call.reactor();
    for (const RepositoryModel& m : repository_index(s_)) {
      if (request->ready() && m.state != "READY") continue;
      auto* out = response->add_models();
      out->set_name(m.name);
      out->set_version(m.version);
      out->set_state(m.state);
      out->set_reason(m.reason);
    }
    call.finish(grpc::Status::OK);
    return call.reactor();
  }

  ServerUnaryReactor* RepositoryModelLoad(CallbackServerContext* ctx,
                                          const inference::RepositoryModelLoadRequest* request,
                                          inference::RepositoryModelLoadResponse*) override {
    return load(ctx, request->model_name(), true);
  }

  ServerUnaryReactor* RepositoryModelUnload(CallbackServerContext* ctx,
                                            const inference::RepositoryModelUnloadRequest* request,
                                            inference::RepositoryModelUnloadResponse*) override {
    return load(ctx, request->model_name(), false);
  }

 private:
  // Answers the call when it may not go on (no key, draining, full) and says so: the checks the HTTP
  // front end makes from the header alone. `model` is set for inference (capacity is checked).
  bool refused(Call& call, CallbackServerContext* ctx, const std::string* model = nullptr) {
    const auto& metadata = ctx->client_metadata();
    const bool allowed =
        s_.keys.allows([&metadata](std::string_view name) -> std::optional<std::string_view> {
          auto it = metadata.find(grpc::string_ref(name.data(), name.size()));
          if (it == metadata.end()) return std::nullopt;
          return std::string_view(it->second.data(), it->second.size());
        });
    if (!allowed) {
      call.finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                               "missing or wrong API key: send metadata 'authorization: Bearer <key>' (or "
                               "'api-key' / 'x-api-key')"));
      return true;
    }
    if (s_.draining.load()) {
      call.finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
      return true;
    }
    if (model) {
      // This call is already counted in inflight, an HTTP request not yet: hence '>'.
      bool full = s_.inflight.load() > global_limit_;
      if (!full) {
        std::lock_guard lock(s_.mu);
        auto b = s_.batchers.find(*model);
        full = b != s_.batchers.end() && b->second->depth() >= s_.options.max_queue;
      }
      if (full) {
        call.finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 "the server is at capacity (--max-queue " +
                                     std::to_string(s_.options.max_queue) + "); retry later"));
        return true;
      }
    }
    return false;
  }
  bool refused(Call& call, CallbackServerContext* ctx, const std::string& model) {
    return refused(call, ctx, &model);
  }

  bool unknown_version(Call& call, const std::string& model, const std::string& version) {
    if (version.empty() || version == "1") return false;
    call.finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                             "model '" + model + "' has no version '" + version + "' (its versions: 1)"));
    return true;
  }

  // Runs on a worker, like the HTTP route: look up (or load) the model, parse against its metadata,
  // run through the batcher or alone, encode.
  void infer(std::shared_ptr<Call> call, const inference::ModelInferRequest& request,
             inference::ModelInferResponse& response) {
    const std::string& name = request.model_name();
    auto handle = s_.model(name);
    if (!handle.ok()) return call->finish(handle.status());
    // Aligned raw inputs point into `request` and hold `call`: gRPC keeps `request` until the call is
    // finished, which happens only in the done callback below, after the model has read its inputs.
    auto parsed = grpc_codec::parse_infer_request(request, handle->model().metadata(), call);
    if (!parsed.ok()) return call->finish(parsed.status());
    // Too large for the model (RESOURCE_EXHAUSTED), or in memory it cannot bind: before any queue.
    if (Status a = backend::check_admission(handle->model().metadata(), parsed->inputs); !a.ok())
      return call->finish(a);
    auto infer = std::make_shared<kserve::InferRequest>(std::move(*parsed));
    run_inference(s_, name, std::move(*handle), infer->inputs, call, call->received(),
                  [call, infer, name, &response](Result<std::vector<NamedTensor>> out) {
                    if (!out.ok()) return call->finish(out.status());
                    call->finish(grpc_codec::encode_infer_response(name, *infer, *out, response));
                  });
  }

  ServerUnaryReactor* load(CallbackServerContext* ctx, const std::string& name, bool load) {
    auto call = std::make_shared<Call>(s_, ctx, name);
    if (refused(*call, ctx)) return call->reactor();
    post_task(s_.workers, "grpc repository load", [this, call, name, load] {
      Status st = repository_load(s_, name, load);
      call->finish(st);
    });
    return call->reactor();
  }

  Server::State& s_;
  size_t global_limit_;
};

std::string listen_address(const std::string& host, int port) {
  std::string h = host == "localhost" ? "127.0.0.1" : host;
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
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<uint64_t>(o.max_body_bytes, INT_MAX)));
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
