{{/* Names, labels and small pieces every template of the chart shares. */}}

{{- define "taskgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's object name; also the Service's, so the alert rules' `job` label (files/prometheus-rules.yaml). */}}
{{- define "taskgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "taskgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* What selects the gateway's pods (Deployment, Service, PDB, HPA, spread, NetworkPolicy): the test pod lacks the component. */}}
{{- define "taskgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "taskgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end -}}

{{/* Labels of every object; `component` says which part of the release it is. */}}
{{- define "taskgate.commonLabels" -}}
helm.sh/chart: {{ include "taskgate.chart" . }}
app.kubernetes.io/name: {{ include "taskgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: taskgate
{{- end -}}

{{- define "taskgate.labels" -}}
{{ include "taskgate.commonLabels" . }}
app.kubernetes.io/component: gateway
{{- end -}}

{{- define "taskgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "taskgate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "taskgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The chart's Secret: its name, and whether there is anything to put in it. */}}
{{- define "taskgate.secretName" -}}
{{- printf "%s-secrets" (include "taskgate.fullname" .) -}}
{{- end -}}

{{- define "taskgate.secretData" -}}
{{- include "taskgate.checkPlaceholders" . -}}
{{- $data := dict -}}
{{- if and (eq .Values.redis.mode "standalone") .Values.redis.url -}}
{{- $_ := set $data "redis-url" .Values.redis.url -}}
{{- end -}}
{{- if and (ne .Values.redis.mode "standalone") .Values.redis.password -}}
{{- $_ := set $data "redis-password" .Values.redis.password -}}
{{- end -}}
{{- range $name, $value := .Values.secretEnv -}}
{{- $_ := set $data $name $value -}}
{{- end -}}
{{- toYaml $data -}}
{{- end -}}

{{/* The MCP endpoint's path in the rendered config (the test pod calls it). */}}
{{- define "taskgate.mcpPath" -}}
{{- $config := fromYaml (include "taskgate.config" .) -}}
{{- $config.listen.path | default "/mcp" -}}
{{- end -}}
