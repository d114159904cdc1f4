{{/*
Names, labels and shared snippets of the onecard chart.
*/}}

{{- define "onecard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's base name; every object is "<fullname>-<component>". */}}
{{- define "onecard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "onecard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels of a component: (dict "root" $ "component" "worker"). */}}
{{- define "onecard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "onecard.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "onecard.labels" -}}
helm.sh/chart: {{ include "onecard.chart" .root }}
{{ include "onecard.selectorLabels" . }}
app.kubernetes.io/part-of: onecard
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end }}

{{/* Object names. */}}
{{- define "onecard.router.name" -}}{{ include "onecard.fullname" . }}-router{{- end }}
{{- define "onecard.worker.name" -}}{{ include "onecard.fullname" . }}-worker{{- end }}
{{- define "onecard.metrics.name" -}}{{ include "onecard.fullname" . }}-metrics{{- end }}
{{- define "onecard.config.name" -}}{{ include "onecard.fullname" . }}-config{{- end }}
{{- define "onecard.routerSecret.name" -}}
{{- default (printf "%s-router" (include "onecard.fullname" .)) .Values.router.existingSecret }}
{{- end }}

{{/* The image of a component: (dict "root" $ "image" .Values.worker.image). */}}
{{- define "onecard.image" -}}
{{- $registry := default .root.Values.image.registry .image.registry -}}
{{- $tag := default (default .root.Chart.AppVersion .root.Values.image.tag) .image.tag -}}
{{- printf "%s/%s:%s" $registry .image.repository $tag }}
{{- end }}

{{/* In-cluster addresses. */}}
{{- define "onecard.metrics.address" -}}
{{- printf "%s.%s.svc:%d" (include "onecard.metrics.name" .) .Release.Namespace (int .Values.metrics.service.grpcPort) }}
{{- end }}
{{- define "onecard.worker.dnsAddress" -}}
{{- printf "%s-headless.%s.svc:%d" (include "onecard.worker.name" .) .Release.Namespace (int .Values.worker.service.grpcPort) }}
{{- end }}

