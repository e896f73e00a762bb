{{/* The analyst's ServiceAccount: it starts the users' sandbox pods (the code agent's scripts
of the queries it answers). */}}
{{- define "oda-analyst.analystServiceAccount" -}}
{{- if .Values.analyst.serviceAccount.create }}
{{- default (printf "%s-analyst" (include "oda-analyst.fullname" .)) .Values.analyst.serviceAccount.name }}
{{- else }}
{{- required "analyst.serviceAccount.name: name an existing ServiceAccount when analyst.serviceAccount.create is false" .Values.analyst.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* What the analyst may do in a namespace whose queries it answers (and in the web UI's sandbox
namespace): a code pod of the user, exec into it (its files in and out: it has no network), and
its network fence (pipeline/sandbox_pod.py). */}}
{{- define "oda-analyst.analystRules" -}}
- apiGroups: [""]
  resources: [pods]
  # delete: a code pod that cannot start or outruns its script's limit, a web UI run's pod
  verbs: [get, list, create, delete]
- apiGroups: [""]
  # the pod's files in and out, as kubectl cp does (a websocket exec is authorized as get on
  # older API servers, as create on newer ones)
  resources: [pods/exec]
  verbs: [get, create]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, create]
{{- end }}

{{/* Where the operator reaches the analyst's pipeline port. */}}
{{- define "oda-analyst.pipelineUrl" -}}
{{- printf "http://%s-pipeline:%d" (include "oda-analyst.fullname" .) (int .Values.analyst.ports.pipeline) }}
{{- end }}

{{/* How many queries the operator sends the analyst at once: operator.maxQueries.cluster, but
no more than the analyst replicas run at once (replicas x pipelineMaxConcurrent), so that a query
waiting for a place waits in the operator, where its status says so, not unseen in an analyst. */}}
{{- define "oda-analyst.maxQueries" -}}
{{- $capacity := mul (max 1 (int .Values.analyst.replicas)) (int .Values.analyst.pipelineMaxConcurrent) }}
{{- min (int .Values.operator.maxQueries.cluster) $capacity }}
{{- end }}

{{/* The namespace of the web UI users' sandbox pods (their code runs through the analyst's code
agent, for no AnalystQuery): analyst.sandboxNamespace, else the release's namespace when the UI
is enabled; empty when neither (then only queries run code, each in its own namespace). */}}
{{- define "oda-analyst.uiSandboxNamespace" -}}
{{- if .Values.analyst.sandboxNamespace }}
{{- .Values.analyst.sandboxNamespace }}
{{- else if .Values.ui.enabled }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}
