// RouterService handlers (see router_service.h).
#include "router/router_service.h"

#include "router/generate_call.h"
#include "services/common/status.h"
#include "services/common/wire_message.h"

namespace onecard::router {
namespace {

absl::Status CheckKey(const RouterCore& core, grpc::CallbackServerContext* context) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  std::string_view value;
  if (it != metadata.end()) value = {it->second.data(), it->second.size()};
  return core.keys().Authenticate(value).status();
}

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(services::ToGrpcStatus(status));
  return reactor;
}

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* RouterService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  auto* call = new GenerateCall(core_, context, *request);  // deletes itself
  call->Start();
  return call;
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
