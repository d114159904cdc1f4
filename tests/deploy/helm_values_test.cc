// Tests of helm/onecard's values for a first install (issue 23): the values
// schema refuses misspelt keys and wrong types; NetworkPolicies are on by
// default (workers' gRPC from routers only, /metrics from Prometheus only);
// no well-known API key is accepted and a generated one is stored and
// announced; security contexts, ServiceAccount, runtimeClassName and the
// extra args/env/volumes are overridable; the models PVC, Ingress and
// GRPCRoute examples, user HPA metrics and the router's tokenizer-only
// mount render as asked. Expected values are written from the Kubernetes
// API and the values' meaning, not read back from the chart.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/digest.h"
#include "tests/deploy/deploy_testing.h"
#include "tests/deploy/helm_testing.h"

namespace onecard::testing {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr char kFullValues[] = "helm/onecard/ci/values-full.yaml";

std::vector<json> Workloads(const std::vector<json>& docs) {
  std::vector<json> out;
  for (const json& d : docs) {
    const std::string kind = d.value("kind", "");
    if (kind == "Deployment" || kind == "StatefulSet") out.push_back(d);
  }
  return out;
}

TEST(HelmValuesTest, SchemaRefusesMisspeltKeysAndWrongTypes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"worker.replica=3", "'replica' not allowed"},
      {"autoscalling.enabled=true", "'autoscalling' not allowed"},
      {"router.tenants[0].name=a,router.tenants[0].rate=5", "'rate' not allowed"},
      {"worker.replicas=many", "/worker/replicas"},
      {"worker.backend=tpu", "/worker/backend"},
      {"router.tenants[0].name=a,router.tenants[0].max_priority=urgent", "max_priority"},
      {"networkPolicy.enabled=maybe", "/networkPolicy/enabled"},
  };
  for (const auto& [set, message] : cases) {
    absl::StatusOr<std::vector<json>> docs = HelmTemplate({}, {set});
    ASSERT_FALSE(docs.ok()) << set;
    EXPECT_THAT(docs.status().message(), HasSubstr(message)) << set;
  }
}

TEST(HelmValuesTest, LintStrictPassesWithEveryOptionOn) {
  absl::StatusOr<std::string> helm = HelmPath();
  ASSERT_TRUE(helm.ok()) << helm.status();
  absl::StatusOr<CommandResult> lint =
      RunCommand(absl::StrCat(*helm, " lint --strict helm/onecard -f ", kFullValues,
                              " --set model.volume=null --set model.persistence.create=true"
                              " --set router.tokenizer.path=/tokenizer/t.gguf"
                              " --set router.tokenizer.volume.configMap.name=tok"));
  ASSERT_TRUE(lint.ok());
  EXPECT_EQ(lint->exit_code, 0) << lint->output << lint->errors;
}

// The ingress rule of `policy` that opens `port`.
json RuleForPort(const json& policy, int port) {
  for (const json& rule : policy.at("spec").at("ingress")) {
    for (const json& p : rule.at("ports")) {
      if (Int(p.at("port")) == port) return rule;
    }
  }
  return json();
}

