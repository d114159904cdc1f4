// Thin callback handlers over WorkerCore. See worker_service.h.
#include "services/worker/worker_service.h"

#include <utility>

#include "services/common/status.h"

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

}  // namespace

grpc::ServerWriteReactor<v1::GenerateResponse>* WorkerService::Generate(
    grpc::CallbackServerContext* context, const v1::WorkerGenerateRequest* request) {
  return core_->Generate(context, *request);
}

grpc::ServerUnaryReactor* WorkerService::GetInfo(grpc::CallbackServerContext* context,
                                                 const v1::GetInfoRequest* /*request*/,
                                                 v1::WorkerInfo* response) {
  return FinishUnary(context, core_->Info(), response);
}

grpc::ServerWriteReactor<v1::GenerateResponse>* GenerationService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  return core_->Generate(context, *request);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const v1::TokenizeRequest* request,
                                                      v1::TokenizeResponse* response) {
  return FinishUnary(context, core_->Tokenize(*request), response);
}

grpc::ServerUnaryReactor* GenerationService::ListModels(grpc::CallbackServerContext* context,
                                                        const v1::ListModelsRequest* /*request*/,
                                                        v1::ListModelsResponse* response) {
  return FinishUnary(context, core_->ListModels(), response);
}

}  // namespace onecard::services
