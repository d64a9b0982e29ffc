"""Every label, annotation and finalizer key the controller reads or writes, and the phase names.

The values are ARC's (actions.github.com/v1alpha1), so objects written by ARC and by this controller are
interchangeable. ARC's ``actions.github.com/integrity-hash`` annotation is deliberately absent: revisions and
``observedGeneration`` replace it.
"""

from __future__ import annotations

import enum
from typing import Final

# --- finalizers -------------------------------------------------------------------------------------------
AUTOSCALING_RUNNER_SET_FINALIZER: Final = "autoscalingrunnerset.actions.github.com/finalizer"
EPHEMERAL_RUNNER_SET_FINALIZER: Final = "ephemeralrunnerset.actions.github.com/finalizer"
EPHEMERAL_RUNNER_FINALIZER: Final = "ephemeralrunner.actions.github.com/finalizer"
ARC_EPHEMERAL_RUNNER_SET_FINALIZER: Final = EPHEMERAL_RUNNER_FINALIZER
"""The finalizer ARC's releases (0.9 through 0.14) put on an EphemeralRunnerSet: the EphemeralRunner's string.
A set that holds it is adopted as it is (docs/migration.md): it counts as this controller's own finalizer."""
EPHEMERAL_RUNNER_SET_FINALIZERS: Final = (EPHEMERAL_RUNNER_SET_FINALIZER, ARC_EPHEMERAL_RUNNER_SET_FINALIZER)
"""Either one on an EphemeralRunnerSet means its runners are drained before it goes."""
EPHEMERAL_RUNNER_REGISTRATION_FINALIZER: Final = "ephemeralrunner.actions.github.com/runner-registration-finalizer"
AUTOSCALING_LISTENER_FINALIZER: Final = "autoscalinglistener.actions.github.com/finalizer"
CLEANUP_PROTECTION_FINALIZER: Final = "actions.github.com/cleanup-protection"
"""On the Helm-created secret and RBAC objects; removed at the end of AutoscalingRunnerSet deletion."""

# --- labels -----------------------------------------------------------------------------------------------
LABEL_PART_OF: Final = "app.kubernetes.io/part-of"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_VERSION: Final = "app.kubernetes.io/version"
LABEL_SCALE_SET_NAME: Final = "actions.github.com/scale-set-name"
LABEL_SCALE_SET_NAMESPACE: Final = "actions.github.com/scale-set-namespace"
LABEL_GITHUB_ENTERPRISE: Final = "actions.github.com/enterprise"
LABEL_GITHUB_ORGANIZATION: Final = "actions.github.com/organization"
LABEL_GITHUB_REPOSITORY: Final = "actions.github.com/repository"
LABEL_LISTENER_NAME: Final = "auto-scaling-listener-name"
LABEL_LISTENER_NAMESPACE: Final = "auto-scaling-listener-namespace"
LABEL_EPHEMERAL_RUNNER: Final = "actions-ephemeral-runner"
LABEL_POD_TEMPLATE_HASH: Final = "pod-template-hash"
LABEL_RUNNER_POD: Final = "runner-pod"
"""On container-hook pods and secrets: the name of the EphemeralRunner they belong to."""
LABEL_CONTROLLER_SERVICE_ACCOUNT_NAMESPACE: Final = "actions.github.com/controller-service-account-namespace"
LABEL_CONTROLLER_SERVICE_ACCOUNT_NAME: Final = "actions.github.com/controller-service-account-name"
LABEL_CONTROLLER_WATCH_SINGLE_NAMESPACE: Final = "actions.github.com/controller-watch-single-namespace"
LABEL_RUNNER_INSTANCE: Final = "runner.arc-scaleset.dev/instance"
"""Not in ARC: on an EphemeralRunner (set by its EphemeralRunnerSet at creation) and its JIT Secret, a value
unique to that runner, so that a scale-down deletes a batch of runners and their Secrets in one request each
(``deletecollection``, docs/controllers.md "Deleting runners in batches")."""
LABEL_LISTENER_SHAREABLE: Final = "actions.github.com/listener-shareable"
"""Not in ARC: a cluster admin sets it to ``"true"`` on a Secret or ConfigMap of the controller namespace that
every scale set's ``listenerTemplate`` may reference (docs/controllers.md, "The listener template policy")."""

# Label values.
PART_OF_SCALE_SET: Final = "gha-runner-scale-set"
PART_OF_CONTROLLER: Final = "gha-rs-controller"
COMPONENT_RUNNER_SET: Final = "runner-set"
COMPONENT_RUNNER: Final = "runner"
COMPONENT_LISTENER: Final = "runner-scale-set-listener"
COMPONENT_CONTROLLER_MANAGER: Final = "controller-manager"
EPHEMERAL_RUNNER_LABEL_VALUE: Final = "True"

