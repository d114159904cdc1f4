// Thin callback handlers over WorkerCore. See worker_service.h.
#include "services/worker/worker_service.h"

#include <utility>

#include "services/common/status.h"
#include "services/common/wire_message.h"

namespace onecard::services {
namespace {

// Finishes a unary call with `result`'s status, copying its value out.
template <typename T>
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      absl::StatusOr<T> result, T* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (result.ok()) *response = *std::move(result);
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

// Parses a raw Generate request and starts its stream, or refuses it.
template <typename Request>
WorkerCore::Reactor* StartGenerate(WorkerCore* core, grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer& bytes) {
  Request request;
  if (absl::Status parsed = ParseWireMessage(bytes, &request); !parsed.ok()) {
    return core->Reject(context, std::move(parsed));
  }
  return core->Generate(context, request);
}

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* WorkerService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return StartGenerate<v1::WorkerGenerateRequest>(core_, context, *request);
}

grpc::ServerUnaryReactor* WorkerService::GetInfo(grpc::CallbackServerContext* context,
                                                 const v1::GetInfoRequest* /*request*/,
                                                 v1::WorkerInfo* response) {
  return FinishUnary(context, core_->Info(), response);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return StartGenerate<v1::GenerateRequest>(core_, context, *request);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  v1::TokenizeRequest parsed;
  const absl::Status parse = ParseWireMessage(*request, &parsed);
  absl::StatusOr<v1::TokenizeResponse> result = parse.ok() ? core_->Tokenize(parsed) : parse;
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (result.ok()) *response = ToByteBuffer(*result);
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

grpc::ServerUnaryReactor* GenerationService::ListModels(grpc::CallbackServerContext* context,
                                                        const v1::ListModelsRequest* /*request*/,
                                                        v1::ListModelsResponse* response) {
  return FinishUnary(context, core_->ListModels(), response);
}

}  // namespace onecard::services
