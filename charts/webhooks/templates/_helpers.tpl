{{/* Chart name, truncated to a DNS label. */}}
{{- define "webhooks.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name; object names append -<component>. */}}
{{- define "webhooks.fullname" -}}
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

{{- define "webhooks.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "webhooks.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hookpipe
{{- end }}

{{- define "webhooks.selectorLabels" -}}
app.kubernetes.io/name: {{ include "webhooks.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The components, in pipeline order. */}}
{{- define "webhooks.components" -}}
dispatcher deliverer retrier recorder
{{- end }}

{{/* Consumer group of a component (dict "c" name). */}}
{{- define "webhooks.group" -}}
webhooks-{{ .c }}
{{- end }}

{{- define "webhooks.topicPrefix" -}}
{{- if ne .Values.kafka.topicPrefix "-" }}{{ .Values.kafka.topicPrefix }}{{ end }}
{{- end }}

{{/* Topics a component's group consumes, space-separated (dict "root" $ "c" name). */}}
{{- define "webhooks.consumedTopics" -}}
{{- $p := include "webhooks.topicPrefix" .root }}
{{- if eq .c "dispatcher" }}{{ $p }}events
{{- else if eq .c "deliverer" }}{{ $p }}deliveries.high {{ $p }}deliveries {{ $p }}deliveries.low {{ $p }}redeliveries
{{- else if eq .c "recorder" }}{{ $p }}attempts
{{- else if eq .c "retrier" }}
{{- $out := list }}
{{- range splitList "," (include "webhooks.retryTiers" .root) }}
{{- $out = append $out (printf "%sretry.%s" $p .) }}
{{- end }}
{{- join " " $out }}
{{- end }}
{{- end }}

{{/*
kafka.retryTiers, comma-separated without blanks, after checking that every
tier is written the way its topic is named (FormatDelay in topics/names.go):
Go's time.Duration form of a whole number of seconds, without a trailing
"0s", then without a trailing "0m" (5s, 1m, 1h30m, 1h0m5s; not 60s, 90m or
1h5s). The components accept any duration and name the topic canonically,
but the chart names the retrier's KEDA triggers after the tiers as written:
a tier written otherwise would be watched on a topic that does not exist.
*/}}
{{- define "webhooks.retryTiers" -}}
{{- $unit := dict "h" 3600 "m" 60 "s" 1 }}
{{- $out := list }}
{{- range splitList "," .Values.kafka.retryTiers }}
{{- $tier := trim . }}
{{- if $tier }}
{{- if not (regexMatch "^([0-9]+h)?([0-9]+m)?([0-9]+s)?$" $tier) }}
{{- fail (printf "kafka.retryTiers: %q is not a delay in whole hours, minutes and seconds (5s, 5m, 1h30m)" $tier) }}
{{- end }}
{{- $secs := 0 }}
{{- range regexFindAll "[0-9]+[hms]" $tier -1 }}
{{- $secs = add $secs (mul (atoi (trimSuffix (regexFind "[hms]$" .) .)) (index $unit (regexFind "[hms]$" .))) }}
{{- end }}
{{- if lt $secs 1 }}
{{- fail (printf "kafka.retryTiers: %q is shorter than 1s" $tier) }}
{{- end }}
{{- $canonical := duration (toString $secs) }}
{{- if hasSuffix "m0s" $canonical }}{{ $canonical = trimSuffix "0s" $canonical }}{{ end }}
{{- if hasSuffix "h0m" $canonical }}{{ $canonical = trimSuffix "0m" $canonical }}{{ end }}
{{- if ne $canonical $tier }}
{{- fail (printf "kafka.retryTiers: write %q as %q, the way its topic is named (retry.%s): the retrier's KEDA triggers are named after the tiers as written" $tier $canonical $canonical) }}
{{- end }}
{{- $out = append $out $tier }}
{{- end }}
{{- end }}
{{- if not $out }}
{{- fail "kafka.retryTiers: at least one tier is required" }}
{{- end }}
{{- join "," $out }}
{{- end }}

{{/* Most replicas of a component: its maxReplicas, at most kafka.partitions, and not below its minReplicas (dict "root" $ "c" name "v" values). */}}
{{- define "webhooks.maxReplicas" -}}
{{- $parts := int .root.Values.kafka.partitions }}
{{- $max := int (default 0 .v.autoscaling.maxReplicas) }}
{{- if gt $max $parts }}
{{- fail (printf "%s.autoscaling.maxReplicas (%d) is more than kafka.partitions (%d): replicas beyond the partitions of a topic get none and sit idle" .c $max $parts) }}
{{- end }}
{{- if eq $max 0 }}{{ $max = $parts }}{{ end }}
{{- $min := int .v.autoscaling.minReplicas }}
{{- if gt $min $max }}
{{- fail (printf "%s.autoscaling.minReplicas (%d) is more than its most replicas (%d: maxReplicas, or kafka.partitions when that is 0): the autoscaler would reject the bounds; lower minReplicas or add partitions" .c $min $max) }}
{{- end }}
{{- $max }}
{{- end }}

{{/* "true" when something other than the Deployment sets the replica count. */}}
{{- define "webhooks.autoscaled" -}}
{{- if or .root.Values.keda.enabled .v.autoscaling.cpu.enabled }}true{{ end }}
{{- end }}

{{- define "webhooks.secretName" -}}
{{- default (printf "%s-secrets" (include "webhooks.fullname" .)) .Values.secrets.existingSecret }}
{{- end }}

{{/*
Where the components get WEBHOOKS_REDIS_URL, which must never go missing:
without it they fall back to redis://127.0.0.1:6379/0 and run without
breakers, rate limits and dedup.
  secret          no secrets.existingSecret: redis.url, in the chart's Secret
  configMap       secrets.existingSecret and a redis.url: redis.url, in the
                  ConfigMap (so it must not carry credentials); a
                  WEBHOOKS_REDIS_URL in the existing Secret overrides it
                  (envFrom: the Secret comes after the ConfigMap)
  existingSecret  secrets.existingSecret and an empty redis.url: the
                  existing Secret's WEBHOOKS_REDIS_URL, as a required
                  secretKeyRef; pods do not start without it
*/}}
{{- define "webhooks.redisURLSource" -}}
{{- if not .Values.secrets.existingSecret }}secret
{{- else if not .Values.redis.url }}existingSecret
{{- else if contains "@" .Values.redis.url }}
{{- fail "redis.url carries credentials, which would land in the ConfigMap with secrets.existingSecret: put WEBHOOKS_REDIS_URL in that Secret and set redis.url to \"\"" }}
{{- else }}configMap
{{- end }}
{{- end }}

{{- define "webhooks.configName" -}}
{{ include "webhooks.fullname" . }}-config
{{- end }}

{{- define "webhooks.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "webhooks.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "webhooks.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/* Where the Secret kafka.tls.secretName is mounted (WEBHOOKS_KAFKA_TLS_DIR). */}}
{{- define "webhooks.kafkaTLSDir" -}}
/etc/webhooks/kafka-tls
{{- end }}

{{/* Where the topics live, as ConfigMap data entries (name: "value"). */}}
{{- define "webhooks.kafkaTopicsConfig" -}}
WEBHOOKS_KAFKA_BROKERS: {{ .Values.kafka.brokers | quote }}
WEBHOOKS_TOPIC_PREFIX: {{ .Values.kafka.topicPrefix | quote }}
WEBHOOKS_RETRY_TIERS: {{ include "webhooks.retryTiers" . | quote }}
{{- end }}

{{/* The non-secret TLS and SASL settings, as ConfigMap data entries (leading newline; trim it); empty when both are off. The password is never here: see webhooks.kafkaEnv. */}}
{{- define "webhooks.kafkaSecurityConfig" -}}
{{- if .Values.kafka.tls.enabled }}
WEBHOOKS_KAFKA_TLS: "true"
WEBHOOKS_KAFKA_TLS_DIR: {{ include "webhooks.kafkaTLSDir" . }}
{{- end }}
{{- if .Values.kafka.sasl.enabled }}
WEBHOOKS_KAFKA_SASL_MECHANISM: {{ .Values.kafka.sasl.mechanism | quote }}
WEBHOOKS_KAFKA_SASL_USERNAME: {{ .Values.kafka.sasl.username | quote }}
{{- end }}
{{- end }}

{{/* Name of the hook Secret holding the SASL password for the topics job (topics-secret.yaml). */}}
{{- define "webhooks.topicsSecretName" -}}
{{ include "webhooks.fullname" . }}-topics-kafka
{{- end }}

{{/*
The Kafka settings as env entries, for the topics hook job: a pre-install
hook runs before the release's ConfigMap and Secret exist, so it cannot
read them (envFrom). The ConfigMap's entries of kafkaTopicsConfig and
kafkaSecurityConfig, plus the SASL password from a secretKeyRef:
secrets.existingSecret, or else the hook Secret of topics-secret.yaml.
Never a literal password.
*/}}
{{- define "webhooks.kafkaEnv" -}}
{{- $env := list }}
{{- $cfg := merge (include "webhooks.kafkaTopicsConfig" . | fromYaml) (include "webhooks.kafkaSecurityConfig" . | fromYaml) }}
{{- range $k, $v := $cfg }}
{{- $env = append $env (dict "name" $k "value" (toString $v)) }}
{{- end }}
{{- if .Values.kafka.sasl.enabled }}
{{- $ref := dict "name" (default (include "webhooks.topicsSecretName" .) .Values.secrets.existingSecret) "key" "WEBHOOKS_KAFKA_SASL_PASSWORD" }}
{{- $env = append $env (dict "name" "WEBHOOKS_KAFKA_SASL_PASSWORD" "valueFrom" (dict "secretKeyRef" $ref)) }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/* The container's volumeMounts for Kafka TLS; empty when TLS is off. */}}
{{- define "webhooks.kafkaTLSVolumeMounts" -}}
{{- if .Values.kafka.tls.enabled -}}
- name: kafka-tls
  mountPath: {{ include "webhooks.kafkaTLSDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/* The pod's volumes for Kafka TLS: the Secret kafka.tls.secretName, which must exist before install (the topics hook job mounts it too); empty when TLS is off. */}}
{{- define "webhooks.kafkaTLSVolumes" -}}
{{- if .Values.kafka.tls.enabled -}}
- name: kafka-tls
  secret:
    secretName: {{ required "kafka.tls.secretName is required with kafka.tls.enabled" .Values.kafka.tls.secretName }}
{{- end }}
{{- end }}
