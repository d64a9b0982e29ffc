{{/* Names, labels and the values shared by this chart's templates. */}}

{{/* The name ARC's chart gives its objects and selects its pods by: an ARC release upgraded to this chart
keeps its Deployment (whose selector may not change), its ServiceAccount and what binds it. */}}
{{- define "gha-rs-controller.name" -}}
{{- default "gha-rs-controller" .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* fullnameOverride; else the release name when it already contains the name; else <release>-<name>. */}}
{{- define "gha-rs-controller.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default "gha-rs-controller" .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gha-rs-controller.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "gha-rs-controller.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gha-rs-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gha-rs-controller.name" . }}
app.kubernetes.io/namespace: {{ include "gha-rs-controller.namespace" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object: the chart's, then the user's `labels` (which may not replace the chart's). */}}
{{- define "gha-rs-controller.labels" -}}
helm.sh/chart: {{ include "gha-rs-controller.chart" . }}
{{ include "gha-rs-controller.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gha-rs-controller
{{- range $key, $value := .Values.labels }}
{{- if not (has $key (list "helm.sh/chart" "app.kubernetes.io/name" "app.kubernetes.io/namespace" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "app.kubernetes.io/part-of")) }}
{{ $key }}: {{ $value | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "gha-rs-controller.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gha-rs-controller.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gha-rs-controller.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The numeric port of a bind address such as ":8080" or "0.0.0.0:8080". */}}
{{- define "gha-rs-controller.port" -}}
{{- $parts := splitList ":" (toString .) -}}
{{- last $parts -}}
{{- end -}}

{{/* What the manager may do with scale sets and what it makes for them, cluster-wide or per namespace. */}}
{{- define "gha-rs-controller.managerRules" -}}
- apiGroups: ["actions.github.com"]
  resources: [autoscalingrunnersets, autoscalinglisteners, ephemeralrunnersets, ephemeralrunners]
  verbs: [create, delete, get, list, patch, update, watch]
# A scale-down deletes its runners in batches, named by their instance label (docs/controllers.md).
- apiGroups: ["actions.github.com"]
  resources: [ephemeralrunners]
  verbs: [deletecollection]
- apiGroups: ["actions.github.com"]
  resources: [autoscalingrunnersets/status, autoscalinglisteners/status, ephemeralrunnersets/status, ephemeralrunners/status]
  verbs: [get, patch, update]
- apiGroups: ["actions.github.com"]
  resources: [autoscalingrunnersets/finalizers, autoscalinglisteners/finalizers, ephemeralrunnersets/finalizers, ephemeralrunners/finalizers]
  verbs: [patch, update]
- apiGroups: [""]
  resources: [pods, serviceaccounts]
  verbs: [list, watch]
# What a runner namespace's quotas still admit is what a scale set advertises to GitHub (docs/capacity.md).
- apiGroups: [""]
  resources: [resourcequotas]
  verbs: [list, watch]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: [rolebindings]
  verbs: [list, watch]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: [roles]
  verbs: [list, watch]
{{- /* No Events here: the manager writes them in two namespaces only, each granted there by a Role -- the scale
set's namespace by the scale-set chart's manager Role (Events on AutoscalingRunnerSets, their runner sets and
runners), the controller namespace by this chart's Role beside leader election (Events on listeners). */}}
{{- end -}}

{{/* Where scale sets live (cluster-wide, or the one watched namespace), not in the controller namespace: the
manager Role a scale-set chart made is released (its cleanup-protection finalizer removed) after its own
RoleBinding, when nothing in that namespace grants the controller anything any more. */}}
{{- define "gha-rs-controller.releaseRules" -}}
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: [roles]
  verbs: [patch]
{{- end -}}

{{- define "gha-rs-controller.vaultAllowListName" -}}
{{- (.Values.vaultAllowList | default dict).name | default (printf "%s-vault-allow-list" (include "gha-rs-controller.fullname" .)) -}}
{{- end }}

{{- define "gha-rs-controller.warmPriorityClassName" -}}
{{- ((.Values.warmCapacity | default dict).priorityClass | default dict).name | default (printf "%s-warm-placeholder" (include "gha-rs-controller.fullname" .)) -}}
{{- end }}
