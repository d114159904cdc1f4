// RouterServer: the router process in one object (see router_server.h).
// Tested by tests/router/router_service_test.cc and the integration tests.
#include "router/router_server.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/common/log.h"
#include "engine/common/status_macros.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"
#include "onecard/v1/generation.grpc.pb.h"
#include "router/worker_table.h"
#include "services/common/server_main.h"

namespace onecard::router {
namespace {
constexpr absl::Duration kTableRefresh = absl::Seconds(2);
constexpr absl::Duration kMaxTick = absl::Milliseconds(20);
constexpr char kNotServed[] = "none";  // http.listen_address
}  // namespace

absl::StatusOr<std::unique_ptr<RouterServer>> RouterServer::Start(
    const onecard::v1::RouterConfig& config) {
  std::unique_ptr<RouterServer> server(new RouterServer());
  RETURN_IF_ERROR(server->Init(config));
  return server;
}

RouterServer::~RouterServer() {
  Shutdown();
  metrics_.reset();  // no scrape may reach the core while it is destroyed
}

absl::Status RouterServer::Init(const onecard::v1::RouterConfig& config) {
  ASSIGN_OR_RETURN(options_, ResolveRouterOptions(config));
  {
    absl::MutexLock lock(&mu_);
    control_plane_table_.emplace(options_.stale_worker_grace);
  }
  const onecard::v1::RouterConfig& c = options_.config;
  ASSIGN_OR_RETURN(ApiKeys keys, ApiKeys::Create(options_.tenants));
  if (keys.open()) {
    Log(LogLevel::kWarn, "router",
        "NO TENANTS (allow_unauthenticated): every caller is served without an API key, with no "
        "rate limits and every priority; for local development only");
  }
  ASSIGN_OR_RETURN(RoutingModel model, LoadRoutingModel(c.model_path(), c.model_name()));
  model_.emplace(std::move(model));
  preparer_ = std::make_unique<RequestPreparer>(
      model_->tokenizer.get(), model_->chat_template, model_->spec,
      PrepOptions{c.default_max_tokens(), c.max_request_bytes()});
  RETURN_IF_ERROR(StartMetrics());
  ASSIGN_OR_RETURN(auth_, services::ServiceAuth::Create(
                              {c.service_auth(), "router", {services::ServiceRole::kRouter}}));
  core_ = std::make_unique<RouterCore>(options_, std::move(keys), preparer_.get(),
                                       router_metrics_.get(), RealClock::Get(), auth_);
  gauges_ = RouterMetrics::GaugeCollectable([core = core_.get()] { return core->Gauges(); });
  metrics_->Add(gauges_);  // the exposer holds it weakly
  RefreshStaticTable();    // serve with the fallback table from the first request
  RETURN_IF_ERROR(StartGrpc());
  RETURN_IF_ERROR(StartHttp());
  ticker_ = std::thread([this] { TickLoop(); });
  table_thread_ = std::thread([this] { TableLoop(); });
  StartControlPlane();
  Log(LogLevel::kInfo, "router", "serving %s on %s (HTTP %s, metrics %s)", model_->spec.name,
      address_, http_address_.empty() ? kNotServed : http_address_, metrics_address_);
  return absl::OkStatus();
}

absl::Status RouterServer::StartMetrics() {
  ASSIGN_OR_RETURN(
      metrics_, services::MetricsServer::Start(options_.config.metrics_listen_address(), "router"));
  metrics_address_ = metrics_->address();
  router_metrics_ = std::make_unique<RouterMetrics>(metrics_->registry());
  std::vector<std::string> tenant_names;
  for (const TenantSpec& spec : options_.tenants) tenant_names.push_back(spec.tenant.name);
  router_metrics_->DeclareTenants(tenant_names);
  return absl::OkStatus();
}

absl::Status RouterServer::StartHttp() {
  if (options_.config.http().listen_address() == kNotServed) return absl::OkStatus();
  ASSIGN_OR_RETURN(http_, HttpServer::Start(core_.get(), options_.config));
  http_address_ = http_->address();
  return absl::OkStatus();
}

absl::Status RouterServer::StartGrpc() {
  services::EnableStandardGrpcServices();
  grpc::ServerBuilder builder;
  service_ = std::make_unique<RouterService>(core_.get());
  builder.RegisterService(service_.get());
  // Past max_request_bytes the preparer answers INVALID_ARGUMENT naming the
  // request; far past it gRPC refuses the message itself.
  builder.SetMaxReceiveMessageSize(options_.config.max_request_bytes() + (1 << 20));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   services::PublicServerCredentials(options_.config.public_tls(), "public_tls"));
  ASSIGN_OR_RETURN(services::StartedServer started,
                   services::StartGrpcServer(&builder, options_.config.listen_address(),
                                             std::move(credentials)));
  server_ = std::move(started.server);
  port_ = started.port;
  address_ = started.address;
  // The server ("") and its one service by name, for probes that ask either.
  server_->GetHealthCheckService()->SetServingStatus(onecard::v1::Generation::service_full_name(),
                                                     true);
  server_->GetHealthCheckService()->SetServingStatus(true);
  return absl::OkStatus();
}

void RouterServer::StartControlPlane() {
  const onecard::v1::RouterConfig& c = options_.config;
  if (c.control_plane_address().empty()) return;
  ControlPlaneOptions o;
  o.address = c.control_plane_address();
  o.advertise_address = services::AdvertisedAddress(c.advertise_address(), address_);
  o.router_id = c.router_id().empty() ? o.advertise_address : c.router_id();
  o.metrics_address = services::AdvertisedAddress("", metrics_address_);
  o.report_interval = options_.load_report_interval;
  o.initial_backoff = options_.reconnect_initial_backoff;
  o.max_backoff = options_.reconnect_max_backoff;
  o.auth = auth_;
  control_plane_ = std::make_unique<ControlPlaneClient>(
      o, [this](const onecard::v1::WorkerTable& t, bool first) { OnControlPlaneTable(t, first); },
      [this] { return LoadReport(); });
  control_plane_->Start();
}

