{{- define "sustain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sustain.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "sustain.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "sustain.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sustain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sustain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The server pods (not the migration Job's): what the Deployment, Service, PDB and
     NetworkPolicy select. */}}
{{- define "sustain.serverSelectorLabels" -}}
{{ include "sustain.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end -}}

{{- define "sustain.agentSelectorLabels" -}}
{{ include "sustain.selectorLabels" . }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "sustain.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "sustain.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "sustain.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sustain.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sustain.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "sustain.databaseSecret" -}}
{{- required "database.existingSecret: name a Secret holding the PostgreSQL URL (the chart never takes the URL itself)" .Values.database.existingSecret -}}
{{- end -}}

{{/* Environment shared by the server and the migration job: the database URL and the
     secrets config refers to, all from existing Secrets; and SUSTAIN_SECRET_ENV listing the
     secretEnv names, so `env:NAME` references to them resolve (unless `env` sets it). */}}
{{- define "sustain.secretEnv" -}}
- name: SUSTAIN_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "sustain.databaseSecret" . }}
      key: {{ .Values.database.urlKey }}
{{- if .Values.apiKeys.existingSecret }}
- name: SUSTAIN_ADMIN_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.apiKeys.existingSecret }}
      key: {{ .Values.apiKeys.key }}
{{- end }}
{{- $names := list }}
{{- range .Values.secretEnv }}
{{- $names = append $names .name }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .key }}
{{- end }}
{{- if and $names (not (hasKey .Values.env "SUSTAIN_SECRET_ENV")) }}
- name: SUSTAIN_SECRET_ENV
  value: {{ join "," $names | quote }}
{{- end }}
{{- end -}}

{{/* 300 -> 5m, 3600 -> 1h, 86400 -> 1d: the label `sustain rules` uses for a window. */}}
{{- define "sustain.windowLabel" -}}
{{- $s := int . -}}
{{- if eq (mod $s 86400) 0 -}}{{ div $s 86400 }}d
{{- else if eq (mod $s 3600) 0 -}}{{ div $s 3600 }}h
{{- else if eq (mod $s 60) 0 -}}{{ div $s 60 }}m
{{- else -}}{{ $s }}s
{{- end -}}
{{- end -}}

{{/* The default burn-rate tiers (SPEC section 8), as service/evaluation/tiers.py has them. */}}
{{- define "sustain.defaultTiers" -}}
- {name: page_fast, severity: page, factor: 14.4, long_window_s: 3600, short_window_s: 300}
- {name: page_slow, severity: page, factor: 6, long_window_s: 21600, short_window_s: 1800}
- {name: ticket_fast, severity: ticket, factor: 3, long_window_s: 86400, short_window_s: 7200}
- {name: ticket_slow, severity: ticket, factor: 1, long_window_s: 259200, short_window_s: 21600}
{{- end -}}
