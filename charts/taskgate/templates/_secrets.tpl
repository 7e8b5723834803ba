{{/*
Keeps secrets out of the ConfigMap and placeholders out of the Secret. The config (.Values.config) is walked and a
value at a secret's place (the places `taskgate check-config` redacts, src/config/render.ts) must be a `${VAR}`
reference, at most behind an auth scheme word ("Bearer ${TOKEN}"); so must a URL's password and its credential-like
query parameters. A literal fails the render with the value's path.
*/}}

{{- define "taskgate.secretPathPattern" -}}
(^|\.)(clientSecret|privateKey|password|sentinelPassword|passphrase)$|^auth\.apiKeys\[\d+\]\.key$|^identity\.sealingKeys\[\d+\]\.key$|^webhooks\[\d+\]\.secret$|\.tls\.(key|pfx)$|^upstreams\.[^.]+\.headers\.[^.]*(?i:authorization|token|secret|key|cookie|password|signature)|^upstreams\.[^.]+\.env\.[^.]*(?i:token|key|secret|password|passwd|credential|auth)
{{- end -}}

{{- define "taskgate.literalSecretMessage" -}}
{{- printf "config.%s holds a literal secret, and the config goes into a ConfigMap: write ${SOME_VAR} there and give SOME_VAR from a Secret (secretEnv, extraEnv or extraEnvFrom)" . -}}
{{- end -}}

{{- define "taskgate.checkSecrets" -}}
{{- include "taskgate.walkSecrets" (list "" .) -}}
{{- end -}}

{{- define "taskgate.walkSecrets" -}}
{{- $path := index . 0 -}}
{{- $value := index . 1 -}}
{{- if kindIs "map" $value -}}
{{- range $key, $item := $value -}}
{{- include "taskgate.walkSecrets" (list (ternary $key (printf "%s.%s" $path $key) (eq $path "")) $item) -}}
{{- end -}}
{{- else if kindIs "slice" $value -}}
{{- range $i, $item := $value -}}
{{- include "taskgate.walkSecrets" (list (printf "%s[%d]" $path $i) $item) -}}
{{- end -}}
{{- else if not (kindIs "invalid" $value) -}}
{{- include "taskgate.checkSecretValue" (list $path $value) -}}
{{- end -}}
{{- end -}}

{{- define "taskgate.checkSecretValue" -}}
{{- $path := index . 0 -}}
{{- $text := toString (index . 1) -}}
{{- $reference := "^\\$\\{[^}]+\\}$" -}}
{{- if regexMatch (include "taskgate.secretPathPattern" .) $path -}}
{{- $rest := regexReplaceAll "\\$\\{[^}]*\\}" $text "" | trim -}}
{{- if or (not (contains "${" $text)) (not (regexMatch "^(?i:bearer|basic|token)?$" $rest)) -}}
{{- fail (include "taskgate.literalSecretMessage" $path) -}}
{{- end -}}
{{- else if regexMatch "^[A-Za-z][A-Za-z0-9+.-]*://" $text -}}
{{- $userinfo := regexFind "^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\\s]*@" $text -}}
{{- if contains ":" (regexReplaceAll "^[^:]*://" $userinfo "") -}}
{{- $password := regexReplaceAll "^[^:]*://[^:]*:(.*)@$" $userinfo "${1}" -}}
{{- if not (regexMatch $reference $password) -}}
{{- fail (printf "%s (the password in its URL)" (include "taskgate.literalSecretMessage" $path)) -}}
{{- end -}}
{{- end -}}
{{- range regexFindAll "[?&][^=&#]*(?i:token|key|secret|password|passwd|auth|signature|sig)[^=&#]*=[^&#]*" $text -1 -}}
{{- $param := regexReplaceAll "^[?&][^=]*=" . "" -}}
{{- if and $param (not (regexMatch $reference $param)) -}}
{{- fail (printf "%s (a credential in its URL's query)" (include "taskgate.literalSecretMessage" $path)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A value left as a placeholder where a secret is required: empty, "change-me", "<your key>", "TODO", ... */}}
{{- define "taskgate.isPlaceholder" -}}
{{- if or (eq (trim .) "") (regexMatch "(?i)(change|replace)[-_ ]?me|^(todo|tbd|fixme|x{3,}|placeholder|secret|password|\\.\\.\\.)$|^<.*>$" (trim .)) -}}true{{- end -}}
{{- end -}}

{{/* Fails on placeholders in what the chart would put in its Secret. */}}
{{- define "taskgate.checkPlaceholders" -}}
{{- range $name, $value := .Values.secretEnv -}}
{{- if include "taskgate.isPlaceholder" (toString $value) -}}
{{- fail (printf "secretEnv.%s is empty or a placeholder (%q): give the real secret (e.g. --set-file from your secret store), or leave the entry out" $name (toString $value)) -}}
{{- end -}}
{{- end -}}
{{- with .Values.redis.url -}}
{{- $userinfo := regexFind "^rediss?://[^/?#@\\s]*@" . -}}
{{- $password := regexReplaceAll "^rediss?://[^:@]*:?(.*)@$" $userinfo "${1}" -}}
{{- if and $userinfo $password (include "taskgate.isPlaceholder" $password) -}}
{{- fail "redis.url carries a placeholder password: give the real one, or keep the URL in a Secret of yours (redis.existingSecret)" -}}
{{- end -}}
{{- end -}}
{{- if and (ne .Values.redis.mode "standalone") .Values.redis.password (include "taskgate.isPlaceholder" .Values.redis.password) -}}
{{- fail "redis.password is a placeholder: give the real one, or keep it in a Secret of yours (redis.existingSecret)" -}}
{{- end -}}
{{- end -}}
