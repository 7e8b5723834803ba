{{/*
The taskgate config the chart renders: what Kubernetes needs (listen address, Host names, the Redis store from
redis.*, drain and shutdown settings), with .Values.config deep-merged over it. Secrets are `${VAR}` references to
env vars the Deployment fills from Secrets; _secrets.tpl fails the render when a literal sits at a secret's place.
*/}}

{{/* The Host names the gateway accepts: its Service's DNS names, the Pod IP (kubelet and Prometheus use it), ingress
and route hosts (wildcards cannot be matched exactly: they are left to allowedHosts), and allowedHosts. */}}
{{- define "taskgate.allowedHosts" -}}
{{- $fullname := include "taskgate.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $hosts := list $fullname (printf "%s.%s" $fullname $ns) (printf "%s.%s.svc" $fullname $ns) (printf "%s.%s.svc.%s" $fullname $ns .Values.clusterDomain) "${POD_IP}" -}}
{{- if .Values.ingress.enabled -}}
{{- range .Values.ingress.hosts -}}
{{- if not (hasPrefix "*" .host) -}}{{- $hosts = append $hosts .host -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- if .Values.httpRoute.enabled -}}
{{- range .Values.httpRoute.hostnames -}}
{{- if not (hasPrefix "*" .) -}}{{- $hosts = append $hosts . -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml (concat $hosts .Values.allowedHosts | uniq) -}}
{{- end -}}

{{- define "taskgate.storeConfig" -}}
{{- $redis := .Values.redis -}}
{{- $store := dict "type" "redis" "prefix" $redis.prefix -}}
{{- if eq $redis.mode "standalone" -}}
{{- if not (or $redis.url $redis.existingSecret) -}}
{{- fail "redis.url or redis.existingSecret is required: taskgate's replicas share one Redis (or set redis.mode to sentinel or cluster)" -}}
{{- end -}}
{{- $_ := set $store "url" "${TASKGATE_STORE_URL}" -}}
{{- else -}}
{{- $access := dict -}}
{{- if $redis.username -}}{{- $_ := set $access "username" $redis.username -}}{{- end -}}
{{- if include "taskgate.redisPasswordSource" . -}}{{- $_ := set $access "password" "${TASKGATE_STORE_PASSWORD}" -}}{{- end -}}
{{- if $redis.tls -}}{{- $_ := set $access "tls" true -}}{{- end -}}
{{- if eq $redis.mode "sentinel" -}}
{{- $name := required "redis.sentinel.name is required with redis.mode sentinel: the primary's name as the sentinels monitor it" $redis.sentinel.name -}}
{{- if not $redis.sentinel.nodes -}}{{- fail "redis.sentinel.nodes is required with redis.mode sentinel: the sentinels' redis://host:port URLs" -}}{{- end -}}
{{- $_ := set $store "sentinel" (merge (dict "name" $name "nodes" $redis.sentinel.nodes) $access) -}}
{{- else -}}
{{- if not $redis.cluster.nodes -}}{{- fail "redis.cluster.nodes is required with redis.mode cluster: redis://host:port URLs of some of its nodes" -}}{{- end -}}
{{- $_ := set $store "cluster" (merge (dict "nodes" $redis.cluster.nodes) $access) -}}
{{- end -}}
{{- end -}}
{{- toYaml $store -}}
{{- end -}}

{{/* Where the Sentinel/Cluster password comes from: "chart", "existing", or empty (none). */}}
{{- define "taskgate.redisPasswordSource" -}}
{{- if ne .Values.redis.mode "standalone" -}}
{{- if .Values.redis.password -}}chart
{{- else if and .Values.redis.existingSecret .Values.redis.existingSecretPasswordKey -}}existing
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "taskgate.baseConfig" -}}
listen:
  host: 0.0.0.0
  port: 8080
  allowedHosts:
    {{- include "taskgate.allowedHosts" . | nindent 4 }}
store:
  {{- include "taskgate.storeConfig" . | nindent 2 }}
log:
  level: info
replicas:
  drainTimeoutMs: 20000
shutdownTimeoutMs: 25000
{{- end -}}

{{/* Merges map `src` into map `dst` in place: maps merge key by key, anything else (lists too) replaces. Unlike
sprig's mergeOverwrite, a false, 0 or "" from `src` wins too. */}}
{{- define "taskgate.mergeInto" -}}
{{- $dst := index . 0 -}}
{{- range $key, $value := index . 1 -}}
{{- $current := get $dst $key -}}
{{- if and (kindIs "map" $value) (kindIs "map" $current) -}}
{{- include "taskgate.mergeInto" (list $current $value) -}}
{{- else -}}
{{- $_ := set $dst $key $value -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The whole config as YAML: templates that need a setting read it with fromYaml. */}}
{{- define "taskgate.config" -}}
{{- if not (and (kindIs "map" .Values.config.upstreams) .Values.config.upstreams) -}}
{{- fail "config.upstreams is required: the MCP servers behind the gateway, by name (docs/configuration.md#upstreams)" -}}
{{- end -}}
{{- include "taskgate.checkSecrets" .Values.config -}}
{{- $config := fromYaml (include "taskgate.baseConfig" .) -}}
{{- include "taskgate.mergeInto" (list $config (deepCopy .Values.config)) -}}
{{- toYaml $config -}}
{{- end -}}
