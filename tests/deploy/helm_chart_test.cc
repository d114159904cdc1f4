// Tests helm/onecard: `helm lint --strict` and `helm template` with the
// default values and with ci/values-full.yaml, then checks of the rendered
// manifests: the objects the issue asks for, gRPC probes on the right ports,
// the HTTP API's port on the router's Service and its optional Ingress,
// termination grace covering preStop + drain, GPU requests and scheduling,
// the HPA (targets, metrics, behavior), ServiceMonitors, the config files
// parsed by the services' own typed loader (with worker.config's engine
// options, the cuda offload ones too), API keys stored as hashes, and the
// tuning cache file's volume.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onecard/v1/config.pb.h"
#include "services/common/config.h"
#include "tests/deploy/deploy_testing.h"
#include "tests/deploy/helm_testing.h"

namespace onecard::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

constexpr char kFullValues[] = "helm/onecard/ci/values-full.yaml";

int64_t Seconds(const google::protobuf::Duration& d) { return d.seconds(); }

TEST(HelmChartTest, LintPassesWithDefaultAndFullValues) {
  absl::StatusOr<std::string> helm = HelmPath();
  ASSERT_TRUE(helm.ok()) << helm.status();
  for (const std::string extra : {"", " -f helm/onecard/ci/values-full.yaml"}) {
    absl::StatusOr<CommandResult> lint =
        RunCommand(absl::StrCat(*helm, " lint --strict helm/onecard", extra));
    ASSERT_TRUE(lint.ok());
    EXPECT_EQ(lint->exit_code, 0) << extra << "\n" << lint->output << lint->errors;
  }
}

TEST(HelmChartTest, DefaultValuesRenderTheComponents) {
  const std::vector<json> docs = Render({});
  ASSERT_FALSE(docs.empty());
  EXPECT_FALSE(FindObject(docs, "Deployment", "-router").is_null());
  EXPECT_FALSE(FindObject(docs, "Deployment", "-metrics").is_null());
  const json worker = FindObject(docs, "StatefulSet", "-worker");
  ASSERT_FALSE(worker.is_null());
  EXPECT_EQ(Int(worker.at("spec").at("replicas")), 1);
  EXPECT_EQ(worker.at("spec").at("serviceName"), "onecard-test-worker-headless");
  const json headless = FindObject(docs, "Service", "-worker-headless");
  ASSERT_FALSE(headless.is_null());
  EXPECT_EQ(headless.at("spec").at("clusterIP"), "None");
  for (const char* pdb : {"-router", "-worker", "-metrics"}) {
    EXPECT_FALSE(FindObject(docs, "PodDisruptionBudget", pdb).is_null()) << pdb;
  }
  EXPECT_FALSE(FindObject(docs, "ConfigMap", "-dashboards").is_null());
  EXPECT_TRUE(FindObject(docs, "HorizontalPodAutoscaler", "").is_null());
  EXPECT_TRUE(FindObject(docs, "ServiceMonitor", "").is_null());
  EXPECT_TRUE(FindObject(docs, "PrometheusRule", "").is_null());
  EXPECT_EQ(Container(worker, "worker").at("resources").at("limits").at("nvidia.com/gpu"), "1");
}

TEST(HelmChartTest, EveryComponentHasGrpcHealthProbesOnItsGrpcPort) {
  const std::vector<json> docs = Render({});
  const std::vector<std::pair<std::string, std::string>> workloads = {
      {"Deployment", "router"}, {"StatefulSet", "worker"}, {"Deployment", "metrics"}};
  for (const auto& [kind, name] : workloads) {
    const json object = FindObject(docs, kind, "-" + name);
    ASSERT_FALSE(object.is_null()) << name;
    const json& c = Container(object, name);
    const int grpc_port = PortNamed(c, "grpc");
    ASSERT_GT(grpc_port, 0) << name;
    for (const char* probe : {"startupProbe", "livenessProbe", "readinessProbe"}) {
      ASSERT_TRUE(c.contains(probe)) << name << " " << probe;
      EXPECT_EQ(Int(c.at(probe).at("grpc").at("port")), grpc_port) << name << " " << probe;
    }
  }
}

