{{/*
The chart name (app.kubernetes.io/name, and so the default Prometheus job).
*/}}
{{- define "perf-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of every object: the release name, plus the chart name unless
the release name already contains it.
*/}}
{{- define "perf-exporter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "perf-exporter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "perf-exporter.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{/*
Selector labels: stable for the life of the release.
*/}}
{{- define "perf-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "perf-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Labels of every object.
*/}}
{{- define "perf-exporter.labels" -}}
helm.sh/chart: {{ include "perf-exporter.chart" . }}
{{ include "perf-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: metrics
app.kubernetes.io/part-of: {{ include "perf-exporter.name" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Labels of the `helm test` pod: not the DaemonSet's or the Service's selector.
*/}}
{{- define "perf-exporter.testLabels" -}}
app.kubernetes.io/name: {{ include "perf-exporter.name" . }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: test
{{- end }}

{{- define "perf-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "perf-exporter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The image: registry/repository:tag, or @digest when a digest is given;
global.imageRegistry, when set, replaces image.registry.
*/}}
{{- define "perf-exporter.image" -}}
{{- $registry := default .Values.image.registry ((.Values.global).imageRegistry) }}
{{- $repo := printf "%s/%s" $registry .Values.image.repository | trimPrefix "/" }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The `helm test` image, global.imageRegistry honoured as above.
*/}}
{{- define "perf-exporter.testImage" -}}
{{- $registry := default .Values.tests.image.registry ((.Values.global).imageRegistry) }}
{{- printf "%s/%s:%s" $registry .Values.tests.image.repository .Values.tests.image.tag | trimPrefix "/" }}
{{- end }}

{{/*
imagePullSecrets: global.imagePullSecrets (names or {name: ...}) and then
imagePullSecrets, without duplicates.
*/}}
{{- define "perf-exporter.imagePullSecrets" -}}
{{- $secrets := list }}
{{- range concat (((.Values.global).imagePullSecrets) | default list) .Values.imagePullSecrets }}
{{- $s := ternary (dict "name" .) . (kindIs "string" .) }}
{{- if not (has $s $secrets) }}
{{- $secrets = append $secrets $s }}
{{- end }}
{{- end }}
{{- with $secrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The scheme the exporter serves: https when webConfig.tls, else http.
*/}}
{{- define "perf-exporter.scheme" -}}
{{- ternary "https" "http" (or .Values.webConfig.tls .Values.kubeRBACProxy.enabled) }}
{{- end }}

{{/*
The image of kube-rbac-proxy, global.imageRegistry honoured.
*/}}
{{- define "perf-exporter.proxyImage" -}}
{{- $i := .Values.kubeRBACProxy.image }}
{{- printf "%s/%s:%s" (default $i.registry ((.Values.global).imageRegistry)) $i.repository $i.tag | trimPrefix "/" }}
{{- end }}

{{/*
The ServiceAccount token is mounted when asked, or for kube-rbac-proxy (it
calls the API server's TokenReview and SubjectAccessReview).
*/}}
{{- define "perf-exporter.automountToken" -}}
{{- or .Values.serviceAccount.automountServiceAccountToken .Values.kubeRBACProxy.enabled }}
{{- end }}

{{/*
A monitor's endpoint fields shared by the ServiceMonitor and the PodMonitor
(dict "root" $ "m" <monitor values>).
*/}}
{{- define "perf-exporter.monitorEndpoint" -}}
{{- $m := .m }}
path: {{ default .root.Values.metricsPath $m.path }}
scheme: {{ default (include "perf-exporter.scheme" .root) $m.scheme }}
{{- with $m.interval }}
interval: {{ . }}
{{- end }}
{{- with $m.scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
{{- if $m.honorLabels }}
honorLabels: true
{{- end }}
{{- with $m.tlsConfig }}
tlsConfig:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $m.basicAuth }}
basicAuth:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $m.authorization }}
authorization:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if hasKey $m "bearerTokenFile" }}
{{- with (default (ternary "/var/run/secrets/kubernetes.io/serviceaccount/token" "" .root.Values.kubeRBACProxy.enabled) $m.bearerTokenFile) }}
bearerTokenFile: {{ . }}
{{- end }}
{{- end }}
{{- with $m.relabelings }}
relabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $m.metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The namespace of an optional object: its own, else the release's.
*/}}
{{- define "perf-exporter.objectNamespace" -}}
{{- default (include "perf-exporter.namespace" .root) .namespace }}
{{- end }}

