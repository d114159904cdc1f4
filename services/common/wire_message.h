// Requests parsed by the services themselves, from the bytes gRPC received.
//
// Why: gRPC's generated handlers parse a request before calling the service,
// and a proto3 message whose string field holds invalid UTF-8 fails to parse;
// the callback API then answers UNIMPLEMENTED with an empty message, as if
// the method did not exist (grpcpp/impl/codegen/server_callback_handlers.h:
// a failed deserialization leaves no reactor, and an UnimplementedReactor
// finishes the call). The services register the methods that take client
// strings as raw methods (WithRawCallbackMethod_*), parse here, and answer
// INVALID_ARGUMENT naming the field ("messages.messages[1].content: not
// valid UTF-8"). Responses are serialized here too (raw methods send bytes).
// Tested by tests/services/common/wire_message_test.cc.
#ifndef ONECARD_SERVICES_COMMON_WIRE_MESSAGE_H_
#define ONECARD_SERVICES_COMMON_WIRE_MESSAGE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace onecard::services {

// Parses `bytes` into *out (cleared first). InvalidArgument naming the field
// when a string field is not valid UTF-8, naming the message type when the
// bytes are not a message of it.
absl::Status ParseWireMessage(const grpc::ByteBuffer& bytes, google::protobuf::Message* out);

// The path of the first string field of `type` in the encoded message `wire`
// whose value is not valid UTF-8 ("prompt", "stopping.stop_strings[2]",
// "messages.messages[0].content"); "" when there is none (or the bytes end
// before one is found).
std::string FindInvalidUtf8(const google::protobuf::Descriptor& type, absl::string_view wire);

// The encoded message, for a raw method's response or write.
grpc::ByteBuffer ToByteBuffer(const google::protobuf::Message& message);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_WIRE_MESSAGE_H_