TEST(HelmValuesTest, NetworkPoliciesLetOnlyRoutersReachWorkersAndPrometheusScrape) {
  const std::vector<json> docs = Render({});
  const json worker = FindObject(docs, "NetworkPolicy", "-worker");
  ASSERT_FALSE(worker.is_null());
  EXPECT_EQ(worker.at("spec").at("podSelector").at("matchLabels").at("app.kubernetes.io/component"),
            "worker");
  const json grpc = RuleForPort(worker, 50051);
  ASSERT_FALSE(grpc.is_null());
  ASSERT_EQ(grpc.at("from").size(), 1u);
  EXPECT_EQ(
      grpc.at("from")[0].at("podSelector").at("matchLabels").at("app.kubernetes.io/component"),
      "router");
  for (const auto& [suffix, metrics_port] : std::vector<std::pair<std::string, int>>{
           {"-worker", 9400}, {"-router", 9401}, {"-metrics", 9402}}) {
    const json policy = FindObject(docs, "NetworkPolicy", suffix);
    ASSERT_FALSE(policy.is_null()) << suffix;
    const json scrape = RuleForPort(policy, metrics_port);
    ASSERT_FALSE(scrape.is_null()) << suffix;
    ASSERT_EQ(scrape.at("from").size(), 1u) << suffix;
    EXPECT_EQ(scrape.at("from")[0].at("podSelector").at("matchLabels").at("app.kubernetes.io/name"),
              "prometheus")
        << suffix;
  }
  // The control plane: gRPC from workers and routers.
  const json control = RuleForPort(FindObject(docs, "NetworkPolicy", "-metrics"), 50060);
  ASSERT_FALSE(control.is_null());
  EXPECT_EQ(control.at("from").size(), 2u);
  // The public API: open to every source unless routerIngressFrom says; a
  // router HTTP port (router.service.httpPort) opens beside gRPC.
  EXPECT_FALSE(RuleForPort(FindObject(docs, "NetworkPolicy", "-router"), 50050).contains("from"));
  const std::vector<json> http = Render({}, {"router.service.httpPort=8000"});
  const json public_rule = RuleForPort(FindObject(http, "NetworkPolicy", "-router"), 8000);
  ASSERT_FALSE(public_rule.is_null());
  EXPECT_EQ(Int(public_rule.at("ports")[0].at("port")), 50050);
  const std::vector<json> off = Render({}, {"networkPolicy.enabled=false"});
  EXPECT_TRUE(FindObject(off, "NetworkPolicy", "").is_null());
}

TEST(HelmValuesTest, PlaceholderApiKeysAreRefused) {
  for (const char* key : {"change-me", "CHANGEME"}) {
    absl::StatusOr<std::vector<json>> docs = HelmTemplate(
        {}, {absl::StrCat("router.tenants[0].name=a,router.tenants[0].api_keys[0]=", key)});
    ASSERT_FALSE(docs.ok()) << key;
    EXPECT_THAT(docs.status().message(), HasSubstr("well-known placeholder")) << key;
  }
}

TEST(HelmValuesTest, DefaultTenantGetsAGeneratedKeyStoredOnlyAsItsHashInTheRouter) {
  const std::vector<json> docs = Render({});
  const json keys = FindObject(docs, "Secret", "-api-keys");
  ASSERT_FALSE(keys.is_null());
  const std::string key = keys.at("stringData").value("default", "");
  EXPECT_EQ(key.size(), 40u);
  const v1::OnecardConfig config =
      ParseConfig(FindObject(docs, "Secret", "-router"), "router.yaml");
  ASSERT_EQ(config.router().tenants_size(), 1);
  ASSERT_EQ(config.router().tenants(0).api_key_sha256_size(), 1);
  EXPECT_EQ(config.router().tenants(0).api_key_sha256(0), services::Sha256Hex(key));
  // Two renders, two keys: nothing fixed is shipped.
  EXPECT_NE(FindObject(Render({}), "Secret", "-api-keys").at("stringData").value("default", ""),
            key);
}

TEST(HelmValuesTest, NotesSayHowToReadTheGeneratedKey) {
  absl::StatusOr<std::string> helm = HelmPath();
  ASSERT_TRUE(helm.ok()) << helm.status();
  absl::StatusOr<CommandResult> run = RunCommand(
      absl::StrCat(*helm, " install onecard-test helm/onecard --dry-run=client --namespace ns"));
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->exit_code, 0) << run->errors;
  EXPECT_THAT(run->output, HasSubstr("kubectl -n ns get secret onecard-test-api-keys -o "
                                     "jsonpath='{.data.default}' | base64 -d"));
}

