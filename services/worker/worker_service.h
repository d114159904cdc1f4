// The worker's gRPC services: onecard.v1.Worker (router -> worker, token
// ids) and onecard.v1.Generation (the public API, for direct use: text is
// tokenized with the engine's tokenizer). Callback-API handlers with no
// logic of their own: each forwards to WorkerCore.
// Tested through tests/services/worker/worker_core_test.cc and
// worker_server_test.cc (over gRPC).
#ifndef ONECARD_SERVICES_WORKER_WORKER_SERVICE_H_
#define ONECARD_SERVICES_WORKER_WORKER_SERVICE_H_

#include "onecard/v1/generation.grpc.pb.h"
#include "onecard/v1/worker.grpc.pb.h"
#include "services/worker/worker_core.h"

namespace onecard::services {

class WorkerService final : public v1::Worker::CallbackService {
 public:
  explicit WorkerService(WorkerCore* core) : core_(core) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::WorkerGenerateRequest* request) override;
  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* context,
                                    const v1::GetInfoRequest* request,
                                    v1::WorkerInfo* response) override;

 private:
  WorkerCore* const core_;
};

class GenerationService final : public v1::Generation::CallbackService {
 public:
  explicit GenerationService(WorkerCore* core) : core_(core) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;

 private:
  WorkerCore* const core_;
};

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_WORKER_WORKER_SERVICE_H_
