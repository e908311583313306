{{/* The operator's name: <release>-operator, or just "strom-operator" for a release named strom. */}}
{{- define "strom.fullname" -}}
{{- if eq .Release.Name "strom" -}}
strom-operator
{{- else -}}
{{- printf "%s-strom-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "strom.labels" -}}
app.kubernetes.io/name: strom-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* What the operator's Deployment selects; fixed once installed (a selector is immutable). */}}
{{- define "strom.selectorLabels" -}}
app.kubernetes.io/name: strom-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "strom.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "strom.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: the existing ServiceAccount to run as (serviceAccount.create is false)" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The namespaces the operator watches, comma-separated; "" for every namespace. */}}
{{- define "strom.watchNamespaces" -}}
{{- if .Values.operator.watchNamespaces -}}
{{- join "," .Values.operator.watchNamespaces -}}
{{- else if eq .Values.rbac.scope "namespace" -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/*
For resources of the chart's own CRDs (the example cluster, kopf's peering object): on
`helm install` a post-install hook, because Helm maps every manifest to its API before it
creates anything and the CRDs do not exist yet; from the first `helm upgrade` on, a
release resource (Helm adopts it: it carries the release's ownership metadata). Kept on
`helm uninstall`: it holds the user's data or the operator's state.
*/}}
{{- define "strom.afterCrdsAnnotations" -}}
{{- if .Release.IsInstall -}}
helm.sh/hook: post-install
{{ end -}}
helm.sh/resource-policy: keep
meta.helm.sh/release-name: {{ .Release.Name }}
meta.helm.sh/release-namespace: {{ .Release.Namespace }}
{{- end -}}
