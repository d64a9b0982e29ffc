"""The EphemeralRunner an EphemeralRunnerSet creates, as a pure builder.

Label and annotation precedence follows ARC: user metadata is the *base* and the controller's keys the
*overwrite*, so a user can add keys but never change the keys the controller relies on.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from arc_scaleset.api.common import API_VERSION
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.keys import (
    ANNOTATION_ACTIONABLE_REVISION,
    ANNOTATION_PATCH_ID,
    COMPONENT_RUNNER,
    EPHEMERAL_RUNNER_FINALIZER,
    EPHEMERAL_RUNNER_REGISTRATION_FINALIZER,
    LABEL_COMPONENT,
    LABEL_RUNNER_INSTANCE,
    LISTENER_ANNOTATIONS,
)
from arc_scaleset.api.labels import filter_and_merge_labels, merge_annotations
from arc_scaleset.api.naming import ephemeral_runner_generate_name, runner_proxy_secret_name
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.kube.ownerrefs import controller_ref


def desired_ephemeral_runner(ers: Mapping[str, Any], *, exclude_label_prefixes: Iterable[str] = ()) -> dict[str, Any]:
    """A new EphemeralRunner of ``ers`` (``generateName``; the API server picks the suffix).

    Stamped with the set's current ``spec.patchID`` and ``spec.actionableRevision`` (docs/revisions.md), created
    with both finalizers already present so the runner controller needs no extra write.
    """
    view = EphemeralRunnerSetView(ers)
    runner_metadata = view.runner_metadata
    prefixes = tuple(exclude_label_prefixes)
    computed_labels = {**view.labels, LABEL_COMPONENT: COMPONENT_RUNNER}
    labels = filter_and_merge_labels(runner_metadata.get("labels"), computed_labels, prefixes) or {}
    # The set's annotations, as ARC copies them, but the listener's report about itself and its message cursor:
    # they describe the listener, not the runner, and would sit frozen (with the listener's session ID) on every
    # runner pod.
    inherited = {key: value for key, value in view.annotations.items() if key not in LISTENER_ANNOTATIONS}
    computed_annotations = {
        **inherited,
        ANNOTATION_PATCH_ID: str(view.patch_id),
        ANNOTATION_ACTIONABLE_REVISION: str(view.actionable_revision),
    }
    annotations = merge_annotations(runner_metadata.get("annotations"), computed_annotations) or {}
    runner_spec = copy.deepcopy(dict(view.runner_spec))
    if runner_spec.get("proxy") is not None:
        runner_spec["proxySecretRef"] = runner_proxy_secret_name(view.name, view.namespace)
    return {
        "apiVersion": API_VERSION,
        "kind": EPHEMERAL_RUNNERS.kind,
        "metadata": {
            "generateName": ephemeral_runner_generate_name(view.name),
            "namespace": view.namespace,
            "labels": labels,
            "annotations": annotations,
            "finalizers": [EPHEMERAL_RUNNER_FINALIZER, EPHEMERAL_RUNNER_REGISTRATION_FINALIZER],
            "ownerReferences": [controller_ref(ers)],
        },
        "spec": runner_spec,
    }


def with_runner_instance(runner: Mapping[str, Any]) -> dict[str, Any]:
    """``runner`` (a :func:`desired_ephemeral_runner` body) labelled with a new, unique runner instance.

    One body serves every creation of a scale-up; each creation sends it through this, so every runner gets
    its own ``runner.arc-scaleset.dev/instance`` and a scale-down can name a batch of runners in one label
    selector (docs/controllers.md "Deleting runners in batches"). Not a name: the API server picks the name
    (``generateName``) and a name can be longer than a label value may be.
    """
    metadata = dict(runner["metadata"])
    metadata["labels"] = {**metadata.get("labels", {}), LABEL_RUNNER_INSTANCE: uuid.uuid4().hex}
    return {**runner, "metadata": metadata}
