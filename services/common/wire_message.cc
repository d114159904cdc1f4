// Requests parsed from raw gRPC bytes, with the field of invalid UTF-8 named.
// See wire_message.h.
#include "services/common/wire_message.h"

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/stubs/common.h"
#include "grpcpp/support/slice.h"

namespace onecard::services {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::io::CodedInputStream;

// Wire types of the encoding (the protobuf encoding guide).
enum WireType { kVarint = 0, kFixed64 = 1, kDelimited = 2, kFixed32 = 5 };

std::string FieldPath(const std::string& prefix, const FieldDescriptor& field, int index) {
  std::string path = prefix.empty() ? field.name() : absl::StrCat(prefix, ".", field.name());
  if (field.is_repeated()) absl::StrAppend(&path, "[", index, "]");
  return path;
}

bool Walk(const Descriptor& type, CodedInputStream& in, const std::string& prefix,
          std::string* found);

// One length-delimited value of `field` (null: unknown to the schema).
bool WalkDelimited(const FieldDescriptor* field, CodedInputStream& in, const std::string& path,
                   std::string* found) {
  uint32_t length = 0;
  if (!in.ReadVarint32(&length)) return false;
  if (field != nullptr && field->type() == FieldDescriptor::TYPE_STRING) {
    std::string value;
    if (!in.ReadString(&value, static_cast<int>(length))) return false;
    if (!google::protobuf::internal::IsStructurallyValidUTF8(value)) *found = path;
    return true;
  }
  if (field != nullptr && field->type() == FieldDescriptor::TYPE_MESSAGE) {
    const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
    const bool ok = Walk(*field->message_type(), in, path, found);
    in.PopLimit(limit);
    return ok;
  }
  return in.Skip(static_cast<int>(length));
}

// Reads the fields of one message of `type`; stops at the first invalid
// string (*found set) or malformed byte (false).
bool Walk(const Descriptor& type, CodedInputStream& in, const std::string& prefix,
          std::string* found) {
  absl::flat_hash_map<int, int> seen;  // elements of each field read so far
  while (const uint32_t tag = in.ReadTag()) {
    const int number = static_cast<int>(tag >> 3);
    const FieldDescriptor* field = type.FindFieldByNumber(number);
    const std::string path = field == nullptr ? "" : FieldPath(prefix, *field, seen[number]++);
    uint64_t skipped64 = 0;
    uint32_t skipped32 = 0;
    switch (tag & 7) {
      case kVarint:
        if (!in.ReadVarint64(&skipped64)) return false;
        break;
      case kFixed64:
        if (!in.ReadLittleEndian64(&skipped64)) return false;
        break;
      case kFixed32:
        if (!in.ReadLittleEndian32(&skipped32)) return false;
        break;
      case kDelimited:
        if (!WalkDelimited(field, in, path, found)) return false;
        if (!found->empty()) return true;
        break;
      default:  // groups: not in proto3
        return false;
    }
  }
  return true;
}

}  // namespace

std::string FindInvalidUtf8(const Descriptor& type, absl::string_view wire) {
  CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()), static_cast<int>(wire.size()));
  std::string found;
  Walk(type, in, "", &found);
  return found;
}

absl::Status ParseWireMessage(const grpc::ByteBuffer& bytes, google::protobuf::Message* out) {
  out->Clear();
  std::vector<grpc::Slice> slices;
  std::string wire;
  if (bytes.Valid() && bytes.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      wire.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  if (out->ParseFromString(wire)) return absl::OkStatus();
  const std::string field = FindInvalidUtf8(*out->GetDescriptor(), wire);
  out->Clear();
  if (!field.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": not valid UTF-8 (string fields must be UTF-8 text)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not an encoded ", out->GetDescriptor()->full_name()));
}

grpc::ByteBuffer ToByteBuffer(const google::protobuf::Message& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace onecard::services
