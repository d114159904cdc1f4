// A streaming Generate client. See remote_generate.h.
#include "tools/onecard/remote_generate.h"

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "onecard/v1/generation.grpc.pb.h"
#include "services/common/proto_time.h"
#include "services/common/status.h"

namespace onecard::tools {
namespace {

absl::StatusOr<v1::Priority> ParsePriority(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower.empty()) return v1::PRIORITY_UNSPECIFIED;
  if (lower == "interactive") return v1::PRIORITY_INTERACTIVE;
  if (lower == "standard") return v1::PRIORITY_STANDARD;
  if (lower == "batch") return v1::PRIORITY_BATCH;
  return absl::InvalidArgumentError(
      absl::StrCat("priority: \"", name, "\" is not one of interactive, standard, batch"));
}

absl::StatusOr<v1::GenerateRequest> MakeRequest(const RemoteGenerateOptions& o) {
  v1::GenerateRequest request;
  request.set_request_id(o.request_id);
  request.set_model(o.model);
  if (o.messages.empty()) {
    request.set_prompt(o.prompt);
  } else {
    for (const RemoteChatMessage& m : o.messages) {
      v1::ChatMessage* out = request.mutable_messages()->add_messages();
      out->set_role(m.role);
      out->set_content(m.content);
    }
  }
  v1::SamplingParams* s = request.mutable_sampling();
  s->set_temperature(o.temperature);
  s->set_top_k(o.top_k);
  s->set_top_p(o.top_p);
  s->set_min_p(o.min_p);
  if (o.seed.has_value()) s->set_seed(*o.seed);
  request.mutable_stopping()->set_max_tokens(o.max_tokens);
  for (const std::string& stop : o.stop_strings) request.mutable_stopping()->add_stop_strings(stop);
  absl::StatusOr<v1::Priority> priority = ParsePriority(o.priority);
  if (!priority.ok()) return priority.status();
  request.set_priority(*priority);
  return request;
}

std::string FinishReasonName(v1::FinishReason reason) {
  std::string name = v1::FinishReason_Name(reason);
  constexpr absl::string_view kPrefix = "FINISH_REASON_";
  if (absl::StartsWith(name, kPrefix)) name = name.substr(kPrefix.size());
  return absl::AsciiStrToLower(name);
}

// Folds one chunk into the completion.
void Absorb(const v1::GenerateResponse& chunk, RemoteCompletion* out) {
  ++out->chunks;
  if (!chunk.request_id().empty()) out->request_id = chunk.request_id();
  out->token_ids.insert(out->token_ids.end(), chunk.token_ids().begin(), chunk.token_ids().end());
  out->text += chunk.text();
  if (chunk.finish_reason() == v1::FINISH_REASON_UNSPECIFIED) return;
  out->finish_reason = FinishReasonName(chunk.finish_reason());
  out->prompt_tokens = chunk.usage().prompt_tokens();
  out->completion_tokens = chunk.usage().completion_tokens();
  out->cached_tokens = chunk.usage().cached_tokens();
  out->queue_time = services::FromProtoDuration(chunk.timing().queue_time());
  out->time_to_first_token = services::FromProtoDuration(chunk.timing().time_to_first_token());
  out->server_total_time = services::FromProtoDuration(chunk.timing().total_time());
}

}  // namespace

absl::Status CheckPriorityName(const std::string& name) { return ParsePriority(name).status(); }

absl::StatusOr<RemoteCompletion> RemoteGenerate(
    const RemoteGenerateOptions& options,
    const std::function<void(absl::string_view text)>& on_text) {
  if (options.target.empty()) return absl::InvalidArgumentError("target: empty (want host:port)");
  absl::StatusOr<v1::GenerateRequest> request = MakeRequest(options);
  if (!request.ok()) return request.status();
  auto stub = v1::Generation::NewStub(
      grpc::CreateChannel(options.target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  if (options.timeout != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
  }
  if (!options.api_key.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", options.api_key));
  }
  const absl::Time start = absl::Now();
  RemoteCompletion out;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub->Generate(&context, *request);
  v1::GenerateResponse chunk;
  while (reader->Read(&chunk)) {
    if (out.token_ids.empty() && chunk.token_ids_size() > 0) {
      out.client_time_to_first_token = absl::Now() - start;
    }
    Absorb(chunk, &out);
    if (on_text && !chunk.text().empty()) on_text(chunk.text());
  }
  const absl::Status status = services::FromGrpcStatus(reader->Finish());
  out.client_total_time = absl::Now() - start;
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(options.target, ": ", status.message(),
                                                    " (after ", out.token_ids.size(), " tokens)"));
  }
  return out;
}

}  // namespace onecard::tools
