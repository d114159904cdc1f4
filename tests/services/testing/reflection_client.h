// ListServicesByReflection: a gRPC server reflection client (the protocol
// grpcurl uses, grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo)
// that asks a server for its services. The messages are encoded and decoded
// by hand from their field numbers in grpc's reflection.proto
// (ServerReflectionRequest.list_services = 7;
// ServerReflectionResponse.list_services_response = 6;
// ListServiceResponse.service = 1; ServiceResponse.name = 1), since the
// installed gRPC ships no reflection headers; what the server sends is
// parsed by protobuf's wire parser.
// Tested through tests/integration/ops_grpc_services_test.cc.
#ifndef ONECARD_TESTS_SERVICES_TESTING_REFLECTION_CLIENT_H_
#define ONECARD_TESTS_SERVICES_TESTING_REFLECTION_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"

namespace onecard::testing {

// The full names of the services `channel`'s server lists, in its order.
absl::StatusOr<std::vector<std::string>> ListServicesByReflection(
    const std::shared_ptr<grpc::Channel>& channel);

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_SERVICES_TESTING_REFLECTION_CLIENT_H_
