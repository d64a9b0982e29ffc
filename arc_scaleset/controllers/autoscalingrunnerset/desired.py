"""What an AutoscalingRunnerSet should have: its EphemeralRunnerSet, its AutoscalingListener, its scale set.

Pure builders (ARC's names and merge rules): plain data in, plain JSON objects out, no API. User-supplied
metadata is always the *base* of a merge and the controller's keys the *overwrite*, so the keys the
controller relies on win. Only fields that are set are written, so what the API server stores reads back
equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.api.common import ApiModel
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import (
    ANNOTATION_AUTOSCALING_RUNNER_SET_UID,
    ANNOTATION_RUNNER_GROUP_NAME,
    ANNOTATION_RUNNER_SCALE_SET_ID,
    ANNOTATION_RUNNER_SCALE_SET_NAME,
    COMPONENT_LISTENER,
    COMPONENT_RUNNER_SET,
    LABEL_COMPONENT,
    LABEL_PART_OF,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
    LABEL_VERSION,
    PART_OF_SCALE_SET,
)
from arc_scaleset.api.labels import filter_and_merge_labels, merge_annotations
from arc_scaleset.api.listener_group import ANNOTATION_GROUP_SHARD, LABEL_GROUP, GroupKey, group_id, group_of
from arc_scaleset.api.listener_standby import ANNOTATION_STANDBY, STANDBY_VALUE, wants_standby
from arc_scaleset.api.naming import autoscaling_listener_name, ephemeral_runner_set_name
from arc_scaleset.kube.ownerrefs import controller_ref

MAX_SCALE_SET_ID = 2**31 - 1


def scale_set_id_of(ars: AutoscalingRunnerSet) -> int | None:
    """The registered scale set ID from the ``runner-scale-set-id`` annotation; ``None`` when absent or invalid."""
    raw = (ars.metadata.annotations or {}).get(ANNOTATION_RUNNER_SCALE_SET_ID, "")
    try:
        value = int(raw.strip())
    except ValueError:
        return None
    return value if value > 0 else None


def scale_set_name_of(ars: AutoscalingRunnerSet) -> str:
    """The scale set's name on GitHub: ``spec.runnerScaleSetName``, defaulting to the object's name."""
    return ars.spec.runner_scale_set_name or ars.name


def desired_scale_set_labels(ars: AutoscalingRunnerSet) -> list[str]:
    """The scale set's labels: its name first, then ``runnerScaleSetLabels`` without duplicates or blanks."""
    name = scale_set_name_of(ars)
    labels = [name]
    for label in ars.spec.runner_scale_set_labels or []:
        label = label.strip()
        if label and label not in labels:
            labels.append(label)
    return labels


def listener_name_of(ars: AutoscalingRunnerSet) -> str:
    return autoscaling_listener_name(
        ars.name,
        namespace=ars.namespace,
        runner_group=ars.spec.runner_group,
        github_config_url=ars.spec.github_config_url,
    )


def _json(model: ApiModel | None) -> dict[str, Any] | None:
    return None if model is None else model.to_json()


def _set_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """Drop unset (``None``) fields, so the object reads back as it was written."""
    return {key: value for key, value in values.items() if value is not None}


def ephemeral_runner_spec(ars: AutoscalingRunnerSet, *, scale_set_id: int) -> dict[str, Any]:
    """The ``ephemeralRunnerSpec`` of the set: GitHub settings plus the runner pod template, inlined."""
    template = ars.spec.template or {}
    return _set_fields(
        {
            "githubConfigUrl": ars.spec.github_config_url,
            "githubConfigSecret": ars.spec.github_config_secret,
            "runnerScaleSetId": scale_set_id,
            "proxy": _json(ars.spec.proxy),
            "githubServerTLS": _json(ars.spec.github_server_tls),
            "vaultConfig": _json(ars.spec.vault_config),
            "ephemeralRunnerConfigSecretMetadata": _json(ars.spec.ephemeral_runner_config_secret_metadata),
            "metadata": template.get("metadata"),
            "spec": template.get("spec"),
        }
    )


