// Thin callback handlers over WorkerCore. See worker_service.h.
#include "services/worker/worker_service.h"

#include <utility>

#include "engine/common/log.h"
#include "services/common/status.h"
#include "services/common/wire_message.h"

namespace onecard::services {
namespace {

// OK when the caller proved the router role (or nobody is checked); a
// refusal is logged with the caller's address.
absl::Status CallerIsRouter(const ServiceAuth* auth, const grpc::CallbackServerContext& context,
                            const char* method) {
  if (auth == nullptr) return absl::OkStatus();
  absl::StatusOr<ServicePeer> peer = auth->Authorize(context, ServiceRole::kRouter);
  if (peer.ok()) return absl::OkStatus();
  Log(LogLevel::kWarn, "worker", "refused %s from %s: %s", method, context.peer(),
      peer.status().ToString());
  return peer.status();
}

// Finishes a unary call with `result`'s status, copying its value out.
template <typename T>
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      absl::StatusOr<T> result, T* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (result.ok()) *response = *std::move(result);
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

// Checks the caller, parses a raw Generate request and starts its stream,
// or refuses it.
template <typename Request>
WorkerCore::Reactor* StartGenerate(WorkerCore* core, const ServiceAuth* auth,
                                   grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer& bytes) {
  if (absl::Status caller = CallerIsRouter(auth, *context, "Generate"); !caller.ok()) {
    return core->Reject(context, std::move(caller));
  }
  Request request;
  if (absl::Status parsed = ParseWireMessage(bytes, &request); !parsed.ok()) {
    return core->Reject(context, std::move(parsed));
  }
  return core->Generate(context, request);
}

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* WorkerService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return StartGenerate<v1::WorkerGenerateRequest>(core_, auth_.get(), context, *request);
}

grpc::ServerUnaryReactor* WorkerService::GetInfo(grpc::CallbackServerContext* context,
                                                 const v1::GetInfoRequest* /*request*/,
                                                 v1::WorkerInfo* response) {
  absl::Status caller = CallerIsRouter(auth_.get(), *context, "GetInfo");
  return FinishUnary(context, caller.ok() ? core_->Info() : caller, response);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return StartGenerate<v1::GenerateRequest>(core_, auth_.get(), context, *request);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  v1::TokenizeRequest parsed;
  absl::Status status = CallerIsRouter(auth_.get(), *context, "Tokenize");
  if (status.ok()) status = ParseWireMessage(*request, &parsed);
  absl::StatusOr<v1::TokenizeResponse> result = status.ok() ? core_->Tokenize(parsed) : status;
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (result.ok()) *response = ToByteBuffer(*result);
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

grpc::ServerUnaryReactor* GenerationService::ListModels(grpc::CallbackServerContext* context,
                                                        const v1::ListModelsRequest* /*request*/,
                                                        v1::ListModelsResponse* response) {
  absl::Status caller = CallerIsRouter(auth_.get(), *context, "ListModels");
  return FinishUnary(context, caller.ok() ? core_->ListModels() : caller, response);
}

}  // namespace onecard::services
