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

{{/*
The release's namespace is the operator's own, and must hold nothing else:
whoever may edit a namespace may act as any ServiceAccount in it (impersonate
it, make a token for it, change the Deployment that runs as it), and the
operator's may write Deployments, Services and ConfigMaps in every namespace.
In default, every editor of default could. Refused rather than warned: a
warning is read after the install, when the grant is already there.
*/}}
{{- define "operador-promociones.notInDefault" -}}
{{- if eq .Release.Namespace "default" -}}
{{- fail "the operator must not run in the namespace default, where every editor of default could act as it in every namespace (docs/security.md): install it in a namespace of its own, with -n operador-promociones-system --create-namespace" -}}
{{- end -}}
{{- end -}}
