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

{{/* The Kafka settings as env entries, for pods that do not read the ConfigMap (the hook job runs before it exists). */}}
{{- define "webhooks.kafkaEnv" -}}
- name: WEBHOOKS_KAFKA_BROKERS
  value: {{ .Values.kafka.brokers | quote }}
- name: WEBHOOKS_TOPIC_PREFIX
  value: {{ .Values.kafka.topicPrefix | quote }}
- name: WEBHOOKS_RETRY_TIERS
  value: {{ .Values.kafka.retryTiers | quote }}
{{- end }}