TEST(HelmValuesTest, PodsRunNonRootReadOnlyWithRuntimeDefaultSeccompAndCanOverride) {
  const std::vector<json> docs = Render({}, {"worker.podSecurityContext.runAsUser=2000",
                                             "router.containerSecurityContext.privileged=false"});
  const std::vector<json> workloads = Workloads(docs);
  ASSERT_EQ(workloads.size(), 3u);
  for (const json& w : workloads) {
    const std::string name = w.at("metadata").at("name");
    const json& pod = PodSpec(w).at("securityContext");
    EXPECT_EQ(pod.at("runAsNonRoot"), "true") << name;
    EXPECT_EQ(pod.at("seccompProfile").at("type"), "RuntimeDefault") << name;
    EXPECT_EQ(Int(pod.at("runAsUser")), name.ends_with("-worker") ? 2000 : 10001) << name;
    for (const json& c : PodSpec(w).at("containers")) {
      const json& sc = c.at("securityContext");
      EXPECT_EQ(sc.at("readOnlyRootFilesystem"), "true") << name;
      EXPECT_EQ(sc.at("allowPrivilegeEscalation"), "false") << name;
      EXPECT_EQ(sc.at("capabilities").at("drop")[0], "ALL") << name;
      EXPECT_EQ(sc.contains("privileged"), name.ends_with("-router")) << name;
    }
  }
}

TEST(HelmValuesTest, ServiceAccountRuntimeClassAndExtrasReachThePods) {
  const std::vector<json> docs = Render(
      {},
      {"serviceAccount.annotations.team=ml", "worker.runtimeClassName=nvidia",
       "worker.extraArgs={--log-format=json}", "metrics.extraEnv[0].name=A",
       "metrics.extraEnv[0].value=b", "router.extraEnvFrom[0].secretRef.name=env",
       "router.extraVolumes[0].name=extra", "router.extraVolumes[0].emptyDir.medium=Memory",
       "router.extraVolumeMounts[0].name=extra", "router.extraVolumeMounts[0].mountPath=/extra"});
  const json account = FindObject(docs, "ServiceAccount", "onecard-test");
  ASSERT_FALSE(account.is_null());
  EXPECT_EQ(account.at("automountServiceAccountToken"), "false");
  for (const json& w : Workloads(docs)) {
    EXPECT_EQ(PodSpec(w).at("serviceAccountName"), "onecard-test");
    EXPECT_EQ(PodSpec(w).at("automountServiceAccountToken"), "false");
  }
  const json worker = FindObject(docs, "StatefulSet", "-worker");
  EXPECT_EQ(PodSpec(worker).at("runtimeClassName"), "nvidia");
  const json& args = Container(worker, "worker").at("args");
  EXPECT_EQ(args.back(), "--log-format=json");
  const json metrics = FindObject(docs, "Deployment", "-metrics");
  EXPECT_EQ(Container(metrics, "metrics").at("env")[0].at("name"), "A");
  EXPECT_FALSE(PodSpec(metrics).contains("runtimeClassName"));
  const json router = FindObject(docs, "Deployment", "-router");
  EXPECT_EQ(Container(router, "router").at("envFrom")[0].at("secretRef").at("name"), "env");
  EXPECT_EQ(Volume(router, "extra").at("emptyDir").at("medium"), "Memory");
  EXPECT_EQ(Container(router, "router").at("volumeMounts").back().at("mountPath"), "/extra");
}

TEST(HelmValuesTest, ModelsPvcIsMadeAndMountedWhenAsked) {
  EXPECT_TRUE(FindObject(Render({}), "PersistentVolumeClaim", "").is_null());
  const std::vector<json> docs =
      Render({}, {"model.persistence.create=true", "model.persistence.size=80Gi",
                  "model.persistence.storageClassName=fast",
                  "model.persistence.accessModes={ReadWriteOnce}"});
  const json pvc = FindObject(docs, "PersistentVolumeClaim", "-models");
  ASSERT_FALSE(pvc.is_null());
  EXPECT_EQ(pvc.at("spec").at("resources").at("requests").at("storage"), "80Gi");
  EXPECT_EQ(pvc.at("spec").at("storageClassName"), "fast");
  EXPECT_EQ(pvc.at("spec").at("accessModes")[0], "ReadWriteOnce");
  const json worker = FindObject(docs, "StatefulSet", "-worker");
  EXPECT_EQ(Volume(worker, "models").at("persistentVolumeClaim").at("claimName"),
            "onecard-test-models");
}

