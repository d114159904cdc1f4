// A server reflection client for tests. See reflection_client.h.
#include "tests/services/testing/reflection_client.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"

namespace onecard::testing {
namespace {

using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

constexpr char kMethod[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

// Waits for the completion of the operation tagged `tag`.
bool Await(grpc::CompletionQueue& cq, void* tag) {
  void* got = nullptr;
  bool ok = false;
  return cq.Next(&got, &ok) && got == tag && ok;
}

// The length-delimited fields numbered `number` of the encoded `message`.
std::vector<std::string> Fields(const std::string& message, int number) {
  UnknownFieldSet set;
  std::vector<std::string> out;
  if (!set.ParseFromString(message)) return out;
  for (int i = 0; i < set.field_count(); ++i) {
    const UnknownField& f = set.field(i);
    if (f.number() == number && f.type() == UnknownField::TYPE_LENGTH_DELIMITED) {
      out.push_back(f.length_delimited());
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListServicesByReflection(
    const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, kMethod, &cq);
  int tags[5];
  call->StartCall(&tags[0]);
  if (!Await(cq, &tags[0])) return absl::UnavailableError("reflection: cannot start the call");
  // ServerReflectionRequest{list_services: ""}: field 7, wire type 2, length 0.
  const std::string request("\x3a\x00", 2);
  grpc::Slice slice(request);
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, &tags[1]);
  const bool wrote = Await(cq, &tags[1]);
  call->WritesDone(&tags[2]);
  Await(cq, &tags[2]);
  grpc::ByteBuffer in;
  call->Read(&in, &tags[3]);
  const bool read = wrote && Await(cq, &tags[3]);
  grpc::Status status;
  call->Finish(&status, &tags[4]);
  Await(cq, &tags[4]);
  if (!read) {
    return absl::UnavailableError(absl::StrCat("reflection: no answer (", status.error_code(), ": ",
                                               status.error_message(), ")"));
  }
  std::vector<grpc::Slice> slices;
  if (!in.Dump(&slices).ok()) return absl::InternalError("reflection: unreadable answer");
  std::string response;
  for (const grpc::Slice& s : slices) response.append(s.begin(), s.end());
  std::vector<std::string> names;
  for (const std::string& list : Fields(response, 6)) {
    for (const std::string& service : Fields(list, 1)) {
      for (const std::string& name : Fields(service, 1)) names.push_back(name);
    }
  }
  if (names.empty()) return absl::NotFoundError("reflection: the answer lists no service");
  return names;
}

}  // namespace onecard::testing
