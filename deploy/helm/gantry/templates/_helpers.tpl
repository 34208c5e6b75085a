{{/* The image reference. */}}
{{- define "gantry.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Labels every object carries; the selector is the first two. */}}
{{- define "gantry.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "gantry.labels" -}}
{{ include "gantry.selector" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* gantry serve's flags both modes share. */}}
{{- define "gantry.commonArgs" -}}
- --host=0.0.0.0
- --port={{ .Values.server.port }}
- --drain-delay={{ .Values.server.drainDelaySeconds }}
- --drain-timeout={{ .Values.server.drainTimeoutSeconds }}
{{- if .Values.server.apiKeySecret }}
- --api-key-file=/etc/gantry/keys/api-keys.txt
{{- else if .Values.server.insecureNoAuth }}
- --insecure-no-auth
{{- else }}
{{- fail "server.apiKeySecret (a Secret with api-keys.txt) or server.insecureNoAuth=true is required: the server listens on the pod's address" }}
{{- end }}
{{- range .Values.server.extraArgs }}
- {{ . }}
{{- end }}
{{- end -}}

{{- define "gantry.securityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "gantry.gracePeriod" -}}
{{ add .Values.server.drainDelaySeconds .Values.server.drainTimeoutSeconds 15 }}
{{- end -}}
