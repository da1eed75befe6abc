{{/* The release's name for its objects: pods are <fullname>-g<group>-<ordinal>. */}}
{{- define "sluice.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sluice.selector" -}}
app.kubernetes.io/name: sluice
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sluice.labels" -}}
{{ include "sluice.selector" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Whether members form Raft groups (anything but one node alone). */}}
{{- define "sluice.replicated" -}}
{{- if or (gt (int .Values.groups) 1) (gt (int .Values.replicas) 1) -}}true{{- end -}}
{{- end -}}

{{/* The groups the cluster map names. */}}
{{- define "sluice.initialGroups" -}}
{{- if gt (int .Values.initialGroups) 0 -}}{{ int .Values.initialGroups }}{{- else -}}{{ int .Values.groups }}{{- end -}}
{{- end -}}

{{/* A member's DNS name: include "sluice.member" (list $ group ordinal). */}}
{{- define "sluice.member" -}}
{{- $ := index . 0 -}}
{{- $full := include "sluice.fullname" $ -}}
{{- printf "%s-g%d-%d.%s-members.%s.svc.%s" $full (int (index . 1)) (int (index . 2)) $full $.Release.Namespace $.Values.clusterDomain -}}
{{- end -}}

{{- define "sluice.clusterSecretName" -}}
{{- .Values.clusterSecret.existingSecret | default (printf "%s-cluster-secret" (include "sluice.fullname" .)) -}}
{{- end -}}

{{- define "sluice.checks" -}}
{{- if lt (int .Values.groups) 1 -}}{{ fail "groups: at least 1" }}{{- end -}}
{{- if lt (int .Values.replicas) 1 -}}{{ fail "replicas: at least 1" }}{{- end -}}
{{- if eq (mod (int .Values.replicas) 2) 0 -}}
{{ fail (printf "replicas: an odd number (1, 3, 5), got %d: a group of %d survives no more members down than one of %d, and its disruption budget would let no member be drained" (int .Values.replicas) (int .Values.replicas) (sub (int .Values.replicas) 1)) }}
{{- end -}}
{{- if or (lt (int .Values.initialGroups) 0) (gt (int .Values.initialGroups) (int .Values.groups)) -}}
{{ fail (printf "initialGroups: 0 to groups (%d), got %d" (int .Values.groups) (int .Values.initialGroups)) }}
{{- end -}}
{{- end -}}