def ephemeral_runner_set_labels(
    ars: AutoscalingRunnerSet, *, url_labels: Mapping[str, str], excluded_prefixes: Iterable[str]
) -> dict[str, str]:
    excluded = tuple(excluded_prefixes)
    own = {
        LABEL_PART_OF: PART_OF_SCALE_SET,
        LABEL_COMPONENT: COMPONENT_RUNNER_SET,
        LABEL_SCALE_SET_NAME: ars.name,
        LABEL_SCALE_SET_NAMESPACE: ars.namespace,
        **_version_label(ars),
        **url_labels,
    }
    base = filter_and_merge_labels(ars.metadata.labels or {}, own, excluded) or {}
    user = ars.spec.ephemeral_runner_set_metadata.labels if ars.spec.ephemeral_runner_set_metadata else None
    return filter_and_merge_labels(user or {}, base, excluded) or {}


def ephemeral_runner_set_annotations(ars: AutoscalingRunnerSet) -> dict[str, str]:
    annotations = ars.metadata.annotations or {}
    keys: tuple[str, ...] = (ANNOTATION_RUNNER_GROUP_NAME, ANNOTATION_RUNNER_SCALE_SET_NAME)
    own: dict[str, str] = {key: annotations[key] for key in keys if key in annotations}
    user = ars.spec.ephemeral_runner_set_metadata.annotations if ars.spec.ephemeral_runner_set_metadata else None
    return merge_annotations(user or {}, own) or {}


def desired_ephemeral_runner_set(
    ars_object: Mapping[str, Any],
    ars: AutoscalingRunnerSet,
    *,
    scale_set_id: int,
    url_labels: Mapping[str, str],
    excluded_prefixes: Iterable[str] = (),
) -> dict[str, Any]:
    """The EphemeralRunnerSet of a new scale set: the ARS's name (deterministic), 0 replicas, revision 0.

    ``ars_object`` is the ARS as read (for the owner reference: it needs the uid).
    """
    spec: dict[str, Any] = {
        "replicas": 0,
        "patchID": 0,
        "ephemeralRunnerSpec": ephemeral_runner_spec(ars, scale_set_id=scale_set_id),
        "actionableRevision": 0,
    }
    if ars.spec.ephemeral_runner_metadata is not None:
        spec["ephemeralRunnerMetadata"] = ars.spec.ephemeral_runner_metadata.to_json()
    return {
        "apiVersion": EPHEMERAL_RUNNER_SETS.api_version,
        "kind": EPHEMERAL_RUNNER_SETS.kind,
        "metadata": {
            "name": ephemeral_runner_set_name(ars.name),
            "namespace": ars.namespace,
            "labels": ephemeral_runner_set_labels(ars, url_labels=url_labels, excluded_prefixes=excluded_prefixes),
            "annotations": ephemeral_runner_set_annotations(ars),
            "ownerReferences": [controller_ref(ars_object)],
        },
        "spec": spec,
    }


def autoscaling_listener_labels(
    ars: AutoscalingRunnerSet, *, url_labels: Mapping[str, str], excluded_prefixes: Iterable[str]
) -> dict[str, str]:
    excluded = tuple(excluded_prefixes)
    own = {
        LABEL_SCALE_SET_NAMESPACE: ars.namespace,
        LABEL_SCALE_SET_NAME: ars.name,
        LABEL_PART_OF: PART_OF_SCALE_SET,
        LABEL_COMPONENT: COMPONENT_LISTENER,
        **_version_label(ars),
        **url_labels,
    }
    base = filter_and_merge_labels(ars.metadata.labels or {}, own, excluded) or {}
    user = ars.spec.autoscaling_listener.labels if ars.spec.autoscaling_listener else None
    return filter_and_merge_labels(user or {}, base, excluded) or {}


def autoscaling_listener_spec(
    ars: AutoscalingRunnerSet,
    *,
    scale_set_id: int,
    ephemeral_runner_set: str,
    image: str,
    image_pull_secrets: Iterable[str] = (),
) -> dict[str, Any]:
    """The AutoscalingListener's spec: everything the listener pod and its config are built from."""
    spec = ars.spec
    pull_secrets = [{"name": name} for name in image_pull_secrets]
    return _set_fields(
        {
            "githubConfigUrl": spec.github_config_url,
            "githubConfigSecret": spec.github_config_secret,
            "runnerScaleSetId": scale_set_id,
            "autoscalingRunnerSetNamespace": ars.namespace,
            "autoscalingRunnerSetName": ars.name,
            "ephemeralRunnerSetName": ephemeral_runner_set,
            "maxRunners": spec.effective_max_runners,
            "minRunners": spec.effective_min_runners,
            "minRunnersSchedule": [window.to_json() for window in spec.min_runners_schedule or ()] or None,
            "image": image,
            "imagePullSecrets": pull_secrets or None,
            "proxy": _json(spec.proxy),
            "githubServerTLS": _json(spec.github_server_tls),
            "vaultConfig": _json(spec.vault_config),
            "metrics": _json(spec.listener_metrics),
            "template": spec.listener_template,
            "configSecretMetadata": _json(spec.listener_config_secret_metadata),
            "serviceAccountMetadata": _json(spec.listener_service_account_metadata),
            "roleMetadata": _json(spec.listener_role_metadata),
            "roleBindingMetadata": _json(spec.listener_role_binding_metadata),
        }
    )