{{/* Pod env shared by the components: the pod's name and IP. */}}
{{- define "onecard.podEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end }}

{{/* gRPC health probes: (dict "port" 50051 "probes" .Values.worker.probes). */}}
{{- define "onecard.probes" -}}
{{- range $kind := list "startup" "liveness" "readiness" }}
{{- $p := index $.probes $kind }}
{{ $kind }}Probe:
  {{- if $.tls }}
  exec:
    command:
      - /usr/local/bin/onecard-health-probe
      - --target=127.0.0.1:{{ $.port }}
      - --service={{ $p.service | default "" }}
      - --tls-ca={{ $.tls }}/ca.crt
      {{- if $.mutual }}
      - --tls-cert={{ $.tls }}/tls.crt
      - --tls-key={{ $.tls }}/tls.key
      {{- end }}
  {{- else }}
  grpc:
    port: {{ $.port }}
    service: {{ $p.service | default "" | quote }}
  {{- end }}
  periodSeconds: {{ $p.periodSeconds }}
  timeoutSeconds: {{ $p.timeoutSeconds }}
  failureThreshold: {{ $p.failureThreshold }}
  {{- if $p.initialDelaySeconds }}
  initialDelaySeconds: {{ $p.initialDelaySeconds }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
Who may talk to whom (values serviceAuth and tls; docs/security.md). Files
are mounted under /etc/onecard-auth: tokens/<role>.token (token mode),
tls/{tls.crt,tls.key,ca.crt} (mutual TLS), public-tls/ (the router's public
port).
*/}}
{{- define "onecard.tokensSecret.name" -}}
{{- default (printf "%s-service-tokens" (include "onecard.fullname" .)) .Values.serviceAuth.tokens.existingSecret }}
{{- end }}
{{- define "onecard.tlsSecret.name" -}}
{{- default (printf "%s-%s-tls" (include "onecard.fullname" .root) .component) (index .root.Values.tls.secrets .component) }}
{{- end }}
{{- define "onecard.publicTlsSecret.name" -}}
{{- default (printf "%s-router-public-tls" (include "onecard.fullname" .)) .Values.router.publicTls.secret }}
{{- end }}

{{/* service_auth of a component's config, YAML: (dict "root" $ "roles" (list "worker" "router")),
the roles whose tokens it reads. */}}
{{- define "onecard.serviceAuth" -}}
{{- $v := .root.Values -}}
{{- if $v.tls.enabled }}
tls:
  cert_file: /etc/onecard-auth/tls/tls.crt
  key_file: /etc/onecard-auth/tls/tls.key
  ca_file: /etc/onecard-auth/tls/ca.crt
  reload_interval: {{ $v.tls.reloadInterval }}
{{- else if $v.serviceAuth.tokens.enabled }}
{{- range .roles }}
{{ . }}_token_file: /etc/onecard-auth/tokens/{{ . }}.token
{{- end }}
{{- end }}
{{- end }}

{{/* The identity volumes of a pod: (dict "root" $ "component" "worker" "roles" (list ...)). */}}
{{- define "onecard.authVolumes" -}}
{{- if .root.Values.tls.enabled }}
- name: service-tls
  secret:
    secretName: {{ include "onecard.tlsSecret.name" . }}
{{- else if .root.Values.serviceAuth.tokens.enabled }}
- name: service-tokens
  secret:
    secretName: {{ include "onecard.tokensSecret.name" .root }}
    items:
      {{- range .roles }}
      - {key: {{ . }}.token, path: {{ . }}.token}
      {{- end }}
{{- end }}
{{- end }}

{{- define "onecard.authMounts" -}}
{{- if .Values.tls.enabled }}
- name: service-tls
  mountPath: /etc/onecard-auth/tls
  readOnly: true
{{- else if .Values.serviceAuth.tokens.enabled }}
- name: service-tokens
  mountPath: /etc/onecard-auth/tokens
  readOnly: true
{{- end }}
{{- end }}

{{/*
preStop: wait while peers (Service endpoints, routers' worker tables) stop
sending, then the kubelet sends SIGTERM and the process drains.
(dict "seconds" .Values.worker.drain.preStopSleepSeconds)
*/}}
{{- define "onecard.preStop" -}}
lifecycle:
  preStop:
    exec:
      command: ["/bin/sleep", "{{ .seconds }}"]
{{- end }}

{{/* terminationGracePeriodSeconds covering preStop + drain + margin. */}}
{{- define "onecard.terminationGrace" -}}
{{- add (int .preStopSleepSeconds) (int .gracePeriodSeconds) (int .marginSeconds) }}
{{- end }}

{{/* Model volume and the init container that fetches the model into it. */}}
{{- define "onecard.modelVolume" -}}
- name: models
  {{- if .Values.model.volume }}
  {{- toYaml .Values.model.volume | nindent 2 }}
  {{- else if .Values.model.persistence.create }}
  persistentVolumeClaim:
    claimName: {{ include "onecard.fullname" . }}-models
  {{- else }}
  emptyDir:
    sizeLimit: {{ .Values.model.emptyDirSizeLimit }}
  {{- end }}
{{- end }}

{{- define "onecard.modelFetch" -}}
{{- if .Values.model.fetch.enabled }}
- name: fetch-model
  image: {{ .Values.model.fetch.image }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: ["/bin/sh", "-c"]
  args:
    - {{ .Values.model.fetch.script | quote }}
  env:
    - name: MODEL_PATH
      value: {{ .Values.model.path | quote }}
  volumeMounts:
    - name: models
      mountPath: {{ .Values.model.mountPath }}
  resources:
    {{- toYaml .Values.model.fetch.resources | nindent 4 }}
{{- end }}
{{- end }}

{{/* Scheduling fields of a pod spec: (dict "c" .Values.worker). */}}
{{- define "onecard.scheduling" -}}
{{- with .c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end }}

{{/*
Security contexts: the top-level values with the component's merged over
them: (dict "root" $ "c" .Values.worker).
*/}}
{{- define "onecard.podSecurity" -}}
securityContext:
  {{- toYaml (mergeOverwrite (deepCopy .root.Values.podSecurityContext) (.c.podSecurityContext | default dict)) | nindent 2 }}
{{- end }}

{{- define "onecard.containerSecurity" -}}
securityContext:
  {{- toYaml (mergeOverwrite (deepCopy .root.Values.containerSecurityContext) (.c.containerSecurityContext | default dict)) | nindent 2 }}
{{- end }}

{{- define "onecard.serviceAccount.name" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "onecard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Pod-level identity fields: (dict "root" $ "c" .Values.worker). */}}
{{- define "onecard.podIdentity" -}}
serviceAccountName: {{ include "onecard.serviceAccount.name" .root }}
automountServiceAccountToken: {{ .root.Values.serviceAccount.automountServiceAccountToken }}
{{- with .c.runtimeClassName }}
runtimeClassName: {{ . }}
{{- end }}
{{- end }}

{{/* A container's extra args, env and mounts: (dict "c" .Values.worker). */}}
{{- define "onecard.extraArgs" -}}
{{- range .c.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
{{- define "onecard.extraEnvFrom" -}}
{{- with .c.extraEnvFrom }}
envFrom:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
