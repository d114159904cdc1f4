// RouterService: the router's onecard.v1.Generation service. Handlers hold
// no logic: Generate starts a GenerateCall; Tokenize and ListModels check
// the API key and answer from the RequestPreparer.
// Tested by tests/router/router_service_test.cc (over gRPC, fake workers).
#ifndef ONECARD_ROUTER_ROUTER_SERVICE_H_
#define ONECARD_ROUTER_ROUTER_SERVICE_H_

#include "onecard/v1/generation.grpc.pb.h"
#include "router/router_core.h"

namespace onecard::router {

class RouterService final : public onecard::v1::Generation::CallbackService {
 public:
  explicit RouterService(RouterCore* core) : core_(core) {}

  grpc::ServerWriteReactor<onecard::v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const onecard::v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const onecard::v1::TokenizeRequest* request,
                                     onecard::v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const onecard::v1::ListModelsRequest* request,
                                       onecard::v1::ListModelsResponse* response) override;

 private:
  RouterCore* const core_;
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_ROUTER_SERVICE_H_
