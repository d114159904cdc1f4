// Service identity: tokens, mutual TLS, or nothing. See service_auth.h.
#include "services/common/service_auth.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/common/log.h"
#include "engine/common/regular_file.h"
#include "engine/common/status_macros.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_certificate_verifier.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "services/common/config_bounds.h"
#include "services/common/proto_time.h"

namespace onecard::services {
namespace {

using grpc::experimental::FileWatcherCertificateProvider;

constexpr size_t kMinTokenBytes = 16;
constexpr absl::Duration kDefaultReload = absl::Seconds(60);

int Index(ServiceRole role) { return role == ServiceRole::kWorker ? 0 : 1; }

absl::Status Bad(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// A role's token from its file: one line, surrounding white space dropped.
absl::StatusOr<std::string> ReadToken(const std::string& path, absl::string_view field) {
  absl::StatusOr<std::string> text = ReadRegularFile(path);
  if (!text.ok()) return Bad(field, text.status().message());
  const std::string token(absl::StripAsciiWhitespace(*text));
  if (token.size() < kMinTokenBytes) {
    return Bad(field, absl::StrCat(path, ": the token has ", token.size(), " bytes; at least ",
                                   kMinTokenBytes, " are needed"));
  }
  return token;
}

// A PEM file that exists and is readable now (the provider reads it again
// on every reload).
absl::Status CheckPem(const std::string& path, absl::string_view field) {
  if (path.empty()) return Bad(field, "required with tls.cert_file");
  absl::StatusOr<std::string> text = ReadRegularFile(path);
  if (!text.ok()) return Bad(field, text.status().message());
  if (!absl::StrContains(*text, "-----BEGIN ")) return Bad(field, path + ": not a PEM file");
  return absl::OkStatus();
}

unsigned int ReloadSeconds(const v1::TlsConfig& tls) {
  const absl::Duration d = FromProtoDuration(tls.reload_interval());
  return static_cast<unsigned int>(
      absl::ToInt64Seconds(d == absl::ZeroDuration() ? kDefaultReload : d));
}

absl::Status CheckTls(const v1::TlsConfig& tls, absl::string_view prefix, bool needs_ca) {
  RETURN_IF_ERROR(CheckPem(tls.cert_file(), absl::StrCat(prefix, ".cert_file")));
  RETURN_IF_ERROR(CheckPem(tls.key_file(), absl::StrCat(prefix, ".key_file")));
  if (needs_ca) RETURN_IF_ERROR(CheckPem(tls.ca_file(), absl::StrCat(prefix, ".ca_file")));
  const absl::Duration reload = FromProtoDuration(tls.reload_interval());
  if (reload == absl::ZeroDuration()) return absl::OkStatus();
  return CheckDurationRange(absl::StrCat(prefix, ".reload_interval"), reload, absl::Seconds(1),
                            kMaxConfigDuration);
}

std::shared_ptr<FileWatcherCertificateProvider> Provider(const v1::TlsConfig& tls) {
  return std::make_shared<FileWatcherCertificateProvider>(tls.key_file(), tls.cert_file(),
                                                          tls.ca_file(), ReloadSeconds(tls));
}

}  // namespace

const char* ServiceRoleName(ServiceRole role) {
  return role == ServiceRole::kWorker ? "worker" : "router";
}

absl::StatusOr<std::shared_ptr<const ServiceAuth>> ServiceAuth::Create(
    const ServiceAuthOptions& options) {
  const v1::ServiceAuthConfig& c = options.config;
  std::shared_ptr<ServiceAuth> auth(new ServiceAuth());
  if (!c.tls().cert_file().empty()) {
    RETURN_IF_ERROR(CheckTls(c.tls(), "service_auth.tls", /*needs_ca=*/true));
    auth->mode_ = Mode::kTls;
    auth->tls_ = c.tls();
    auth->identities_[0] =
        c.tls().worker_identity().empty() ? "onecard-worker" : c.tls().worker_identity();
    auth->identities_[1] =
        c.tls().router_identity().empty() ? "onecard-router" : c.tls().router_identity();
    return std::shared_ptr<const ServiceAuth>(std::move(auth));
  }
  const std::string files[2] = {c.worker_token_file(), c.router_token_file()};
  if (files[0].empty() && files[1].empty()) {
    Log(LogLevel::kWarn, options.service,
        "NO SERVICE AUTHENTICATION: service_auth has no tokens and no TLS, so any caller may act "
        "as a worker or a router; for local development only");
    return std::shared_ptr<const ServiceAuth>(std::move(auth));
  }
  auth->mode_ = Mode::kToken;
  for (ServiceRole role : {ServiceRole::kWorker, ServiceRole::kRouter}) {
    const int i = Index(role);
    const std::string field = absl::StrCat("service_auth.", ServiceRoleName(role), "_token_file");
    const bool needed = std::find(options.tokens_needed.begin(), options.tokens_needed.end(),
                                  role) != options.tokens_needed.end();
    if (files[i].empty()) {
      if (needed) return Bad(field, "required in token mode (the other role's file is set)");
      continue;
    }
    ASSIGN_OR_RETURN(auth->tokens_[i], ReadToken(files[i], field));
    auth->token_digests_[i] = Sha256(*auth->tokens_[i]);
  }
  return std::shared_ptr<const ServiceAuth>(std::move(auth));
}

std::shared_ptr<grpc::ServerCredentials> ServiceAuth::ServerCredentials() const {
  if (mode_ != Mode::kTls) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(Provider(tls_));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ServiceAuth::ChannelCredentials() const {
  if (mode_ != Mode::kTls) return grpc::InsecureChannelCredentials();
  return TlsChannelCredentials(tls_);
}

std::shared_ptr<grpc::ChannelCredentials> TlsChannelCredentials(const v1::TlsConfig& tls) {
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Provider(tls));
  options.watch_root_certs();
  if (!tls.cert_file().empty()) options.watch_identity_key_cert_pairs();
  // The chain is verified against ca_file; host names are not, since peers
  // are dialled by pod address. Servers check the caller's role instead.
  options.set_verify_server_certs(true);
  options.set_certificate_verifier(std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
  options.set_check_call_host(false);
  return grpc::experimental::TlsCredentials(options);
}

void ServiceAuth::Attach(ServiceRole role, grpc::ClientContext* context) const {
  const std::optional<std::string>& token = tokens_[Index(role)];
  if (mode_ == Mode::kToken && token.has_value()) context->AddMetadata(kServiceTokenKey, *token);
}

absl::StatusOr<ServicePeer> ServiceAuth::Authorize(const grpc::ServerContextBase& context,
                                                   ServiceRole role) const {
  switch (mode_) {
    case Mode::kOpen:
      return ServicePeer{role, ""};
    case Mode::kToken:
      return AuthorizeToken(context, role);
    case Mode::kTls:
      return AuthorizeCertificate(context, role);
  }
  return absl::InternalError("unknown service auth mode");
}

absl::StatusOr<ServicePeer> ServiceAuth::AuthorizeToken(const grpc::ServerContextBase& context,
                                                        ServiceRole role) const {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kServiceTokenKey);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(absl::StrCat(
        kServiceTokenKey, ": missing; this method is for the ", ServiceRoleName(role), " role"));
  }
  const Sha256Digest digest = Sha256(std::string_view(it->second.data(), it->second.size()));
  bool matches[2] = {false, false};
  for (int i = 0; i < 2; ++i) {  // both, whatever the first gave
    matches[i] = token_digests_[i].has_value() && DigestsEqual(*token_digests_[i], digest);
  }
  if (matches[Index(role)]) return ServicePeer{role, absl::StrCat("token:", ServiceRoleName(role))};
  const ServiceRole other =
      role == ServiceRole::kWorker ? ServiceRole::kRouter : ServiceRole::kWorker;
  if (matches[Index(other)]) {
    return absl::PermissionDeniedError(absl::StrCat("the caller is a ", ServiceRoleName(other),
                                                    "; this method is for the ",
                                                    ServiceRoleName(role), " role"));
  }
  return absl::UnauthenticatedError(absl::StrCat(kServiceTokenKey, ": unknown token"));
}

absl::StatusOr<ServicePeer> ServiceAuth::AuthorizeCertificate(
    const grpc::ServerContextBase& context, ServiceRole role) const {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  std::vector<grpc::string_ref> names;
  std::string identity;
  if (auth != nullptr) {
    names = auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
    for (const grpc::string_ref& san : auth->FindPropertyValues(GRPC_X509_SAN_PROPERTY_NAME)) {
      names.push_back(san);
    }
    std::vector<grpc::string_ref> subject =
        auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME);
    if (subject.empty()) subject = auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
    if (!subject.empty()) identity.assign(subject[0].data(), subject[0].size());
  }
  if (identity.empty()) return absl::UnauthenticatedError("no client certificate");
  const std::string& wanted = identities_[Index(role)];
  for (const grpc::string_ref& name : names) {
    if (std::string_view(name.data(), name.size()) == wanted) return ServicePeer{role, identity};
  }
  return absl::PermissionDeniedError(absl::StrCat("the client certificate (", identity,
                                                  ") is not the ", ServiceRoleName(role),
                                                  " role's (", wanted, ")"));
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> PublicServerCredentials(
    const v1::TlsConfig& tls, const std::string& field) {
  if (tls.cert_file().empty()) return grpc::InsecureServerCredentials();
  RETURN_IF_ERROR(CheckTls(tls, field, /*needs_ca=*/false));
  grpc::experimental::TlsServerCredentialsOptions options(
      std::make_shared<FileWatcherCertificateProvider>(tls.key_file(), tls.cert_file(),
                                                       ReloadSeconds(tls)));
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace onecard::services