# --- annotations ------------------------------------------------------------------------------------------
ANNOTATION_RUNNER_SCALE_SET_ID: Final = "runner-scale-set-id"
"""On the AutoscalingRunnerSet: the scale set's ID on GitHub. ARC's key has no prefix."""
ANNOTATION_RUNNER_SCALE_SET_NAME: Final = "actions.github.com/runner-scale-set-name"
ANNOTATION_RUNNER_GROUP_NAME: Final = "actions.github.com/runner-group-name"
ANNOTATION_PATCH_ID: Final = "actions.github.com/patch-id"
"""On an EphemeralRunner: the EphemeralRunnerSet's spec.patchID when the runner was created."""
ANNOTATION_ACTIONABLE_REVISION: Final = "actions.github.com/actionable-revision"
"""On an EphemeralRunner: the EphemeralRunnerSet's spec.actionableRevision when the runner was created."""
ANNOTATION_LISTENER_CONFIG_RESOURCE_VERSION: Final = "actions.github.com/listener-config-resource-version"
"""On the listener pod: resourceVersion of the listener config Secret the pod was built from."""
ANNOTATION_AUTOSCALING_RUNNER_SET_GENERATION: Final = "actions.github.com/autoscaling-runner-set-generation"
"""On the EphemeralRunnerSet: informational only."""
ANNOTATION_VALUES_HASH: Final = "actions.github.com/values-hash"
ANNOTATION_RUNNER_SPEC_HASH: Final = "actions.github.com/runner-spec-hash"
ANNOTATION_CHANGE_HASH: Final = "actions.github.com/change-hash"
ARC_HASH_ANNOTATIONS: Final = (ANNOTATION_RUNNER_SPEC_HASH, ANNOTATION_VALUES_HASH, ANNOTATION_CHANGE_HASH)
"""ARC's fingerprints (ARS, ERS, EphemeralRunners, AutoscalingListener): never written nor compared here, so never
drift (docs/migration.md). ``runner-spec-hash`` on an AutoscalingListener marks it as made by ARC's controller."""
ANNOTATION_AUTOSCALING_RUNNER_SET_UID: Final = "actions.github.com/autoscaling-runner-set-uid"
"""Not in ARC: on the AutoscalingListener, the UID of the AutoscalingRunnerSet that made it. The listener lives in
another namespace, where no owner reference can point; a listener is served only while this matches its scale
set's UID (docs/controllers.md, "AutoscalingListener")."""
ANNOTATION_LISTENER_STATE: Final = "listener.arc-scaleset.dev/state"
"""On the EphemeralRunnerSet, written by its listener (not in ARC): the listener's state as JSON, including the
message session a successor must end (docs/listener.md, "The listener's state"; api/listener_state.py)."""
ANNOTATION_LISTENER_CURSOR: Final = "listener.arc-scaleset.dev/cursor"
"""On the EphemeralRunnerSet, written by its listener with every decision it publishes (not in ARC): the session,
the last message acted on and the acquisitions not confirmed, where a successor resumes (docs/listener.md,
"Leaving no gap"; api/listener_cursor.py)."""
LISTENER_ANNOTATIONS: Final = (ANNOTATION_LISTENER_STATE, ANNOTATION_LISTENER_CURSOR)
"""What the listener writes about itself on the EphemeralRunnerSet: never copied onto runners."""

# Written by the Helm chart on the AutoscalingRunnerSet: objects whose cleanup-protection finalizer the
# controller removes when the scale set is deleted.
ANNOTATION_CLEANUP_GITHUB_SECRET_NAME: Final = "actions.github.com/cleanup-github-secret-name"
ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING: Final = "actions.github.com/cleanup-manager-role-binding"
ANNOTATION_CLEANUP_MANAGER_ROLE_NAME: Final = "actions.github.com/cleanup-manager-role-name"
ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_BINDING_NAME: Final = (
    "actions.github.com/cleanup-kubernetes-mode-role-binding-name"
)
ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_NAME: Final = "actions.github.com/cleanup-kubernetes-mode-role-name"
ANNOTATION_CLEANUP_KUBERNETES_MODE_SERVICE_ACCOUNT_NAME: Final = (
    "actions.github.com/cleanup-kubernetes-mode-service-account-name"
)
ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME: Final = (
    "actions.github.com/cleanup-no-permission-service-account-name"
)

# --- pod and container names, environment ---------------------------------------------------------------
RUNNER_CONTAINER_NAME: Final = "runner"
LISTENER_CONTAINER_NAME: Final = "listener"
CONTAINER_HOOKS_ENV: Final = "ACTIONS_RUNNER_CONTAINER_HOOKS"
LISTENER_CONFIG_SECRET_KEY: Final = "config.json"


# --- phases -----------------------------------------------------------------------------------------------
class AutoscalingRunnerSetPhase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    OUTDATED = "Outdated"


class EphemeralRunnerSetPhase(enum.StrEnum):
    RUNNING = "Running"
    OUTDATED = "Outdated"


class EphemeralRunnerPhase(enum.StrEnum):
    """An EphemeralRunner's phase; an empty phase means Pending."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    OUTDATED = "Outdated"


CONDITION_CAPACITY_LIMITED: Final = "CapacityLimited"
"""An EphemeralRunnerSet's condition: the cluster cannot give it ``maxRunners`` runners now, and its
``status.advertisedCapacity`` (what the listener tells GitHub) says how many it can (docs/capacity.md)."""
