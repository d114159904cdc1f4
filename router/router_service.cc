// RouterService handlers (see router_service.h).
#include "router/router_service.h"

#include <string>

#include "router/generate_call.h"
#include "services/common/status.h"
#include "services/common/wire_message.h"

namespace onecard::router {
namespace {

std::string Authorization(const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

absl::Status CheckKey(const RouterCore& core, grpc::CallbackServerContext* context) {
  return core.keys().Authenticate(Authorization(*context)).status();
}

// The gRPC door of a GenerateCall: chunks are written as encoded
// GenerateResponses, the end is the call's status with its trailers.
class GrpcGenerateStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                                 public ClientStream {
 public:
  GrpcGenerateStream(RouterCore* core, grpc::CallbackServerContext* context,
                     const grpc::ByteBuffer& request)
      : context_(context) {
    onecard::v1::GenerateRequest parsed_request;
    absl::Status parsed = services::ParseWireMessage(request, &parsed_request);
    ClientInfo client{FrontDoor::kGrpc, Authorization(*context),
                      services::DeadlineFromChrono(context->deadline())};
    call_ = new GenerateCall(core, this, std::move(client), std::move(parsed_request),
                             std::move(parsed));
  }
  void Start() { call_->Start(); }

  void Send(const onecard::v1::GenerateResponse& chunk) override {
    bytes_ = services::ToByteBuffer(chunk);
    StartWrite(&bytes_);
  }
  void End(const absl::Status& status) override {
    services::AddStatusTrailers(status, context_);
    Finish(services::ToGrpcStatus(status));
  }
  void OnWriteDone(bool ok) override { call_->OnWriteDone(ok); }
  void OnCancel() override { call_->OnClientCancel(); }
  void OnDone() override {
    call_->Release();
    delete this;
  }

 private:
  grpc::CallbackServerContext* const context_;
  GenerateCall* call_ = nullptr;
  grpc::ByteBuffer bytes_;  // the chunk being written
};

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(services::ToGrpcStatus(status));
  return reactor;
}

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* RouterService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  auto* stream = new GrpcGenerateStream(core_, context, *request);  // deletes itself
  stream->Start();
  return stream;
}

grpc::ServerUnaryReactor* RouterService::Tokenize(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  if (absl::Status s = CheckKey(*core_, context); !s.ok()) return Done(context, s);
  onecard::v1::TokenizeRequest parsed;
  if (absl::Status s = services::ParseWireMessage(*request, &parsed); !s.ok()) {
    return Done(context, s);
  }
  absl::StatusOr<onecard::v1::TokenizeResponse> r = core_->preparer().Tokenize(parsed);
  if (r.ok()) *response = services::ToByteBuffer(*r);
  return Done(context, r.status());
}

grpc::ServerUnaryReactor* RouterService::ListModels(grpc::CallbackServerContext* context,
                                                    const onecard::v1::ListModelsRequest*,
                                                    onecard::v1::ListModelsResponse* response) {
  if (absl::Status s = CheckKey(*core_, context); !s.ok()) return Done(context, s);
  *response = core_->preparer().ListModels();
  return Done(context, absl::OkStatus());
}

}  // namespace onecard::router