// terminationGracePeriodSeconds >= preStop sleep + the drain grace period the
// process is configured with (read back from its config file).
TEST(HelmChartTest, TerminationGraceCoversPreStopAndDrain) {
  const std::vector<json> docs = Render({});
  const v1::OnecardConfig cluster =
      ParseConfig(FindObject(docs, "ConfigMap", "-config"), "onecard.yaml");
  const v1::OnecardConfig router =
      ParseConfig(FindObject(docs, "Secret", "-router"), "router.yaml");
  const std::vector<std::tuple<std::string, std::string, int64_t>> cases = {
      {"StatefulSet", "worker", Seconds(cluster.worker().grace_period())},
      {"Deployment", "router", Seconds(router.router().timeouts().grace_period())}};
  for (const auto& [kind, name, drain_seconds] : cases) {
    EXPECT_GT(drain_seconds, 0) << name;
    const json object = FindObject(docs, kind, "-" + name);
    const json& pre_stop =
        Container(object, name).at("lifecycle").at("preStop").at("exec").at("command");
    ASSERT_EQ(pre_stop.size(), 2u) << name;
    EXPECT_EQ(pre_stop.at(0), "/bin/sleep");
    const int sleep_seconds = Int(pre_stop.at(1));
    EXPECT_GT(sleep_seconds, 0);
    EXPECT_GT(Int(PodSpec(object).at("terminationGracePeriodSeconds")),
              sleep_seconds + drain_seconds)
        << name;
  }
}

TEST(HelmChartTest, ConfigFilesParseAsTypedConfigAndPointAtTheServices) {
  const std::vector<json> docs = Render({});
  const v1::OnecardConfig cluster =
      ParseConfig(FindObject(docs, "ConfigMap", "-config"), "onecard.yaml");
  const v1::OnecardConfig router =
      ParseConfig(FindObject(docs, "Secret", "-router"), "router.yaml");
  const std::string metrics_address = "onecard-test-metrics.default.svc:50060";
  EXPECT_EQ(cluster.worker().control_plane_address(), metrics_address);
  EXPECT_EQ(router.router().control_plane_address(), metrics_address);
  EXPECT_EQ(router.router().dispatch().dns_workers(),
            "onecard-test-worker-headless.default.svc:50051");
  EXPECT_EQ(cluster.worker().model_path(), router.router().model_path());
  EXPECT_EQ(cluster.metrics().listen_address(), "0.0.0.0:50060");
  const json metrics = FindObject(docs, "Deployment", "-metrics");
  EXPECT_EQ(PortNamed(Container(metrics, "metrics"), "grpc"), 50060);
  EXPECT_EQ(PortNamed(Container(metrics, "metrics"), "metrics"), 9402);
  EXPECT_EQ(cluster.worker().scheduler().max_num_seqs(), 64);  // from values.yaml's config
  EXPECT_EQ(Seconds(cluster.worker().scheduler().aging_interval()), 10);
}

// The engine options of worker.config reach the workers' config file as the
// typed fields: values.yaml's defaults, and what --set gives.
TEST(HelmChartTest, WorkerConfigCarriesTheEngineOptions) {
  const v1::OnecardConfig defaults =
      ParseConfig(FindObject(Render({}), "ConfigMap", "-config"), "onecard.yaml");
  EXPECT_EQ(defaults.worker().cpu_weights(), "native");
  EXPECT_EQ(defaults.worker().kv_cache_dtype(), "auto");
  EXPECT_EQ(defaults.worker().fp8_compute(), "w8a8");
  EXPECT_EQ(Seconds(defaults.worker().scheduler().aging_interval()), 10);
  EXPECT_EQ(defaults.worker().cuda().cpu_memory_budget(), "");  // no offload
  EXPECT_EQ(defaults.worker().kv_cache().swap_space(), "");     // no KV swap
  EXPECT_TRUE(defaults.worker().cuda().has_gpu_layers());
  EXPECT_EQ(defaults.worker().cuda().gpu_layers(), -1);
  EXPECT_EQ(defaults.worker().cuda().offload_ring_layers(), 2);
  EXPECT_EQ(defaults.worker().cuda().offload_cpu_threads(), 0);
  EXPECT_EQ(defaults.worker().cuda().offload_cpu_layers(), -1);
  const std::vector<json> docs = Render(
      {}, {"worker.config.kv_cache_dtype=bf16", "worker.config.fp8_compute=w8a16",
           "worker.config.scheduler.aging_interval=30s",
           "worker.config.cuda.cpu_memory_budget=96GiB", "worker.config.cuda.gpu_layers=40",
           "worker.config.cuda.offload_ring_layers=3", "worker.config.cuda.offload_cpu_threads=14",
           "worker.config.cuda.offload_cpu_layers=30", "worker.config.kv_cache.swap_space=32GiB"});
  const v1::OnecardConfig set =
      ParseConfig(FindObject(docs, "ConfigMap", "-config"), "onecard.yaml");
  EXPECT_EQ(set.worker().kv_cache_dtype(), "bf16");
  EXPECT_EQ(set.worker().fp8_compute(), "w8a16");
  EXPECT_EQ(Seconds(set.worker().scheduler().aging_interval()), 30);
  EXPECT_EQ(set.worker().cuda().cpu_memory_budget(), "96GiB");
  EXPECT_EQ(set.worker().cuda().gpu_layers(), 40);
  EXPECT_EQ(set.worker().cuda().offload_ring_layers(), 3);
  EXPECT_EQ(set.worker().cuda().offload_cpu_threads(), 14);
  EXPECT_EQ(set.worker().cuda().offload_cpu_layers(), 30);
  EXPECT_EQ(set.worker().kv_cache().swap_space(), "32GiB");
  EXPECT_TRUE(set.worker().cuda().tune_gemms());  // the rest of the cuda block is kept
}