def desired_autoscaling_listener(
    ars: AutoscalingRunnerSet,
    *,
    namespace: str,
    scale_set_id: int,
    ephemeral_runner_set: str,
    image: str,
    image_pull_secrets: Iterable[str] = (),
    url_labels: Mapping[str, str],
    excluded_prefixes: Iterable[str] = (),
) -> dict[str, Any]:
    """The AutoscalingListener in the controller ``namespace``; no owner reference (cross-namespace).

    Instead, the ``autoscaling-runner-set-uid`` annotation names the scale set that made it (over any user
    annotation of that key): the listener controller serves a listener only while it matches the live scale
    set's UID (docs/controllers.md, "AutoscalingListener").
    """
    user_annotations = ars.spec.autoscaling_listener.annotations if ars.spec.autoscaling_listener else None
    annotations = dict(user_annotations or {})
    if ars.metadata.uid:
        annotations[ANNOTATION_AUTOSCALING_RUNNER_SET_UID] = ars.metadata.uid
    spec = autoscaling_listener_spec(
        ars,
        scale_set_id=scale_set_id,
        ephemeral_runner_set=ephemeral_runner_set,
        image=image,
        image_pull_secrets=image_pull_secrets,
    )
    labels = autoscaling_listener_labels(ars, url_labels=url_labels, excluded_prefixes=excluded_prefixes)
    group = listener_group_label(ars, spec)
    return {
        "apiVersion": AUTOSCALING_LISTENERS.api_version,
        "kind": AUTOSCALING_LISTENERS.kind,
        "metadata": {
            "name": listener_name_of(ars),
            "namespace": namespace,
            "labels": {**labels, **group},
            "annotations": {**annotations, **listener_standby_annotation(ars, shared=bool(group))},
        },
        "spec": spec,
    }


def listener_group_label(ars: AutoscalingRunnerSet, listener_spec: Mapping[str, Any]) -> dict[str, str]:
    """The shared-listener group label of the set's AutoscalingListener (docs/listener.md, "Shared listener"):
    present when the set opts in and can share; the group ID comes from the listener's spec, so a set that
    changes credentials or its listener's shape changes group. This is shard 0's: :func:`in_shard` moves a
    desired listener to another shard of its key."""
    group = group_of(ars.metadata.annotations, listener_spec)
    return {LABEL_GROUP: group} if group else {}


def in_shard(listener: Mapping[str, Any], key: GroupKey, shard: int) -> dict[str, Any]:
    """The desired ``listener`` (of a shared set of ``key``) in ``shard`` of its key's groups: its group label
    that shard's group, and :data:`ANNOTATION_GROUP_SHARD` naming it (absent for shard 0, as before shards)."""
    metadata = dict(listener["metadata"])
    metadata["labels"] = {**metadata["labels"], LABEL_GROUP: group_id(key, shard)}
    annotations = {k: v for k, v in metadata["annotations"].items() if k != ANNOTATION_GROUP_SHARD}
    metadata["annotations"] = {**annotations, ANNOTATION_GROUP_SHARD: str(shard)} if shard else annotations
    return {**listener, "metadata": metadata}


def listener_standby_annotation(ars: AutoscalingRunnerSet, *, shared: bool) -> dict[str, str]:
    """The standby annotation of the set's AutoscalingListener (docs/listener.md, "Standby listener"): copied
    from the set when it asks for a standby, unless it shares a listener (a shared listener has none)."""
    return {ANNOTATION_STANDBY: STANDBY_VALUE} if wants_standby(ars.metadata.annotations) and not shared else {}


def _version_label(ars: AutoscalingRunnerSet) -> dict[str, str]:
    version = (ars.metadata.labels or {}).get(LABEL_VERSION)
    return {LABEL_VERSION: version} if version else {}