{{/*
Checks of value combinations the schema cannot express.
*/}}
{{- define "perf-exporter.validate" -}}
{{- if and .Values.prometheus.monitor.enabled .Values.prometheus.podMonitor.enabled }}
{{- fail "prometheus.monitor.enabled and prometheus.podMonitor.enabled: enable one of them, not both (every node would be scraped twice)" }}
{{- end }}
{{- range .Values.extraArgs }}
{{- if regexMatch "^--?web\\.telemetry-path" . }}
{{- fail (printf "extraArgs: %s: set metricsPath instead (the probes, the monitors, the Service annotations and helm test use it)" .) }}
{{- end }}
{{- if regexMatch "^--?web\\.config\\.file" . }}
{{- fail (printf "extraArgs: %s: set webConfig.file instead (the probes and the monitors switch to https with webConfig.tls)" .) }}
{{- end }}
{{- if regexMatch "^--?web\\.listen-address" . }}
{{- fail (printf "extraArgs: %s: set port instead (the Service, the probes and the NetworkPolicy use it)" .) }}
{{- end }}
{{- end }}
{{- if and .Values.kubeRBACProxy.enabled .Values.webConfig.file }}
{{- fail "kubeRBACProxy.enabled and webConfig.file: pick one (the proxy serves TLS and authenticates; the exporter behind it listens on loopback)" }}
{{- end }}
{{- if and .Values.webConfig.tls (not .Values.webConfig.file) }}
{{- fail "webConfig.tls needs webConfig.file: the exporter serves TLS from its web config (mount it from a Secret with extraVolumes/extraVolumeMounts)" }}
{{- end }}
{{- if and .Values.cgroups.enabled .Values.cgroups.mountPropagation .Values.cgroups.recursiveReadOnly (ne .Values.cgroups.mountPropagation "None") (ne .Values.cgroups.recursiveReadOnly "Disabled") }}
{{- fail (printf "cgroups.mountPropagation %s with cgroups.recursiveReadOnly %s: Kubernetes allows recursiveReadOnly only without mount propagation; set cgroups.recursiveReadOnly to \"\"" .Values.cgroups.mountPropagation .Values.cgroups.recursiveReadOnly) }}
{{- end }}
{{- if .Values.cgroups.enabled }}
{{- $sets := list }}
{{- range .Values.config.sets }}{{ $sets = append $sets .name }}{{ end }}
{{- range .Values.cgroups.sets }}
{{- if not (has . $sets) }}
{{- fail (printf "cgroups.sets: %s is not a set of config (it has %s)" . (join ", " $sets)) }}
{{- end }}
{{- end }}
{{- end }}
{{- if eq .Values.privilege.mode "fileCapabilities" }}
{{- if or (has "SYS_ADMIN" .Values.privilege.capabilities) (not (has "PERFMON" .Values.privilege.capabilities)) }}
{{- fail "privilege.mode fileCapabilities needs privilege.capabilities [PERFMON]: the image's binary carries cap_perfmon only; use mode root for SYS_ADMIN" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The OTLP endpoint's port, for the NetworkPolicy: the explicit port, else
443 for https and 80 for http.
*/}}
{{- define "perf-exporter.otlpPort" -}}
{{- $u := urlParse .Values.otlp.endpoint }}
{{- $hostport := splitList ":" $u.host }}
{{- if gt (len $hostport) 1 }}
{{- last $hostport }}
{{- else if eq $u.scheme "https" }}
{{- 443 }}
{{- else }}
{{- 80 }}
{{- end }}
{{- end }}

{{/*
The metrics port and the probes: on the exporter, or on kube-rbac-proxy in
front of it.
*/}}
{{- define "perf-exporter.portAndProbes" -}}
ports:
  - name: {{ .Values.service.portName }}
    containerPort: {{ .Values.port }}
    protocol: TCP
livenessProbe:
  {{- $lp := deepCopy .Values.livenessProbe }}
  {{- $_ := set $lp.httpGet "port" .Values.service.portName }}
  {{- $_ := set $lp.httpGet "scheme" (upper (include "perf-exporter.scheme" .)) }}
  {{- toYaml $lp | nindent 2 }}
readinessProbe:
  {{- $rp := deepCopy .Values.readinessProbe }}
  {{- $_ := set $rp.httpGet "port" .Values.service.portName }}
  {{- $_ := set $rp.httpGet "scheme" (upper (include "perf-exporter.scheme" .)) }}
  {{- toYaml $rp | nindent 2 }}
{{- end }}

{{/*
The exporter's config.yaml: `config`, plus the `cgroups:` section made from
the cgroups values when per-workload counting is on.
*/}}
{{- define "perf-exporter.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- with .Values.cgroups }}
{{- if .enabled }}
{{- $_ := set $cfg "cgroups" (dict "backend" .backend "preset" .preset "containers" .containers "paths" .paths "max_cgroups" .maxCgroups "sets" .sets "per" (ternary "cpu" "node" (.perCpu | default false))) }}
{{- end }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}
