{{/* Names, labels, validation and the runner pod template of the scale-set chart. */}}

{{/* The scale set's name: runnerScaleSetName, else the release name ("_" is not allowed in object names). */}}
{{- define "gha-rs.name" -}}
{{- $name := default .Release.Name .Values.runnerScaleSetName | replace "_" "-" -}}
{{- if gt (len $name) 45 -}}
{{- fail (printf "the scale set name %q is longer than 45 characters: set a shorter runnerScaleSetName or release name" $name) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{- define "gha-rs.namespace" -}}
{{- $namespace := default .Release.Namespace .Values.namespaceOverride -}}
{{- if gt (len $namespace) 63 -}}
{{- fail (printf "the namespace %q is longer than 63 characters" $namespace) -}}
{{- end -}}
{{- $namespace -}}
{{- end -}}

{{- define "gha-rs.fullname" -}}
{{- printf "%s-gha-rs" (include "gha-rs.name" .) -}}
{{- end -}}

{{- define "gha-rs.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* A user's labels or annotations, without keys the chart or the controller own. */}}
{{- define "gha-rs.userMeta" -}}
{{- $reserved := list "helm.sh/chart" "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "app.kubernetes.io/part-of" "app.kubernetes.io/component" -}}
{{- $kept := dict -}}
{{- range $key, $value := . }}
{{- if and (not (has $key $reserved)) (not (hasPrefix "actions.github.com/" $key)) }}
{{- $_ := set $kept $key (toString $value) -}}
{{- end }}
{{- end }}
{{- if $kept }}{{ toYaml $kept }}{{ end -}}
{{- end -}}

{{/* Labels of every chart object: the chart's, then the user's global `labels`. */}}
{{- define "gha-rs.labels" -}}
helm.sh/chart: {{ include "gha-rs.chart" . }}
app.kubernetes.io/name: {{ include "gha-rs.name" . }}
app.kubernetes.io/instance: {{ include "gha-rs.name" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gha-rs
actions.github.com/scale-set-name: {{ include "gha-rs.name" . }}
actions.github.com/scale-set-namespace: {{ include "gha-rs.namespace" . }}
{{- with include "gha-rs.userMeta" .Values.labels }}{{ . | nindent 0 }}{{ end }}
{{- end -}}

{{/*
metadata labels and annotations of one chart object: the chart's labels plus `component`, the global
labels/annotations, and resourceMeta.<key>. Call with (dict "root" $ "key" "managerRole" "component" "manager-role").
*/}}
{{- define "gha-rs.objectMeta" -}}
{{- $meta := index (.root.Values.resourceMeta | default dict) .key | default dict -}}
labels:
  {{- include "gha-rs.labels" .root | nindent 2 }}
  app.kubernetes.io/component: {{ .component }}
  {{- with include "gha-rs.userMeta" ($meta.labels | default dict) }}{{ . | nindent 2 }}{{ end }}
{{- $annotations := merge (deepCopy ($meta.annotations | default dict)) (deepCopy (.root.Values.annotations | default dict)) }}
{{- with include "gha-rs.userMeta" $annotations }}
annotations:
  {{- . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "gha-rs.githubSecretName" -}}
{{- if kindIs "string" .Values.githubConfigSecret -}}
{{- required "githubConfigSecret must name a Secret or hold the credentials" .Values.githubConfigSecret -}}
{{- else -}}
{{- include "gha-rs.fullname" . }}-github-secret
{{- end -}}
{{- end -}}

{{- define "gha-rs.containerMode" -}}
{{- $mode := (.Values.containerMode | default dict).type | default "" -}}
{{- if not (has $mode (list "" "dind" "kubernetes" "kubernetes-novolume")) -}}
{{- fail (printf "containerMode.type %q is not supported: use \"\", \"dind\", \"kubernetes\" or \"kubernetes-novolume\"" $mode) -}}
{{- end -}}
{{- $mode -}}
{{- end -}}

{{- define "gha-rs.kubeMode" -}}
{{- if has (include "gha-rs.containerMode" .) (list "kubernetes" "kubernetes-novolume") }}true{{ end -}}
{{- end -}}

{{- /* The runners' own ServiceAccount, when the user's template names one: then the chart makes none. */}}
{{- define "gha-rs.userServiceAccountName" -}}
{{- ((.Values.template | default dict).spec | default dict).serviceAccountName | default "" -}}
{{- end -}}

{{- /* Kubernetes mode with the chart's ServiceAccount, Role and RoleBinding for the container hooks (as ARC's chart,
not when the user's template names a ServiceAccount of its own). */}}
{{- define "gha-rs.kubeModeRbac" -}}
{{- if and (include "gha-rs.kubeMode" .) (not (include "gha-rs.userServiceAccountName" .)) }}true{{ end -}}
{{- end -}}

{{- define "gha-rs.kubeModeServiceAccountName" -}}
{{- include "gha-rs.fullname" . }}-kube-mode
{{- end -}}

{{- define "gha-rs.noPermissionServiceAccountName" -}}
{{- include "gha-rs.fullname" . }}-no-permission
{{- end -}}

{{- define "gha-rs.managerRoleName" -}}
{{- include "gha-rs.fullname" . }}-manager
{{- end -}}

{{/* The controller's ServiceAccount as "namespace/name". controllerServiceAccount.namespace and .name are each
taken as given when set (either alone, as in ARC); what is missing is discovered from the controller Deployments in
the cluster (lookup: none under `helm template`, so `helm template` needs both set). */}}
{{- define "gha-rs.controllerServiceAccount" -}}
{{- $given := .Values.controllerServiceAccount | default dict -}}
{{- $deployments := list -}}
{{- if not (and $given.namespace $given.name) -}}
{{- $deployments = (lookup "apps/v1" "Deployment" "" "").items | default list -}}
{{- end -}}
{{- include "gha-rs.resolvedControllerServiceAccount" (dict "given" $given "deployments" $deployments "namespace" (include "gha-rs.namespace" .)) -}}
{{- end -}}

{{/* "namespace/name" from `given` (controllerServiceAccount), what it lacks from the controller among
`deployments` that serves `namespace`. Call with (dict "given" $values "deployments" $items "namespace" $ns). */}}
{{- define "gha-rs.resolvedControllerServiceAccount" -}}
{{- $namespace := .given.namespace | default "" -}}
{{- $name := .given.name | default "" -}}
{{- if not (and $namespace $name) -}}
{{- $found := include "gha-rs.discoveredControllerServiceAccount" (dict "deployments" .deployments "namespace" .namespace) | splitList "/" -}}
{{- $namespace = $namespace | default (index $found 0) -}}
{{- $name = $name | default (index $found 1) -}}
{{- if not (and $namespace $name) -}}
{{- fail "the gha-rs-controller Deployment found has no actions.github.com/controller-service-account-namespace and -name labels: set controllerServiceAccount.namespace and controllerServiceAccount.name to the controller's ServiceAccount" -}}
{{- end -}}
{{- end -}}
{{- printf "%s/%s" $namespace $name -}}
{{- end -}}

{{/*
The ServiceAccount ("namespace/name", from its labels) of the controller Deployment that serves scale sets in
`namespace`, among `deployments` (Deployment objects), by ARC's rule: controllers are the Deployments labelled
app.kubernetes.io/part-of=gha-rs-controller; a cluster-wide one (no actions.github.com/controller-watch-single-
namespace label) serves every namespace and must be the only controller; otherwise the single-namespace one whose
label names `namespace` serves it. Fails naming what to set when no controller, or more than one, fits.
Call with (dict "deployments" $items "namespace" $ns).
*/}}
{{- define "gha-rs.discoveredControllerServiceAccount" -}}
{{- $hint := "set controllerServiceAccount.namespace and controllerServiceAccount.name to the controller's ServiceAccount" -}}
{{- $watchLabel := "actions.github.com/controller-watch-single-namespace" -}}
{{- $clusterWide := list -}}
{{- $singleNamespace := list -}}
{{- range .deployments }}
{{- $labels := .metadata.labels | default dict -}}
{{- if and (kindIs "map" $labels) (eq (get $labels "app.kubernetes.io/part-of") "gha-rs-controller") }}
{{- if hasKey $labels $watchLabel }}
{{- $singleNamespace = append $singleNamespace $labels -}}
{{- else }}
{{- $clusterWide = append $clusterWide $labels -}}
{{- end }}
{{- end }}
{{- end }}
{{- $chosen := list -}}
{{- if and $clusterWide $singleNamespace -}}
{{- fail (printf "found %d cluster-wide and %d single-namespace gha-rs-controller Deployments (flags.watchSingleNamespace set on some only): %s" (len $clusterWide) (len $singleNamespace) $hint) -}}
{{- else if $clusterWide -}}
{{- $chosen = $clusterWide -}}
{{- else if $singleNamespace -}}
{{- range $singleNamespace }}
{{- if eq (get . $watchLabel) $.namespace }}{{ $chosen = append $chosen . }}{{ end -}}
{{- end }}
{{- if not $chosen -}}
{{- fail (printf "none of the %d single-namespace gha-rs-controller Deployments watches namespace %q (label %s): %s" (len $singleNamespace) .namespace $watchLabel $hint) -}}
{{- end -}}
{{- end -}}
{{- if ne (len $chosen) 1 -}}
{{- fail (printf "found %d gha-rs-controller Deployments for namespace %q: %s" (len $chosen) .namespace $hint) -}}
{{- end -}}
{{- $labels := index $chosen 0 -}}
{{- printf "%s/%s" (get $labels "actions.github.com/controller-service-account-namespace") (get $labels "actions.github.com/controller-service-account-name") -}}
{{- end -}}

{{/* Whether a list of named items (env, volumeMounts, containers, volumes) has one named `name`.
Call with (dict "items" $list "name" "X"). */}}
{{- define "gha-rs.hasNamed" -}}
{{- range (.items | default list) }}{{ if eq .name $.name }}true{{ end }}{{ end -}}
{{- end -}}

{{/* The runner container with what the container mode and TLS need added. The user's wins: an env var or a
volumeMount the user's runner container already has under that name is kept and the mode's is left out, as in
ARC's chart (two mounts at one path would make the pod invalid). */}}
{{- define "gha-rs.runnerContainer" -}}
{{- $root := .root -}}
{{- $c := deepCopy .container -}}
{{- $mode := include "gha-rs.containerMode" $root -}}
{{- $env := list -}}
{{- $mounts := list -}}
{{- if eq $mode "dind" -}}
{{- $env = append $env (dict "name" "DOCKER_HOST" "value" "unix:///var/run/docker.sock") -}}
{{- $env = append $env (dict "name" "RUNNER_WAIT_FOR_DOCKER_IN_SECONDS" "value" "120") -}}
{{- $mounts = append $mounts (dict "name" "work" "mountPath" "/home/runner/_work") -}}
{{- $mounts = append $mounts (dict "name" "dind-sock" "mountPath" "/var/run") -}}
{{- else if eq $mode "kubernetes" -}}
{{- $env = append $env (dict "name" "ACTIONS_RUNNER_CONTAINER_HOOKS" "value" "/home/runner/k8s/index.js") -}}
{{- $env = append $env (dict "name" "ACTIONS_RUNNER_POD_NAME" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name"))) -}}
{{- $env = append $env (dict "name" "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER" "value" "true") -}}
{{- $mounts = append $mounts (dict "name" "work" "mountPath" "/home/runner/_work") -}}
{{- else if eq $mode "kubernetes-novolume" -}}
{{- $env = append $env (dict "name" "ACTIONS_RUNNER_CONTAINER_HOOKS" "value" "/home/runner/k8s-novolume/index.js") -}}
{{- $env = append $env (dict "name" "ACTIONS_RUNNER_POD_NAME" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name"))) -}}
{{- $env = append $env (dict "name" "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER" "value" "true") -}}
{{- $env = append $env (dict "name" "ACTIONS_RUNNER_IMAGE" "value" ($c.image | default "")) -}}
{{- end -}}
{{- $tls := $root.Values.githubServerTLS | default dict -}}
{{- if $tls.runnerMountPath -}}
{{- $key := required "githubServerTLS.certificateFrom.configMapKeyRef.key is required with runnerMountPath" (($tls.certificateFrom | default dict).configMapKeyRef | default dict).key -}}
{{- $path := printf "%s/%s" (trimSuffix "/" $tls.runnerMountPath) $key -}}
{{- $env = append $env (dict "name" "NODE_EXTRA_CA_CERTS" "value" $path) -}}
{{- $env = append $env (dict "name" "RUNNER_UPDATE_CA_CERTS" "value" "1") -}}
{{- $mounts = append $mounts (dict "name" "github-server-tls-cert" "mountPath" $path "subPath" $key) -}}
{{- end -}}
{{- $merged := $c.env | default list -}}
{{- range $env }}
{{- if not (include "gha-rs.hasNamed" (dict "items" $c.env "name" .name)) }}
{{- $merged = append $merged . -}}
{{- end }}
{{- end }}
{{- if $merged }}{{ $_ := set $c "env" $merged }}{{ end -}}
{{- $mergedMounts := $c.volumeMounts | default list -}}
{{- range $mounts }}
{{- if not (include "gha-rs.hasNamed" (dict "items" $c.volumeMounts "name" .name)) }}
{{- $mergedMounts = append $mergedMounts . -}}
{{- end }}
{{- end }}
{{- if $mergedMounts }}{{ $_ := set $c "volumeMounts" $mergedMounts }}{{ end -}}
{{- toYaml $c -}}
{{- end -}}

{{/*
The runner pod template: the user's `template` plus the container mode's containers and volumes, in ARC's
chart's order, so that an ARC release switched to this chart with the same values renders an equal runner spec
(lists are compared in order: a reordering is a new runner-spec revision that replaces idle runners):
- containers: the user's order in the default mode; otherwise the runner first, then (dind on Kubernetes < 1.29)
  the chart's `dind`, then the user's other containers (a user's `dind` gives way to the chart's in dind mode);
- initContainers: in dind mode `init-dind-externals` and (Kubernetes >= 1.29) the `dind` sidecar first, so the
  user's init containers run with docker up, then the user's;
- volumes: the TLS certificate's first; dind mode: `dind-sock`, `dind-externals`, `work`, then the user's
  others; kubernetes mode: `work`, then the user's others; a `work` volume the user gives replaces the chart's.
*/}}
{{- define "gha-rs.runnerTemplate" -}}
{{- $template := deepCopy (.Values.template | default dict) -}}
{{- $spec := $template.spec | default dict -}}
{{- $mode := include "gha-rs.containerMode" . -}}
{{- $runner := dict -}}
{{- $others := list -}}
{{- $containers := list -}}
{{- range ($spec.containers | default list) }}
{{- if eq .name "runner" }}
{{- $runner = fromYaml (include "gha-rs.runnerContainer" (dict "root" $ "container" .)) -}}
{{- $containers = append $containers $runner -}}
{{- else }}
{{- if not (and (eq $mode "dind") (eq .name "dind")) }}{{ $others = append $others . }}{{ end -}}
{{- $containers = append $containers . -}}
{{- end }}
{{- end }}
{{- $runnerImage := $runner.image | default "" -}}
{{- if not $runnerImage -}}
{{- fail "template.spec.containers needs a container named \"runner\" with an image" -}}
{{- end -}}
{{- if $mode -}}
{{- $containers = list $runner -}}
{{- end -}}
{{- $userVolumes := $spec.volumes | default list -}}
{{- $userWork := list -}}
{{- $userOtherVolumes := list -}}
{{- range $userVolumes }}
{{- if eq .name "work" }}{{ $userWork = append $userWork . }}{{ else }}{{ $userOtherVolumes = append $userOtherVolumes . }}{{ end -}}
{{- end }}
{{- $volumes := list -}}
{{- $tls := .Values.githubServerTLS | default dict -}}
{{- if $tls.runnerMountPath -}}
{{- $ref := $tls.certificateFrom.configMapKeyRef -}}
{{- $volumes = append $volumes (dict "name" "github-server-tls-cert" "configMap" (dict "name" $ref.name "items" (list (dict "key" $ref.key "path" $ref.key)))) -}}
{{- end -}}
{{- $initContainers := list -}}
{{- if eq $mode "dind" -}}
{{- $initContainers = append $initContainers (dict "name" "init-dind-externals" "image" $runnerImage "command" (list "cp") "args" (list "-r" "/home/runner/externals/." "/home/runner/tmpDir/") "volumeMounts" (list (dict "name" "dind-externals" "mountPath" "/home/runner/tmpDir"))) -}}
{{- $dind := dict "name" "dind" "image" "docker:dind" "args" (list "dockerd" "--host=unix:///var/run/docker.sock" "--group=$(DOCKER_GROUP_GID)") "env" (list (dict "name" "DOCKER_GROUP_GID" "value" "123")) "securityContext" (dict "privileged" true) "volumeMounts" (list (dict "name" "work" "mountPath" "/home/runner/_work") (dict "name" "dind-sock" "mountPath" "/var/run") (dict "name" "dind-externals" "mountPath" "/home/runner/externals")) -}}
{{- if semverCompare ">=1.29-0" .Capabilities.KubeVersion.Version -}}
{{- /* A native sidecar: docker starts before the runner and stops after it. */}}
{{- $_ := set $dind "restartPolicy" "Always" -}}
{{- $_ := set $dind "startupProbe" (dict "exec" (dict "command" (list "docker" "info")) "periodSeconds" 5 "failureThreshold" 24) -}}
{{- $initContainers = append $initContainers $dind -}}
{{- else -}}
{{- $containers = append $containers $dind -}}
{{- end -}}
{{- $volumes = append $volumes (dict "name" "dind-sock" "emptyDir" dict) -}}
{{- $volumes = append $volumes (dict "name" "dind-externals" "emptyDir" dict) -}}
{{- $volumes = concat $volumes ($userWork | default (list (dict "name" "work" "emptyDir" dict))) $userOtherVolumes -}}
{{- else if eq $mode "kubernetes" -}}
{{- if not $userWork -}}
{{- $claim := required "containerMode.kubernetesModeWorkVolumeClaim is required for containerMode.type kubernetes (or a `work` volume in template.spec.volumes)" .Values.containerMode.kubernetesModeWorkVolumeClaim -}}
{{- $userWork = list (dict "name" "work" "ephemeral" (dict "volumeClaimTemplate" (dict "spec" $claim))) -}}
{{- end -}}
{{- $volumes = concat $volumes $userWork $userOtherVolumes -}}
{{- else -}}
{{- $volumes = concat $volumes $userVolumes -}}
{{- end -}}
{{- if $mode -}}
{{- $containers = concat $containers $others -}}
{{- end -}}
{{- $_ := set $spec "containers" $containers -}}
{{- $initContainers = concat $initContainers ($spec.initContainers | default list) -}}
{{- if $initContainers }}{{ $_ := set $spec "initContainers" $initContainers }}{{ end -}}
{{- if $volumes }}{{ $_ := set $spec "volumes" $volumes }}{{ end -}}
{{- if not $spec.restartPolicy }}{{ $_ := set $spec "restartPolicy" "Never" }}{{ end -}}
{{- if not $spec.serviceAccountName -}}
{{- if include "gha-rs.kubeMode" . -}}
{{- $_ := set $spec "serviceAccountName" (include "gha-rs.kubeModeServiceAccountName" .) -}}
{{- else -}}
{{- $_ := set $spec "serviceAccountName" (include "gha-rs.noPermissionServiceAccountName" .) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $template "spec" $spec -}}
{{- toYaml $template -}}
{{- end -}}
