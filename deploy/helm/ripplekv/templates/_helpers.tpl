{{/* Names. */}}
{{- define "ripplekv.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every resource name: RELEASE-ripplekv, or RELEASE when it holds the chart name.
At most 44 characters: the serving StatefulSet FULLNAME-serving must stay within 52 (its pods'
controller-revision-hash label adds 11), and MPIJob pods FULLNAME-worker-worker-N within 63. */}}
{{- define "ripplekv.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 44 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 44 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 44 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "ripplekv.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels of one component: (dict "root" $ "component" "scheduler"); the component
may be left out for resources every component shares. */}}
{{- define "ripplekv.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ripplekv.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{/* All labels of one component: (dict "root" $ "component" "scheduler"). */}}
{{- define "ripplekv.labels" -}}
helm.sh/chart: {{ include "ripplekv.chart" .root }}
{{ include "ripplekv.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: ripplekv
{{- end }}

{{/* A ripplekv image: (dict "root" $ "image" .Values.scheduler.image). */}}
{{- define "ripplekv.image" -}}
{{- $tag := default .root.Chart.AppVersion .image.tag }}
{{- if .root.Values.image.registry }}
{{- printf "%s/%s:%s" (trimSuffix "/" .root.Values.image.registry) .image.repository $tag }}
{{- else }}
{{- printf "%s:%s" .image.repository $tag }}
{{- end }}
{{- end }}

{{- define "ripplekv.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ripplekv.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The scheduler's address as clients dial it; its certificate must name the host part. */}}
{{- define "ripplekv.schedulerHost" -}}
{{- printf "%s.%s.svc" (include "ripplekv.fullname" .) .Release.Namespace }}
{{- end }}

{{- define "ripplekv.servingName" -}}
{{- printf "%s-serving" (include "ripplekv.fullname" .) }}
{{- end }}

{{/* Secret names. Each fails rendering when the chart neither creates the Secret nor is told
which existing one to use: a pod waiting forever on a missing Secret is harder to diagnose. */}}
{{- define "ripplekv.tlsSecret" -}}
{{- if .Values.tls.create }}
{{- printf "%s-tls" (include "ripplekv.fullname" .) }}
{{- else if .Values.tls.existingSecret }}
{{- .Values.tls.existingSecret }}
{{- else }}
{{- fail "tls: the scheduler needs a TLS Secret: set tls.existingSecret (a kubernetes.io/tls Secret with tls.crt, tls.key, ca.crt, e.g. from cert-manager) or tls.create=true with tls.cert, tls.key and tls.ca" }}
{{- end }}
{{- end }}

{{- define "ripplekv.clientTlsSecret" -}}
{{- if .Values.tls.create }}
{{- printf "%s-client-tls" (include "ripplekv.fullname" .) }}
{{- else if .Values.tls.mtls.existingSecret }}
{{- .Values.tls.mtls.existingSecret }}
{{- else }}
{{- fail "tls.mtls: mTLS needs the clients' certificate: set tls.mtls.existingSecret (a kubernetes.io/tls Secret with tls.crt, tls.key) or tls.create=true with tls.mtls.cert and tls.mtls.key" }}
{{- end }}
{{- end }}

{{- define "ripplekv.tokensSecret" -}}
{{- if .Values.tokens.create }}
{{- printf "%s-tokens" (include "ripplekv.fullname" .) }}
{{- else if .Values.tokens.existingSecret }}
{{- .Values.tokens.existingSecret }}
{{- else }}
{{- fail "tokens: the scheduler needs its token file: set tokens.existingSecret (a Secret with key `tokens`) or tokens.create=true" }}
{{- end }}
{{- end }}

{{- define "ripplekv.workerTokenSecret" -}}
{{- if .Values.tokens.create }}
{{- printf "%s-worker-token" (include "ripplekv.fullname" .) }}
{{- else if .Values.tokens.worker.existingSecret }}
{{- .Values.tokens.worker.existingSecret }}
{{- else }}
{{- fail "tokens.worker: the workers need a token: set tokens.worker.existingSecret (a Secret with key `token`) or tokens.create=true with tokens.worker.token" }}
{{- end }}
{{- end }}

{{- define "ripplekv.agentTokenSecret" -}}
{{- if .Values.tokens.create }}
{{- printf "%s-agent-tokens" (include "ripplekv.fullname" .) }}
{{- else if .Values.tokens.agent.existingSecret }}
{{- .Values.tokens.agent.existingSecret }}
{{- else }}
{{- fail "tokens.agent: the agents need tokens: set tokens.agent.existingSecret (one key per serving pod name) or tokens.create=true with tokens.agent.tokens" }}
{{- end }}
{{- end }}

{{/* Checks of values that the schema cannot express. Included by every template that depends
on them, so a bad combination fails whatever is rendered. */}}
{{- define "ripplekv.validate" -}}
{{- $w := .Values.worker }}
{{- if and $w.enabled (ne (mod (int $w.slotsPerWorker) (int $w.tp)) 0) }}
{{- fail (printf "worker.tp (%d) must divide worker.slotsPerWorker (%d): ranks form TP groups of consecutive ranks, and a group must not span pods" (int $w.tp) (int $w.slotsPerWorker)) }}
{{- end }}
{{- if and $w.enabled (not $w.model.existingClaim) (not $w.model.hostPath) }}
{{- fail "worker.model: set worker.model.existingClaim (a PersistentVolumeClaim holding the model) or worker.model.hostPath" }}
{{- end }}
{{- if and .Values.agentExample.enabled (not .Values.agentExample.modelHash) }}
{{- fail "agentExample.modelHash is required: the hash of the model the serving pods run (`ripplekv hash MODEL`)" }}
{{- end }}
{{- if .Values.tls.create }}
{{- if not (and .Values.tls.cert .Values.tls.key .Values.tls.ca) }}
{{- fail "tls.create: set tls.cert, tls.key and tls.ca (base64 of the PEM files)" }}
{{- end }}
{{- if and .Values.tls.mtls.enabled (not (and .Values.tls.mtls.cert .Values.tls.mtls.key)) }}
{{- fail "tls.create with tls.mtls.enabled: set tls.mtls.cert and tls.mtls.key (base64 of the PEM files)" }}
{{- end }}
{{- end }}
{{- if .Values.tokens.create }}
{{- if and $w.enabled (not .Values.tokens.worker.token) }}
{{- fail "tokens.create: set tokens.worker.token" }}
{{- end }}
{{- if and .Values.agentExample.enabled (lt (len .Values.tokens.agent.tokens) (int .Values.agentExample.replicas)) }}
{{- fail (printf "tokens.create: tokens.agent.tokens needs one token per agentExample replica (%d)" (int .Values.agentExample.replicas)) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The pod-level security context of every ripplekv pod: the images' user ripplekv. */}}
{{- define "ripplekv.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The container-level security context; (dict "readOnlyRoot" true). */}}
{{- define "ripplekv.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: {{ .readOnlyRoot }}
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* A client's TLS volume: the CA that signed the scheduler's certificate (only ca.crt of the
scheduler's Secret: the server key never reaches a client) and, with mTLS, the clients'
certificate and key. Mounted at /etc/ripplekv/tls. */}}
{{- define "ripplekv.clientTlsVolume" -}}
- name: tls
  projected:
    defaultMode: 0440
    sources:
      - secret:
          name: {{ include "ripplekv.tlsSecret" . }}
          items:
            - key: ca.crt
              path: ca.crt
      {{- if .Values.tls.mtls.enabled }}
      - secret:
          name: {{ include "ripplekv.clientTlsSecret" . }}
          items:
            - key: tls.crt
              path: tls.crt
            - key: tls.key
              path: tls.key
      {{- end }}
{{- end }}

{{/* The TLS flags of a client (ripplekv-worker, ripplekv-agent), one YAML list item each. */}}
{{- define "ripplekv.clientTlsArgs" -}}
- --tls-ca
- /etc/ripplekv/tls/ca.crt
{{- if .Values.tls.mtls.enabled }}
- --tls-cert
- /etc/ripplekv/tls/tls.crt
- --tls-key
- /etc/ripplekv/tls/tls.key
{{- end }}
{{- if .Values.tls.serverName }}
- --tls-server-name
- {{ .Values.tls.serverName | quote }}
{{- end }}
{{- end }}

{{/* Pod-spec fields the MPI launcher and workers share. */}}
{{- define "ripplekv.workerPodCommon" -}}
serviceAccountName: {{ include "ripplekv.serviceAccountName" . }}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- include "ripplekv.podSecurityContext" . | nindent 2 }}
{{- end }}

{{/* NCCL variables of every rank, from worker.nccl, as env list items (nothing when empty). */}}
{{- define "ripplekv.ncclEnv" -}}
{{- $env := list }}
{{- range $name, $value := .Values.worker.nccl }}
{{- $env = append $env (dict "name" $name "value" (toString $value)) }}
{{- end }}
{{- with $env }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* The worker's TLS and token files, in the launcher and in every worker pod: mpirun forwards
environment variables, not files, and the ranks run on the worker pods. */}}
{{- define "ripplekv.workerClientVolumes" -}}
{{ include "ripplekv.clientTlsVolume" . }}
- name: token
  secret:
    secretName: {{ include "ripplekv.workerTokenSecret" . }}
    defaultMode: 0440
    items:
      - key: token
        path: token
{{- end }}

{{- define "ripplekv.workerClientMounts" -}}
- name: tls
  mountPath: /etc/ripplekv/tls
  readOnly: true
- name: token
  mountPath: /etc/ripplekv/tokens
  readOnly: true
{{- end }}