TEST(HelmChartTest, TheHttpApiHasItsPortOnTheServiceAndAnOptionalIngress) {
  std::vector<json> docs = Render({});
  const v1::OnecardConfig router =
      ParseConfig(FindObject(docs, "Secret", "-router"), "router.yaml");
  EXPECT_EQ(router.router().http().listen_address(), "0.0.0.0:8000");
  EXPECT_EQ(PortNamed(Container(FindObject(docs, "Deployment", "-router"), "router"), "http"),
            8000);
  const json service = FindObject(docs, "Service", "-router");
  bool found = false;
  for (const json& p : service.at("spec").at("ports")) {
    if (p.value("name", "") != "http") continue;
    found = true;
    EXPECT_EQ(Int(p.at("port")), 8000);
    EXPECT_EQ(p.at("targetPort"), "http");
  }
  EXPECT_TRUE(found) << service.dump(2);
  EXPECT_TRUE(FindObject(docs, "Ingress", "").is_null()) << "off by default";

  docs = Render({kFullValues}, {"router.service.httpPort=8080"});
  const json ingress = FindObject(docs, "Ingress", "-router");
  ASSERT_FALSE(ingress.is_null());
  const json& backend =
      ingress.at("spec").at("rules").at(0).at("http").at("paths").at(0).at("backend");
  EXPECT_EQ(backend.at("service").at("name"), service.at("metadata").at("name"));
  EXPECT_EQ(backend.at("service").at("port").at("name"), "http");
  EXPECT_EQ(ParseConfig(FindObject(docs, "Secret", "-router"), "router.yaml")
                .router()
                .http()
                .listen_address(),
            "0.0.0.0:8080");
}

TEST(HelmChartTest, ApiKeysReachTheClusterOnlyAsSha256) {
  const std::vector<json> docs =
      Render({}, {"router.tenants[0].name=t", "router.tenants[0].api_keys[0]=foo"});
  const json secret = FindObject(docs, "Secret", "-router");
  const std::string text = secret.at("stringData").value("router.yaml", "");
  EXPECT_THAT(text, Not(HasSubstr("foo\n")));
  const v1::OnecardConfig router = ParseConfig(secret, "router.yaml");
  ASSERT_EQ(router.router().tenants_size(), 1);
  ASSERT_EQ(router.router().tenants(0).api_key_sha256_size(), 1);
  // sha256("foo"), from coreutils' sha256sum.
  EXPECT_EQ(router.router().tenants(0).api_key_sha256(0),
            "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae");
}

// Issue 22: a router with no tenants served everyone; the chart refuses that
// unless router.allowUnauthenticated says so, and then tells the router.
TEST(HelmChartTest, NoTenantsNeedAllowUnauthenticated) {
  absl::StatusOr<std::vector<json>> refused = HelmTemplate({}, {"router.tenants=null"});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("router.tenants is empty"));
  const std::vector<json> docs =
      Render({}, {"router.tenants=null", "router.allowUnauthenticated=true"});
  const v1::OnecardConfig router =
      ParseConfig(FindObject(docs, "Secret", "-router"), "router.yaml");
  EXPECT_EQ(router.router().tenants_size(), 0);
  EXPECT_TRUE(router.router().allow_unauthenticated());
}

