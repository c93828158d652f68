{{/* The release's name for its objects, within Kubernetes' 63 characters. */}}
{{- define "shoal.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "shoal.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "shoal.labels" -}}
{{ include "shoal.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "shoal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "shoal.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret that holds the admin token, if any. */}}
{{- define "shoal.adminSecret" -}}
{{- if .Values.adminToken.existingSecret -}}
{{- .Values.adminToken.existingSecret -}}
{{- else if .Values.adminToken.value -}}
{{- printf "%s-admin" (include "shoal.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The ConfigMap key of a repository file: its path with "/" spelt "--". */}}
{{- define "shoal.fileKey" -}}
{{- . | replace "/" "--" -}}
{{- end -}}

{{/*
The grace period: preStop, then the drain (every accepted request answered within timeoutMs),
then the workers stopping.
*/}}
{{- define "shoal.gracePeriod" -}}
{{- add .Values.drain.preStopSeconds (div (add .Values.timeoutMs 999) 1000) .Values.drain.marginSeconds -}}
{{- end -}}

{{/* The KEDA query of how far behind: the longest wait of a next queued item over this release's pods. */}}
{{- define "shoal.kedaBehindQuery" -}}
{{- printf "max(shoal_queue_behind_seconds{namespace=\"%s\",pod=~\"%s-.*\"})" .Release.Namespace (include "shoal.fullname" .) -}}
{{- end -}}

{{/* The default KEDA query: requests in flight over this release's pods. */}}
{{- define "shoal.kedaQuery" -}}
{{- default (printf "sum(shoal_requests_in_flight{namespace=\"%s\",pod=~\"%s-.*\"})" .Release.Namespace (include "shoal.fullname" .)) .Values.keda.prometheus.query -}}
{{- end -}}