bool RouterServer::SleepFor(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  return !mu_.AwaitWithTimeout(absl::Condition(&stopping), d);
}

void RouterServer::TickLoop() {
  Dispatcher& dispatcher = core_->dispatcher();
  do {
    dispatcher.Tick();
    absl::Duration wait = dispatcher.NextWakeTime() - absl::Now();
    wait = std::clamp(wait, absl::Milliseconds(1), kMaxTick);
    if (!SleepFor(wait)) return;
  } while (true);
}

void RouterServer::TableLoop() {
  while (SleepFor(kTableRefresh)) {
    RefreshStaticTable();
    absl::MutexLock lock(&mu_);
    if (control_plane_table_->Expire(absl::Now())) ApplyTable();
  }
}

void RouterServer::RefreshStaticTable() {
  const onecard::v1::DispatchConfig& d = options_.config.dispatch();
  std::vector<std::string> addresses(d.static_workers().begin(), d.static_workers().end());
  if (!d.dns_workers().empty()) {
    absl::StatusOr<std::vector<std::string>> resolved = ResolveAll(d.dns_workers());
    if (resolved.ok()) {
      addresses.insert(addresses.end(), resolved->begin(), resolved->end());
    } else {
      Log(LogLevel::kWarn, "router", "%s", resolved.status().ToString());
    }
  }
  for (const std::string& address : addresses) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || infos_.contains(address)) continue;
    }
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.worker_connect_timeout));
    core_->AttachCredentials(&context);
    onecard::v1::WorkerInfo info;
    if (core_->Stub(address)->GetInfo(&context, onecard::v1::GetInfoRequest(), &info).ok()) {
      absl::MutexLock lock(&mu_);
      infos_[address] = info;
    }
  }
  absl::MutexLock lock(&mu_);
  static_table_ = FromStaticEndpoints(addresses, infos_, d.max_in_flight_per_worker());
  ApplyTable();
}

void RouterServer::OnControlPlaneTable(const onecard::v1::WorkerTable& table,
                                       bool first_of_stream) {
  absl::MutexLock lock(&mu_);
  control_plane_table_->Apply(
      FromWorkerTable(table, "", options_.config.dispatch().max_in_flight_per_worker()),
      first_of_stream, absl::Now());
  if (first_of_stream && control_plane_table_->stale() > 0) {
    Log(LogLevel::kInfo, "router",
        "control plane watch reconnected: keeping %d workers it does not list yet for %s",
        control_plane_table_->stale(), absl::FormatDuration(options_.stale_worker_grace));
  }
  ApplyTable();
}

void RouterServer::ApplyTable() {
  if (stopping_) return;
  const std::vector<WorkerDesc>& control_plane = control_plane_table_->workers();
  const std::vector<WorkerDesc>& workers = control_plane.empty() ? static_table_ : control_plane;
  core_->dispatcher().SetWorkers(workers);
  preparer_->SetServedContext(ServedContext(workers));
}

onecard::v1::RouterLoadReport RouterServer::LoadReport() {
  RouterGauges g = core_->Gauges();
  onecard::v1::RouterLoadReport r;
  for (int c = 0; c < kNumPriorityClasses; ++c) {
    onecard::v1::PriorityQueueDepth* q = r.add_queue_depth();
    q->set_priority(ToProtoPriority(static_cast<PriorityClass>(c)));
    q->set_depth(g.queue_depth[c]);
  }
  int64_t in_flight = 0;
  for (const WorkerSnapshot& w : g.workers) {
    in_flight += w.in_flight;
    onecard::v1::WorkerInFlight* f = r.add_in_flight_by_worker();
    f->set_worker_id(w.id);
    f->set_in_flight(w.in_flight);
  }
  r.set_in_flight(in_flight);
  const int64_t admitted = router_metrics_->admitted_total();
  r.set_admitted_total(admitted);
  r.set_rejected_total(router_metrics_->rejected_total());
  r.set_draining(g.draining);
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (last_report_ != absl::InfinitePast() && now > last_report_) {
    r.set_requests_per_second(static_cast<double>(admitted - last_admitted_) /
                              absl::ToDoubleSeconds(now - last_report_));
  }
  last_admitted_ = admitted;
  last_report_ = now;
  return r;
}

absl::Status RouterServer::Drain(absl::Duration grace) {
  core_->SetDraining();
  if (server_ != nullptr) server_->GetHealthCheckService()->SetServingStatus(false);
  const bool idle = core_->WaitIdle(absl::Now() + grace);
  const int64_t open = core_->Gauges().open_streams;
  Shutdown();
  if (idle) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat(open, " calls still open after the grace period of ",
                   absl::FormatDuration(grace), "; they were cancelled"));
}

void RouterServer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = stopping_ = true;
  }
  if (core_ != nullptr) core_->SetDraining();
  if (control_plane_ != nullptr) control_plane_->Stop();  // a last report says draining
  if (ticker_.joinable()) ticker_.join();
  if (table_thread_.joinable()) table_thread_.join();
  if (http_ != nullptr) http_->Stop();  // cancels what is still open
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->SetServingStatus(false);
    server_->Shutdown(absl::ToChronoTime(absl::Now()));  // cancels what is still open
    server_->Wait();
  }
}

}  // namespace onecard::router
