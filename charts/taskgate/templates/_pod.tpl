{{/* Pieces of the Deployment's pod: its env, the shutdown timing and the topology spread. */}}

{{/* Grace before SIGKILL: the preStop sleep, then the gateway's own shutdown deadline (rounded up to a second), then
a margin; a value given must leave room for both. */}}
{{- define "taskgate.terminationGracePeriodSeconds" -}}
{{- $config := fromYaml (include "taskgate.config" .) -}}
{{- $shutdownMs := int64 (default 0 $config.shutdownTimeoutMs) -}}
{{- if le $shutdownMs 0 -}}
{{- fail "config.shutdownTimeoutMs must be above 0 on Kubernetes: the kubelet kills the pod at terminationGracePeriodSeconds anyway, so the gateway needs a deadline below it" -}}
{{- end -}}
{{- $needed := add .Values.preStopSleepSeconds (div (add $shutdownMs 999) 1000) -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds -}}
{{- add $needed 5 -}}
{{- else if le (int64 .Values.terminationGracePeriodSeconds) (int64 $needed) -}}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed preStopSleepSeconds + config.shutdownTimeoutMs in seconds (%v), or the gateway is killed mid-drain; leave it empty to derive it" .Values.terminationGracePeriodSeconds $needed) -}}
{{- else -}}
{{- .Values.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{- define "taskgate.env" -}}
- name: TASKGATE_CONFIG
  value: /etc/taskgate/taskgate.yaml
# The Pod IP is in listen.allowedHosts: the Host of the kubelet's and Prometheus' requests.
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
# The root filesystem is read-only: HOME and TMPDIR (inherited by stdio upstreams, npx's cache) are the /tmp emptyDir.
- name: HOME
  value: /tmp
- name: TMPDIR
  value: /tmp
{{- $secret := include "taskgate.secretName" . }}
{{- if eq .Values.redis.mode "standalone" }}
- name: TASKGATE_STORE_URL
  valueFrom:
    secretKeyRef:
      {{- if .Values.redis.url }}
      name: {{ $secret }}
      key: redis-url
      {{- else }}
      name: {{ .Values.redis.existingSecret }}
      key: {{ .Values.redis.existingSecretKey }}
      {{- end }}
{{- else if include "taskgate.redisPasswordSource" . }}
- name: TASKGATE_STORE_PASSWORD
  valueFrom:
    secretKeyRef:
      {{- if eq (include "taskgate.redisPasswordSource" .) "chart" }}
      name: {{ $secret }}
      key: redis-password
      {{- else }}
      name: {{ .Values.redis.existingSecret }}
      key: {{ .Values.redis.existingSecretPasswordKey }}
      {{- end }}
{{- end }}
{{- range $name, $_ := .Values.secretEnv }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $name }}
{{- end }}
{{- if .Values.caCertsSecret.name }}
- name: NODE_EXTRA_CA_CERTS
  value: /etc/taskgate-ca/{{ .Values.caCertsSecret.key }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The given constraints (each without a labelSelector gets the pods'), or by default a soft spread over nodes
and zones. */}}
{{- define "taskgate.topologySpreadConstraints" -}}
{{- $selector := dict "matchLabels" (fromYaml (include "taskgate.selectorLabels" .)) -}}
{{- $constraints := list -}}
{{- range .Values.topologySpreadConstraints -}}
{{- $constraints = append $constraints (merge (dict) . (dict "labelSelector" $selector)) -}}
{{- end -}}
{{- if and (not $constraints) .Values.defaultTopologySpread -}}
{{- range list "kubernetes.io/hostname" "topology.kubernetes.io/zone" -}}
{{- $constraints = append $constraints (dict "maxSkew" 1 "topologyKey" . "whenUnsatisfiable" "ScheduleAnyway" "labelSelector" $selector) -}}
{{- end -}}
{{- end -}}
{{- if $constraints -}}{{- toYaml $constraints -}}{{- end -}}
{{- end -}}

{{- define "taskgate.probe" -}}
{{- $settings := index . 1 -}}
httpGet:
  path: {{ index . 0 }}
  port: http
  # Loopback names always pass the gateway's Host check, whatever listen.allowedHosts says.
  httpHeaders:
    - name: Host
      value: localhost
periodSeconds: {{ $settings.periodSeconds }}
timeoutSeconds: {{ $settings.timeoutSeconds }}
failureThreshold: {{ $settings.failureThreshold }}
{{- end -}}
