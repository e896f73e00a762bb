{{/* The chart name, cut to 63 characters (a DNS label). */}}
{{- define "oda-analyst.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The resource-name prefix: <release>-<chart>, or the release alone when it already holds
the chart name; cut to 40 so component suffixes still fit in 63. */}}
{{- define "oda-analyst.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "oda-analyst.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. part-of is the operator's own value (controller/names.py), so the
policies below select the pods the operator creates as well. */}}
{{- define "oda-analyst.labels" -}}
helm.sh/chart: {{ include "oda-analyst.chart" . }}
{{ include "oda-analyst.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: oda-analyst
{{- end }}

{{- define "oda-analyst.selectorLabels" -}}
app.kubernetes.io/name: {{ include "oda-analyst.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels and selector of one component: (dict "root" $ "component" "operator"). */}}
{{- define "oda-analyst.componentLabels" -}}
{{ include "oda-analyst.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "oda-analyst.componentSelector" -}}
{{ include "oda-analyst.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "oda-analyst.operatorServiceAccount" -}}
{{- if .Values.operator.serviceAccount.create }}
{{- default (printf "%s-operator" (include "oda-analyst.fullname" .)) .Values.operator.serviceAccount.name }}
{{- else }}
{{- required "operator.serviceAccount.name: name an existing ServiceAccount when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "oda-analyst.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "oda-analyst.sandboxImage" -}}
{{- printf "%s:%s" .Values.sandboxImage.repository (default .Chart.AppVersion .Values.sandboxImage.tag) }}
{{- end }}

{{/* The Secret holding the lake's S3 keys (accessKey, secretKey). */}}
{{- define "oda-analyst.s3Secret" -}}
{{- if .Values.minio.enabled }}
{{- printf "%s-minio" (include "oda-analyst.fullname" .) }}
{{- else if .Values.lake.s3.create }}
{{- printf "%s-lake" (include "oda-analyst.fullname" .) }}
{{- else }}
{{- required "lake.s3.existingSecret: name the Secret (keys accessKey, secretKey) the lake is read with, or set lake.s3.create: true, or minio.enabled: true" .Values.lake.s3.existingSecret }}
{{- end }}
{{- end }}

{{- define "oda-analyst.s3Endpoint" -}}
{{- if .Values.minio.enabled }}
{{- printf "http://%s-minio:9000" (include "oda-analyst.fullname" .) }}
{{- else }}
{{- .Values.lake.s3.endpoint }}
{{- end }}
{{- end }}

{{- define "oda-analyst.sparqlEndpoint" -}}
{{- if .Values.oxigraph.enabled }}
{{- printf "http://%s-oxigraph:%d/query" (include "oda-analyst.fullname" .) (int .Values.oxigraph.port) }}
{{- else }}
{{- required "sparql.endpoint: the operator's builder pods and the retriever must share a SPARQL store; set sparql.endpoint or oxigraph.enabled: true" .Values.sparql.endpoint }}
{{- end }}
{{- end }}

{{- define "oda-analyst.sparqlUpdateUrl" -}}
{{- if .Values.oxigraph.enabled }}
{{- printf "http://%s-oxigraph:%d/update" (include "oda-analyst.fullname" .) (int .Values.oxigraph.port) }}
{{- else }}
{{- .Values.sparql.updateUrl }}
{{- end }}
{{- end }}

{{- define "oda-analyst.sparqlGspUrl" -}}
{{- if .Values.oxigraph.enabled }}
{{- printf "http://%s-oxigraph:%d/store" (include "oda-analyst.fullname" .) (int .Values.oxigraph.port) }}
{{- else }}
{{- .Values.sparql.gspUrl }}
{{- end }}
{{- end }}

{{- define "oda-analyst.redisUrl" -}}
{{- if .Values.redis.enabled }}
{{- printf "redis://%s-redis:6379/0" (include "oda-analyst.fullname" .) }}
{{- else }}
{{- .Values.redis.url }}
{{- end }}
{{- end }}

{{/* The Secret (key redis.auth.key) holding the Redis password: the bundled Redis always has
one (redis.auth.existingSecret, or <fullname>-redis, generated); an external Redis has one when
redis.auth.existingSecret names it. Empty = no password. */}}
{{- define "oda-analyst.redisSecret" -}}
{{- if .Values.redis.auth.existingSecret }}
{{- .Values.redis.auth.existingSecret }}
{{- else if .Values.redis.enabled }}
{{- printf "%s-redis" (include "oda-analyst.fullname" .) }}
{{- end }}
{{- end }}

{{/* A NetworkPolicy peer: the pods of this release (release and component labels) in the
release's namespace, the only namespace a peer without a namespaceSelector matches:
(dict "root" $ "components" (list "operator" "analyst")). */}}
{{- define "oda-analyst.releasePeer" -}}
- podSelector:
    matchLabels:
      {{- include "oda-analyst.selectorLabels" .root | nindent 6 }}
    matchExpressions:
      - {key: app.kubernetes.io/component, operator: In, values: {{ toJson .components }}}
{{- end }}

{{/* A NetworkPolicy peer for the pods the operator creates in the queries' namespaces
(builder Jobs): labelled with this release (ODA_OPERATOR_INSTANCE) and the
component, in the served namespaces only (all namespaces when operator.watchNamespaces is
empty): (dict "root" $ "component" "vkg-builder"). */}}
{{- define "oda-analyst.workloadPeer" -}}
{{- $watch := .root.Values.operator.watchNamespaces }}
- podSelector:
    matchLabels:
      app.kubernetes.io/instance: {{ .root.Release.Name }}
      app.kubernetes.io/component: {{ .component }}
  {{- if $watch }}
  namespaceSelector:
    matchExpressions:
      - {key: kubernetes.io/metadata.name, operator: In, values: {{ toJson $watch }}}
  {{- else }}
  namespaceSelector: {}
  {{- end }}
{{- end }}

{{/* The model endpoint: the first vLLM model, or the external one. */}}
{{- define "oda-analyst.llmBaseUrl" -}}
{{- if .Values.vllm.enabled }}
{{- $m := first .Values.vllm.models }}
{{- printf "http://%s-vllm-%s:%d/v1" (include "oda-analyst.fullname" .) $m.name (int .Values.vllm.port) }}
{{- else }}
{{- .Values.llm.baseUrl }}
{{- end }}
{{- end }}

{{- define "oda-analyst.llmModel" -}}
{{- if .Values.vllm.enabled }}
{{- (first .Values.vllm.models).name }}
{{- else }}
{{- .Values.llm.model }}
{{- end }}
{{- end }}

{{/* The Secret of the release's internal tokens (keys mcpToken, alertsToken, modelKey). */}}
{{- define "oda-analyst.internalSecret" -}}
{{- .Values.internalAuth.existingSecret | default (printf "%s-internal" (include "oda-analyst.fullname" .)) }}
{{- end }}

{{/* Who may create an AnalystQuery for another user (ODA_WEBHOOK_TRUSTED_CREATORS): the
operator's own ServiceAccount (scheduled runs, alert queries) and webhook.trustedCreators. */}}
{{- define "oda-analyst.trustedCreators" -}}
{{- $sa := printf "system:serviceaccount:%s:%s" .Release.Namespace (include "oda-analyst.operatorServiceAccount" .) }}
{{- join "," (concat (list $sa) .Values.webhook.trustedCreators) }}
{{- end }}

{{/* The model endpoints a query's spec.model.baseUrl may name (ODA_WEBHOOK_MODEL_URLS): the
release's own (each vLLM model's Service, or llm.baseUrl) and webhook.modelBaseUrls. */}}
{{- define "oda-analyst.allowedModelUrls" -}}
{{- $own := list }}
{{- if .Values.vllm.enabled }}
{{- range .Values.vllm.models }}
{{- $own = append $own (printf "http://%s-vllm-%s:%d/v1" (include "oda-analyst.fullname" $) .name (int $.Values.vllm.port)) }}
{{- end }}
{{- else if .Values.llm.baseUrl }}
{{- $own = list .Values.llm.baseUrl }}
{{- end }}
{{- join "," (concat $own .Values.webhook.modelBaseUrls) }}
{{- end }}

{{/* The settings (ODA_*) the operator and the analyst services share. */}}
{{- define "oda-analyst.env" -}}
- {name: ODA_LAKE, value: {{ .Values.lake.uri | quote }}}
{{- with (include "oda-analyst.s3Endpoint" .) }}
- {name: ODA_S3_ENDPOINT, value: {{ . | quote }}}
{{- end }}
- {name: ODA_S3_REGION, value: {{ .Values.lake.s3.region | quote }}}
- {name: ODA_S3_TIMEOUT_S, value: {{ .Values.lake.s3.timeoutSeconds | quote }}}
- name: ODA_S3_ACCESS_KEY
  valueFrom: {secretKeyRef: {name: {{ include "oda-analyst.s3Secret" . }}, key: accessKey}}
- name: ODA_S3_SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ include "oda-analyst.s3Secret" . }}, key: secretKey}}
- {name: ODA_SPARQL_ENDPOINT, value: {{ include "oda-analyst.sparqlEndpoint" . | quote }}}
{{- with (include "oda-analyst.sparqlUpdateUrl" .) }}
- {name: ODA_SPARQL_UPDATE_URL, value: {{ . | quote }}}
{{- end }}
{{- with (include "oda-analyst.sparqlGspUrl" .) }}
- {name: ODA_SPARQL_GSP_URL, value: {{ . | quote }}}
{{- end }}
{{- with (include "oda-analyst.redisUrl" .) }}
- {name: ODA_REDIS_URL, value: {{ . | quote }}}
{{- with (include "oda-analyst.redisSecret" $) }}
- name: ODA_REDIS_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ . }}, key: {{ $.Values.redis.auth.key }}}}
{{- end }}
{{- end }}
# the release's token: the analyst's MCP servers ask it of every call, the others send it
- name: ODA_MCP_TOKEN
  valueFrom: {secretKeyRef: {name: {{ include "oda-analyst.internalSecret" . }}, key: mcpToken}}
