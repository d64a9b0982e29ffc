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

{{- define "gha-rs.kubeModeServiceAccountName" -}}
{{- include "gha-rs.fullname" . }}-kube-mode
{{- end -}}

{{- define "gha-rs.noPermissionServiceAccountName" -}}
{{- include "gha-rs.fullname" . }}-no-permission
{{- end -}}

{{- define "gha-rs.managerRoleName" -}}
{{- include "gha-rs.fullname" . }}-manager
{{- end -}}

{{/* The controller's ServiceAccount as "namespace/name": from controllerServiceAccount, else from the one
controller Deployment in the cluster (lookup: empty under `helm template`). */}}
{{- define "gha-rs.controllerServiceAccount" -}}
{{- $given := .Values.controllerServiceAccount | default dict -}}
{{- if and $given.namespace $given.name -}}
{{- printf "%s/%s" $given.namespace $given.name -}}
{{- else -}}
{{- $found := list -}}
{{- $deployments := lookup "apps/v1" "Deployment" "" "" -}}
{{- range ($deployments.items | default list) }}
{{- if eq (index (.metadata.labels | default dict) "app.kubernetes.io/part-of" | default "") "gha-rs-controller" }}
{{- $found = append $found . -}}
{{- end }}
{{- end }}
{{- if ne (len $found) 1 -}}
{{- fail (printf "found %d gha-rs-controller Deployments: set controllerServiceAccount.namespace and controllerServiceAccount.name to the controller's ServiceAccount" (len $found)) -}}
{{- end -}}
{{- $labels := (index $found 0).metadata.labels -}}
{{- printf "%s/%s" (index $labels "actions.github.com/controller-service-account-namespace") (index $labels "actions.github.com/controller-service-account-name") -}}
{{- end -}}
{{- end -}}

{{/* Whether a container's env already names `name`. Call with (dict "container" $c "name" "X"). */}}
{{- define "gha-rs.hasEnv" -}}
{{- range (.container.env | default list) }}{{ if eq .name $.name }}true{{ end }}{{ end -}}
{{- end -}}

{{/* The runner container with what the container mode and TLS need added (the user's env wins). */}}
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
{{- if not (include "gha-rs.hasEnv" (dict "container" $c "name" .name)) }}
{{- $merged = append $merged . -}}
{{- end }}
{{- end }}
{{- if $merged }}{{ $_ := set $c "env" $merged }}{{ end -}}
{{- $userMounts := $c.volumeMounts | default list -}}
{{- if $mounts }}{{ $_ := set $c "volumeMounts" (concat $userMounts $mounts) }}{{ end -}}
{{- toYaml $c -}}
{{- end -}}

{{/* The runner pod template: the user's `template` plus the container mode's containers and volumes. */}}
{{- define "gha-rs.runnerTemplate" -}}
{{- $template := deepCopy (.Values.template | default dict) -}}
{{- $spec := $template.spec | default dict -}}
{{- $mode := include "gha-rs.containerMode" . -}}
{{- $containers := list -}}
{{- $runnerImage := "" -}}
{{- range ($spec.containers | default list) }}
{{- if eq .name "runner" }}
{{- $runnerImage = .image | default "" -}}
{{- $containers = append $containers (fromYaml (include "gha-rs.runnerContainer" (dict "root" $ "container" .))) -}}
{{- else }}
{{- $containers = append $containers . -}}
{{- end }}
{{- end }}
{{- if not $runnerImage -}}
{{- fail "template.spec.containers needs a container named \"runner\" with an image" -}}
{{- end -}}
{{- $_ := set $spec "containers" $containers -}}
{{- $volumes := $spec.volumes | default list -}}
{{- $userVolumes := list -}}
{{- range $volumes }}{{ $userVolumes = append $userVolumes .name }}{{ end -}}
{{- $initContainers := $spec.initContainers | default list -}}
{{- if eq $mode "dind" -}}
{{- $initContainers = append $initContainers (dict "name" "init-dind-externals" "image" $runnerImage "command" (list "cp") "args" (list "-r" "/home/runner/externals/." "/home/runner/tmpDir/") "volumeMounts" (list (dict "name" "dind-externals" "mountPath" "/home/runner/tmpDir"))) -}}
{{- $dind := dict "name" "dind" "image" "docker:dind" "args" (list "dockerd" "--host=unix:///var/run/docker.sock" "--group=$(DOCKER_GROUP_GID)") "env" (list (dict "name" "DOCKER_GROUP_GID" "value" "123")) "securityContext" (dict "privileged" true) "volumeMounts" (list (dict "name" "work" "mountPath" "/home/runner/_work") (dict "name" "dind-sock" "mountPath" "/var/run") (dict "name" "dind-externals" "mountPath" "/home/runner/externals")) -}}
{{- if semverCompare ">=1.29-0" .Capabilities.KubeVersion.Version -}}
{{- /* A native sidecar: docker starts before the runner and stops after it. */}}
{{- $_ := set $dind "restartPolicy" "Always" -}}
{{- $_ := set $dind "startupProbe" (dict "exec" (dict "command" (list "docker" "info")) "periodSeconds" 5 "failureThreshold" 24) -}}
{{- $initContainers = append $initContainers $dind -}}
{{- else -}}
{{- $_ := set $spec "containers" (append $spec.containers $dind) -}}
{{- end -}}
{{- if not (has "work" $userVolumes) }}{{ $volumes = append $volumes (dict "name" "work" "emptyDir" dict) }}{{ end -}}
{{- $volumes = append $volumes (dict "name" "dind-sock" "emptyDir" dict) -}}
{{- $volumes = append $volumes (dict "name" "dind-externals" "emptyDir" dict) -}}
{{- else if eq $mode "kubernetes" -}}
{{- $claim := required "containerMode.kubernetesModeWorkVolumeClaim is required for containerMode.type kubernetes" .Values.containerMode.kubernetesModeWorkVolumeClaim -}}
{{- if not (has "work" $userVolumes) }}{{ $volumes = append $volumes (dict "name" "work" "ephemeral" (dict "volumeClaimTemplate" (dict "spec" $claim))) }}{{ end -}}
{{- end -}}
{{- $tls := .Values.githubServerTLS | default dict -}}
{{- if $tls.runnerMountPath -}}
{{- $ref := $tls.certificateFrom.configMapKeyRef -}}
{{- $volumes = append $volumes (dict "name" "github-server-tls-cert" "configMap" (dict "name" $ref.name "items" (list (dict "key" $ref.key "path" $ref.key)))) -}}
{{- end -}}
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