// Issue 22: anyone reaching the services could act as a worker or a router.
// By default the chart gives the services role tokens from a Secret: workers
// and the metrics service both, routers only theirs.
TEST(HelmChartTest, ServicesProveTheirRolesWithTokensByDefault) {
  const std::vector<json> docs = Render({});
  const json tokens = FindObject(docs, "Secret", "-service-tokens");
  ASSERT_FALSE(tokens.is_null());
  EXPECT_TRUE(tokens.at("data").contains("worker.token"));
  EXPECT_TRUE(tokens.at("data").contains("router.token"));
  const v1::OnecardConfig cluster =
      ParseConfig(FindObject(docs, "ConfigMap", "-config"), "onecard.yaml");
  for (const v1::ServiceAuthConfig* auth :
       {&cluster.worker().service_auth(), &cluster.metrics().service_auth()}) {
    EXPECT_EQ(auth->worker_token_file(), "/etc/onecard-auth/tokens/worker.token");
    EXPECT_EQ(auth->router_token_file(), "/etc/onecard-auth/tokens/router.token");
  }
  const v1::OnecardConfig router =
      ParseConfig(FindObject(docs, "Secret", "-router"), "router.yaml");
  EXPECT_EQ(router.router().service_auth().router_token_file(),
            "/etc/onecard-auth/tokens/router.token");
  EXPECT_EQ(router.router().service_auth().worker_token_file(), "");
  const json router_tokens = Volume(FindObject(docs, "Deployment", "-router"), "service-tokens");
  ASSERT_FALSE(router_tokens.is_null());
  ASSERT_EQ(router_tokens.at("secret").at("items").size(), 1u);  // its own token only
  EXPECT_EQ(router_tokens.at("secret").at("items")[0].at("key"), "router.token");
  EXPECT_FALSE(Volume(FindObject(docs, "StatefulSet", "-worker"), "service-tokens").is_null());
  EXPECT_FALSE(Volume(FindObject(docs, "Deployment", "-metrics"), "service-tokens").is_null());
}

// Mutual TLS with cert-manager: a Certificate per component, the configs
// pointing at the mounted files, exec probes that present the pod's
// certificate, and TLS on the router's public port.
TEST(HelmChartTest, TlsModeMountsCertificatesAndProbesWithThem) {
  const std::vector<std::string> sets = {"tls.enabled=true", "tls.certManager.enabled=true",
                                         "tls.certManager.issuerRef.name=ca",
                                         "router.publicTls.enabled=true"};
  const std::vector<json> docs = Render({}, sets);
  EXPECT_TRUE(FindObject(docs, "Secret", "-service-tokens").is_null());
  for (const std::string component : {"worker", "router", "metrics"}) {
    const json cert = FindObject(docs, "Certificate", "-" + component);
    ASSERT_FALSE(cert.is_null()) << component;
    EXPECT_EQ(cert.at("spec").at("commonName"), "onecard-" + component);
    EXPECT_EQ(cert.at("spec").at("secretName"), "onecard-test-" + component + "-tls");
    EXPECT_EQ(cert.at("spec").at("issuerRef").at("name"), "ca");
  }
  EXPECT_FALSE(FindObject(docs, "Certificate", "-router-public").is_null());
  const v1::OnecardConfig cluster =
      ParseConfig(FindObject(docs, "ConfigMap", "-config"), "onecard.yaml");
  EXPECT_EQ(cluster.worker().service_auth().tls().cert_file(), "/etc/onecard-auth/tls/tls.crt");
  EXPECT_EQ(cluster.metrics().service_auth().tls().ca_file(), "/etc/onecard-auth/tls/ca.crt");
  const v1::OnecardConfig router_config =
      ParseConfig(FindObject(docs, "Secret", "-router"), "router.yaml");
  EXPECT_EQ(router_config.router().public_tls().cert_file(),
            "/etc/onecard-auth/public-tls/tls.crt");
  EXPECT_EQ(router_config.router().service_auth().tls().key_file(),
            "/etc/onecard-auth/tls/tls.key");
  const json worker = FindObject(docs, "StatefulSet", "-worker");
  const json& command = Container(worker, "worker").at("readinessProbe").at("exec").at("command");
  EXPECT_EQ(command[0], "/usr/local/bin/onecard-health-probe");
  EXPECT_EQ(command[1], "--target=127.0.0.1:50051");
  EXPECT_THAT(command.dump(), HasSubstr("--tls-cert=/etc/onecard-auth/tls/tls.crt"));
  const json router = FindObject(docs, "Deployment", "-router");
  const json& router_probe = Container(router, "router").at("livenessProbe");
  EXPECT_THAT(router_probe.dump(), HasSubstr("--tls-ca=/etc/onecard-auth/public-tls/ca.crt"));
  EXPECT_THAT(router_probe.dump(), Not(HasSubstr("--tls-cert")));
  absl::StatusOr<std::string> helm = HelmPath();
  ASSERT_TRUE(helm.ok());
  std::string lint = absl::StrCat(*helm, " lint --strict helm/onecard");
  for (const std::string& s : sets) absl::StrAppend(&lint, " --set ", s);
  absl::StatusOr<CommandResult> linted = RunCommand(lint);
  ASSERT_TRUE(linted.ok());
  EXPECT_EQ(linted->exit_code, 0) << linted->output << linted->errors;
}