- {name: ODA_DATA_DIR, value: /var/lib/oda-analyst}
- {name: ODA_CACHE_DIR, value: /var/cache/oda-analyst}
- {name: ODA_ROW_LIMIT, value: {{ .Values.analyst.rowLimit | quote }}}
{{- with (include "oda-analyst.llmBaseUrl" .) }}
- {name: ODA_LLM_BASE_URL, value: {{ . | quote }}}
- {name: ODA_LLM_MODEL, value: {{ include "oda-analyst.llmModel" $ | quote }}}
{{- end }}
{{- if .Values.vllm.enabled }}
# the release's model servers ask their key (VLLM_API_KEY) of every /v1 call
- name: ODA_LLM_API_KEY
  valueFrom: {secretKeyRef: {name: {{ include "oda-analyst.internalSecret" . }}, key: modelKey}}
{{- else if .Values.llm.apiKeySecret }}
- name: ODA_LLM_API_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.llm.apiKeySecret }}, key: apiKey}}
{{- end }}
{{- if .Values.langfuse.host }}
- {name: ODA_LANGFUSE_HOST, value: {{ .Values.langfuse.host | quote }}}
- name: ODA_LANGFUSE_PUBLIC_KEY
  valueFrom: {secretKeyRef: {name: {{ required "langfuse.existingSecret: name the Secret (keys publicKey, secretKey) when langfuse.host is set" .Values.langfuse.existingSecret }}, key: publicKey}}
