// The worker's gRPC services: onecard.v1.Worker (router -> worker, token
// ids) and onecard.v1.Generation (the public API, for direct use: text is
// tokenized with the engine's tokenizer). Callback-API handlers with no
// logic of their own: each forwards to WorkerCore. The methods that take
// client strings are raw (services/common/wire_message.h), so that invalid
// UTF-8 is INVALID_ARGUMENT naming the field, not gRPC's empty UNIMPLEMENTED.
// Every method but health needs the router role (ServiceAuth; a refusal is
// logged): a client cannot skip the router's tenants, limits and priorities.
// Tested through tests/services/worker/worker_core_test.cc and
// worker_server_test.cc (over gRPC).
#ifndef ONECARD_SERVICES_WORKER_WORKER_SERVICE_H_
#define ONECARD_SERVICES_WORKER_WORKER_SERVICE_H_

#include <memory>
#include <utility>

#include "grpcpp/support/byte_buffer.h"
#include "onecard/v1/generation.grpc.pb.h"
#include "onecard/v1/worker.grpc.pb.h"
#include "services/common/service_auth.h"
#include "services/worker/worker_core.h"

namespace onecard::services {

using WorkerServiceBase = v1::Worker::WithRawCallbackMethod_Generate<
    v1::Worker::WithCallbackMethod_GetInfo<v1::Worker::Service>>;
using GenerationServiceBase =
    v1::Generation::WithRawCallbackMethod_Generate<v1::Generation::WithRawCallbackMethod_Tokenize<
        v1::Generation::WithCallbackMethod_ListModels<v1::Generation::Service>>>;

class WorkerService final : public WorkerServiceBase {
 public:
  // `auth` null: every caller is trusted.
  WorkerService(WorkerCore* core, std::shared_ptr<const ServiceAuth> auth)
      : core_(core), auth_(std::move(auth)) {}

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* context,
                                    const v1::GetInfoRequest* request,
                                    v1::WorkerInfo* response) override;

 private:
  WorkerCore* const core_;
  const std::shared_ptr<const ServiceAuth> auth_;
};

class GenerationService final : public GenerationServiceBase {
 public:
  // `auth` null: every caller is trusted.
  GenerationService(WorkerCore* core, std::shared_ptr<const ServiceAuth> auth)
      : core_(core), auth_(std::move(auth)) {}

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;

 private:
  WorkerCore* const core_;
  const std::shared_ptr<const ServiceAuth> auth_;
};

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_WORKER_WORKER_SERVICE_H_
