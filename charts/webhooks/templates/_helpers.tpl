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
{{- else if eq .c "deliverer" }}{{ $p }}deliveries
{{- else if eq .c "recorder" }}{{ $p }}attempts
{{- else if eq .c "retrier" }}
{{- $out := list }}
{{- range splitList "," .root.Values.kafka.retryTiers }}
{{- if trim . }}{{ $out = append $out (printf "%sretry.%s" $p (trim .)) }}{{ end }}
{{- end }}
{{- join " " $out }}
{{- end }}
{{- end }}

{{/* Most replicas of a component: its maxReplicas, at most kafka.partitions (dict "root" $ "c" name "v" values). */}}
{{- define "webhooks.maxReplicas" -}}
{{- $parts := int .root.Values.kafka.partitions }}
{{- $max := int (default 0 .v.autoscaling.maxReplicas) }}
{{- if gt $max $parts }}
{{- fail (printf "%s.autoscaling.maxReplicas (%d) is more than kafka.partitions (%d): replicas beyond the partitions of a topic get none and sit idle" .c $max $parts) }}
{{- end }}
{{- if eq $max 0 }}{{ $parts }}{{ else }}{{ $max }}{{ end }}
{{- end }}

{{/* "true" when something other than the Deployment sets the replica count. */}}
{{- define "webhooks.autoscaled" -}}
{{- if or .root.Values.keda.enabled .v.autoscaling.cpu.enabled }}true{{ end }}
{{- end }}

{{- define "webhooks.secretName" -}}
{{- default (printf "%s-secrets" (include "webhooks.fullname" .)) .Values.secrets.existingSecret }}
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
WEBHOOKS_RETRY_TIERS: {{ .Values.kafka.retryTiers | quote }}
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