TEST(HelmValuesTest, IngressAndGrpcRouteSendToTheRoutersGrpcPort) {
  const std::vector<json> none = Render({});
  EXPECT_TRUE(FindObject(none, "Ingress", "").is_null());
  EXPECT_TRUE(FindObject(none, "GRPCRoute", "").is_null());
  const std::vector<json> docs =
      Render({}, {"ingress.enabled=true", "ingress.host=llm.example.org",
                  "ingress.tlsSecret=llm-tls", "grpcRoute.enabled=true",
                  "grpcRoute.parentRefs[0].name=gw", "grpcRoute.hostnames={llm.example.org}"});
  const json ingress = FindObject(docs, "Ingress", "-router-grpc");
  ASSERT_FALSE(ingress.is_null());
  const json& rule = ingress.at("spec").at("rules")[0];
  EXPECT_EQ(rule.at("host"), "llm.example.org");
  const json& backend = rule.at("http").at("paths")[0].at("backend").at("service");
  EXPECT_EQ(backend.at("name"), "onecard-test-router");
  EXPECT_EQ(backend.at("port").at("name"), "grpc");
  EXPECT_EQ(
      ingress.at("metadata").at("annotations").at("nginx.ingress.kubernetes.io/backend-protocol"),
      "GRPC");
  EXPECT_EQ(ingress.at("spec").at("tls")[0].at("secretName"), "llm-tls");
  const json route = FindObject(docs, "GRPCRoute", "-router");
  ASSERT_FALSE(route.is_null());
  EXPECT_EQ(route.at("spec").at("parentRefs")[0].at("name"), "gw");
  const json& ref = route.at("spec").at("rules")[0].at("backendRefs")[0];
  EXPECT_EQ(ref.at("name"), "onecard-test-router");
  EXPECT_EQ(Int(ref.at("port")), 50050);
  absl::StatusOr<std::vector<json>> no_gateway = HelmTemplate({}, {"grpcRoute.enabled=true"});
  ASSERT_FALSE(no_gateway.ok());
  EXPECT_THAT(no_gateway.status().message(), HasSubstr("grpcRoute.parentRefs"));
}

TEST(HelmValuesTest, AutoscalingMetricsCanBeReplaced) {
  const std::vector<json> docs =
      Render({kFullValues},
             {"autoscaling.metrics[0].type=Resource", "autoscaling.metrics[0].resource.name=cpu",
              "autoscaling.metrics[0].resource.target.type=Utilization",
              "autoscaling.metrics[0].resource.target.averageUtilization=70"});
  const json hpa = FindObject(docs, "HorizontalPodAutoscaler", "-worker");
  ASSERT_FALSE(hpa.is_null());
  const json& metrics = hpa.at("spec").at("metrics");
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_EQ(metrics[0].at("type"), "Resource");
  EXPECT_EQ(metrics[0].at("resource").at("name"), "cpu");
}

TEST(HelmValuesTest, RouterCanMountOnlyTheTokenizer) {
  const std::vector<json> docs =
      Render({}, {"router.tokenizer.path=/tokenizer/tokenizer.gguf",
                  "router.tokenizer.volume.configMap.name=smol-tokenizer"});
  const json router = FindObject(docs, "Deployment", "-router");
  EXPECT_TRUE(Volume(router, "models").is_null());
  EXPECT_EQ(Volume(router, "tokenizer").at("configMap").at("name"), "smol-tokenizer");
  EXPECT_FALSE(PodSpec(router).contains("initContainers"));  // nothing to fetch
  const v1::OnecardConfig config =
      ParseConfig(FindObject(docs, "Secret", "-router"), "router.yaml");
  EXPECT_EQ(config.router().model_path(), "/tokenizer/tokenizer.gguf");
  // The workers still read the whole model.
  EXPECT_FALSE(Volume(FindObject(docs, "StatefulSet", "-worker"), "models").is_null());
}

}  // namespace
}  // namespace onecard::testing
