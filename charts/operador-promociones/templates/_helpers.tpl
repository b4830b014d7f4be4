{{/*
The operator's image: the repository, then the digest if set, else the tag,
else the chart's appVersion.
*/}}
{{- define "operador-promociones.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}