- name: ODA_LANGFUSE_SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.langfuse.existingSecret }}, key: secretKey}}
{{- end }}
{{- end }}

{{/* The writable folders of a read-only-root product container. */}}
{{- define "oda-analyst.scratchMounts" -}}
- {name: data, mountPath: /var/lib/oda-analyst}
- {name: cache, mountPath: /var/cache/oda-analyst}
- {name: tmp, mountPath: /tmp}
{{- end }}

{{- define "oda-analyst.scratchVolumes" -}}
- {name: data, emptyDir: {}}
- {name: cache, emptyDir: {}}
- {name: tmp, emptyDir: {}}
{{- end }}

{{/* Where the web UI keeps history: ui.history, or (empty) the release's Redis when there is
one, else SQLite on the pod's scratch volume (lost with the pod). */}}
{{- define "oda-analyst.uiHistory" -}}
{{- if .Values.ui.history }}
{{- .Values.ui.history }}
{{- else if include "oda-analyst.redisUrl" . }}
{{- "redis" }}
{{- else }}
{{- "sqlite" }}
{{- end }}
{{- end }}

{{/* The operator's rules on namespaced objects, in every namespace (its ClusterRole) or in each
served one (a Role): its own resources, and (dict "peerings" "[kopfpeerings]") the rest. */}}
{{- define "oda-analyst.operatorOwnRules" -}}
# Its own resources, and their status.
- apiGroups: [oda-analyst.dev]
  resources: [analystqueries, vkgcaches]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [oda-analyst.dev]
  resources: [analystqueries/status, vkgcaches/status]
  verbs: [get, patch]
{{- end }}

{{- define "oda-analyst.operatorNamespacedRules" -}}
# kopf: peering, events.
- apiGroups: [kopf.dev]
  resources: {{ .peerings }}
  verbs: [get, list, watch, patch]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create]
# What a query runs: the builder Job (the users' sandbox pods, their fences and exec into them
# are the analyst's: analyst-rbac.yaml).
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, create, delete]
- apiGroups: [""]
  resources: [pods]
  # a failed builder Job's pods, for why it failed
  verbs: [get, list]
{{- end }}

{{/* Names of the release's cluster-wide objects hold the namespace too (like the webhook
configurations), so that two releases, even of one name in two namespaces, never share one. */}}
{{- define "oda-analyst.clusterName" -}}
{{- printf "%s-%s" (include "oda-analyst.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The gVisor RuntimeClass the sandbox pods ask for (ODA_OPERATOR_RUNTIME_CLASS): the release's
own unless gvisor.runtimeClassName names one, `gvisor` when the release creates none. */}}
{{- define "oda-analyst.runtimeClassName" -}}
{{- if .Values.gvisor.runtimeClassName }}
{{- .Values.gvisor.runtimeClassName }}
{{- else if .Values.gvisor.createRuntimeClass }}
{{- printf "%s-gvisor" (include "oda-analyst.clusterName" .) }}
{{- else }}
{{- "gvisor" }}
{{- end }}
{{- end }}

{{/* kopf's peering object of the operator's replicas (ODA_OPERATOR_PEERING): one per release,
so that the replicas of two releases never pause each other. */}}
{{- define "oda-analyst.peeringName" -}}
{{- include "oda-analyst.clusterName" . }}
{{- end }}