TEST(HelmChartTest, FullValuesTurnOnHpaServiceMonitorsAndGpuScheduling) {
  const std::vector<json> docs = Render({kFullValues});
  const json hpa = FindObject(docs, "HorizontalPodAutoscaler", "-worker");
  ASSERT_FALSE(hpa.is_null());
  EXPECT_EQ(hpa.at("apiVersion"), "autoscaling/v2");
  EXPECT_EQ(hpa.at("spec").at("scaleTargetRef").at("kind"), "StatefulSet");
  EXPECT_EQ(hpa.at("spec").at("scaleTargetRef").at("name"), "onecard-test-worker");
  const json& behavior = hpa.at("spec").at("behavior");
  EXPECT_EQ(Int(behavior.at("scaleUp").at("stabilizationWindowSeconds")), 0);
  EXPECT_GE(Int(behavior.at("scaleDown").at("stabilizationWindowSeconds")), 300);
  const std::vector<HpaMetric> metrics = HpaMetrics(docs);
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics.at(0).name, "onecard_cluster_queue_depth");
  EXPECT_EQ(metrics.at(0).described_kind, "Service");
  EXPECT_FALSE(FindObject(docs, "Service", metrics.at(0).described_name).is_null());
  EXPECT_EQ(metrics.at(1).type, "Pods");

  const json worker = FindObject(docs, "StatefulSet", "-worker");
  EXPECT_FALSE(worker.at("spec").contains("replicas"));  // the HPA owns it
  const json& pod = PodSpec(worker);
  EXPECT_EQ(pod.at("nodeSelector").at("nvidia.com/gpu.present"), "true");
  EXPECT_EQ(pod.at("tolerations").at(0).at("key"), "nvidia.com/gpu");
  EXPECT_TRUE(pod.at("affinity").contains("nodeAffinity"));
  EXPECT_EQ(Container(worker, "worker").at("resources").at("limits").at("nvidia.com/gpu"), "1");

  for (const char* component : {"router", "worker", "metrics"}) {
    const json monitor = FindObject(docs, "ServiceMonitor", std::string("-") + component);
    ASSERT_FALSE(monitor.is_null()) << component;
    EXPECT_EQ(monitor.at("spec").at("endpoints").at(0).at("port"), "metrics");
    EXPECT_EQ(monitor.at("spec").at("selector").at("matchLabels").at("app.kubernetes.io/component"),
              component);
  }
  const json rule = FindObject(docs, "PrometheusRule", "");
  ASSERT_FALSE(rule.is_null());
  EXPECT_EQ(rule.at("spec").at("groups").size(), 2u);
  const json dashboards = FindObject(docs, "ConfigMap", "-dashboards");
  ASSERT_FALSE(dashboards.is_null());
  const json dash =
      json::parse(dashboards.at("data").value("onecard-overview.json", ""), nullptr, false);
  ASSERT_FALSE(dash.is_discarded());
  EXPECT_EQ(dash.at("uid"), "onecard-overview");
}

