// RouterService: the router's onecard.v1.Generation service. Handlers hold
// no logic: Generate starts a GenerateCall (its gRPC door writes the chunks
// and ends the call with its status and trailers); Tokenize and ListModels check
// the API key and answer from the RequestPreparer. Generate and Tokenize are
// raw methods (services/common/wire_message.h), so that invalid UTF-8 is
// INVALID_ARGUMENT naming the field, not gRPC's empty UNIMPLEMENTED.
// Tested by tests/router/router_service_test.cc (over gRPC, fake workers).
#ifndef ONECARD_ROUTER_ROUTER_SERVICE_H_
#define ONECARD_ROUTER_ROUTER_SERVICE_H_

#include "onecard/v1/generation.grpc.pb.h"
#include "router/router_core.h"

namespace onecard::router {

using RouterServiceBase = onecard::v1::Generation::WithRawCallbackMethod_Generate<
    onecard::v1::Generation::WithRawCallbackMethod_Tokenize<
        onecard::v1::Generation::WithCallbackMethod_ListModels<onecard::v1::Generation::Service>>>;

class RouterService final : public RouterServiceBase {
 public:
  explicit RouterService(RouterCore* core) : core_(core) {}

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const onecard::v1::ListModelsRequest* request,
                                       onecard::v1::ListModelsResponse* response) override;

 private:
  RouterCore* const core_;
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_ROUTER_SERVICE_H_