TEST(HelmChartTest, AdapterServesEveryHpaMetricForItsObjectKind) {
  absl::StatusOr<std::vector<AdapterRule>> rules = AdapterRules();
  ASSERT_TRUE(rules.ok()) << rules.status();
  for (const HpaMetric& metric : HpaMetrics(Render({kFullValues}))) {
    const std::string resource = metric.type == "Pods" ? "pod" : "service";
    bool served = false;
    for (const AdapterRule& rule : *rules) {
      served |= rule.exposed_name == metric.name && rule.resource == resource;
    }
    EXPECT_TRUE(served) << metric.name << " (" << resource << ") has no adapter rule";
  }
}

TEST(HelmChartTest, WorkerKindIsChecked) {
  const std::vector<json> docs = Render({}, {"worker.kind=Deployment"});
  EXPECT_FALSE(FindObject(docs, "Deployment", "-worker").is_null());
  EXPECT_TRUE(FindObject(docs, "StatefulSet", "-worker").is_null());
  absl::StatusOr<std::vector<json>> bad = HelmTemplate({}, {"worker.kind=Job"});
  ASSERT_FALSE(bad.ok());
  // values.schema.json lists the two kinds.
  EXPECT_THAT(bad.status().message(), HasSubstr("at '/worker/kind'"));
}

TEST(HelmChartTest, CpuWorkersRequestNoGpu) {
  const std::vector<json> docs = Render({}, {"worker.gpu.enabled=false", "worker.backend=cpu"});
  const json worker = FindObject(docs, "StatefulSet", "-worker");
  EXPECT_FALSE(Container(worker, "worker").at("resources").at("limits").contains("nvidia.com/gpu"));
  const v1::OnecardConfig cluster =
      ParseConfig(FindObject(docs, "ConfigMap", "-config"), "onecard.yaml");
  EXPECT_EQ(cluster.worker().backend(), "cpu");
}

// The worker's volume and mount named `name` (null when absent).
std::pair<json, json> WorkerVolume(const json& worker, const std::string& name) {
  std::pair<json, json> found;
  for (const json& v : PodSpec(worker).at("volumes")) {
    if (v.value("name", "") == name) found.first = v;
  }
  for (const json& m : Container(worker, "worker").at("volumeMounts")) {
    if (m.value("name", "") == name) found.second = m;
  }
  return found;
}

TEST(HelmChartTest, TuningCacheFileLivesOnItsOwnVolume) {
  {  // default: an emptyDir (outlives container restarts), the config points into it
    const std::vector<json> docs = Render({});
    const auto [volume, mount] =
        WorkerVolume(FindObject(docs, "StatefulSet", "-worker"), "tuning-cache");
    ASSERT_FALSE(volume.is_null());
    EXPECT_TRUE(volume.contains("emptyDir")) << volume;
    ASSERT_FALSE(mount.is_null());
    EXPECT_EQ(mount.at("mountPath"), "/var/cache/onecard");
    EXPECT_FALSE(mount.value("readOnly", false));
    const v1::OnecardConfig cluster =
        ParseConfig(FindObject(docs, "ConfigMap", "-config"), "onecard.yaml");
    EXPECT_EQ(cluster.worker().cuda().tuning_cache(), "/var/cache/onecard/gemm-tuning.json");
    EXPECT_TRUE(cluster.worker().cuda().tune_gemms());  // values.yaml's cuda block is kept
  }
  {  // full values: the volume source given (a claim shared by the workers)
    const auto [volume, mount] =
        WorkerVolume(FindObject(Render({kFullValues}), "StatefulSet", "-worker"), "tuning-cache");
    ASSERT_FALSE(volume.is_null());
    EXPECT_EQ(volume.at("persistentVolumeClaim").at("claimName"), "onecard-gemm-tuning");
    EXPECT_FALSE(volume.contains("emptyDir"));
  }
  // Off, or a CPU worker: no volume and no file.
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"worker.tuningCache.enabled=false"},
        std::vector<std::string>{"worker.gpu.enabled=false", "worker.backend=cpu"}}) {
    const std::vector<json> docs = Render({}, sets);
    const auto [volume, mount] =
        WorkerVolume(FindObject(docs, "StatefulSet", "-worker"), "tuning-cache");
    EXPECT_TRUE(volume.is_null()) << sets.back();
    EXPECT_TRUE(mount.is_null()) << sets.back();
    const v1::OnecardConfig cluster =
        ParseConfig(FindObject(docs, "ConfigMap", "-config"), "onecard.yaml");
    EXPECT_EQ(cluster.worker().cuda().tuning_cache(), "") << sets.back();
  }
}

}  // namespace
}  // namespace onecard::testing
