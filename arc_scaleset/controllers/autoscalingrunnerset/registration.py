"""The GitHub side of an AutoscalingRunnerSet: its runner scale set registered, found, kept in line.

- :func:`register_scale_set`: reuse the scale set of that name in the runner group, or create it;
- :func:`sync_scale_set`: bring a registered scale set's runner group, name and labels in line with the spec;
- :func:`registration_patch`: the ARS merge patch recording what was registered (annotations id, name,
  group; the config URL labels; the defaulted ``runnerScaleSetName``);
- :func:`registration_record_stale`: whether those annotations are missing or disagree with the spec, so the
  scale set must be read from GitHub on this pass rather than at the next periodic check.

The caller decides *when* (the reconciler), these functions decide *how*. GitHub errors propagate with their
class (a 404 by ID is :class:`arc_scaleset.github.NotFound`: the scale set is definitively gone).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.api.keys import (
    ANNOTATION_RUNNER_GROUP_NAME,
    ANNOTATION_RUNNER_SCALE_SET_ID,
    ANNOTATION_RUNNER_SCALE_SET_NAME,
    LABEL_GITHUB_ENTERPRISE,
    LABEL_GITHUB_ORGANIZATION,
    LABEL_GITHUB_REPOSITORY,
)
from arc_scaleset.controllers.autoscalingrunnerset.desired import desired_scale_set_labels, scale_set_name_of
from arc_scaleset.controllers.errors import RunnerGroupNotFound
from arc_scaleset.controllers.github_access import GitHubAccess
from arc_scaleset.github import ActionsClient, NotFound, RunnerScaleSet
from arc_scaleset.kube.views import ObjectView

log = logging.getLogger(__name__)

DEFAULT_RUNNER_GROUP_ID = 1
URL_LABEL_KEYS = (LABEL_GITHUB_ENTERPRISE, LABEL_GITHUB_ORGANIZATION, LABEL_GITHUB_REPOSITORY)


@dataclass(frozen=True)
class Registration:
    scale_set: RunnerScaleSet
    created: bool


async def resolve_runner_group_id(client: ActionsClient, group_name: str) -> int:
    """The runner group's ID; the default group (1) for an empty name."""
    if not group_name:
        return DEFAULT_RUNNER_GROUP_ID
    try:
        group = await client.get_runner_group_by_name(group_name)
    except NotFound:
        raise RunnerGroupNotFound(
            f"runnerGroup {group_name!r} does not exist for {client.config.url}: create the runner group on"
            " GitHub, or fix spec.runnerGroup (empty means the default group)"
        ) from None
    return group.id


async def register_scale_set(client: ActionsClient, ars: AutoscalingRunnerSet) -> Registration:
    """Reuse the scale set named ``runnerScaleSetName`` (default: the object's name) in the runner group, or
    create it with the name label first, the extra labels after, and runner updates disabled."""
    group_id = await resolve_runner_group_id(client, ars.spec.runner_group)
    name = scale_set_name_of(ars)
    existing = await client.get_runner_scale_set(group_id, name)
    if existing is not None:
        return Registration(existing, created=False)
    created = await client.create_runner_scale_set(
        name=name, runner_group_id=group_id, labels=desired_scale_set_labels(ars), disable_update=True
    )
    return Registration(created, created=True)


def label_names(scale_set: RunnerScaleSet) -> list[str]:
    return [label.name for label in scale_set.labels]


async def sync_scale_set(client: ActionsClient, ars: AutoscalingRunnerSet, scale_set: RunnerScaleSet) -> list[str]:
    """Update the registered scale set where it differs from the spec; returns what changed (for an Event).

    Runner group: the named one (the default group when empty), compared by ID. Name:
    ``runnerScaleSetName``. Labels: the name plus ``runnerScaleSetLabels``, in order.
    """
    changes: list[str] = []
    group_id = await resolve_runner_group_id(client, ars.spec.runner_group)
    name = scale_set_name_of(ars)
    labels = desired_scale_set_labels(ars)
    update: dict[str, Any] = {}
    if scale_set.runner_group_id and scale_set.runner_group_id != group_id:
        update["runner_group_id"] = group_id
        changes.append(
            f"runner group {scale_set.runner_group_name or scale_set.runner_group_id} -> "
            f"{ars.spec.runner_group or 'default'}"
        )
    if scale_set.name != name:
        update["name"] = name
        changes.append(f"name {scale_set.name!r} -> {name!r}")
    if label_names(scale_set) != labels:
        update["labels"] = labels
        changes.append(f"labels {label_names(scale_set)} -> {labels}")
    if update:
        await client.update_runner_scale_set(scale_set.id, **update)
    return changes


def registration_record_stale(ars_object: Mapping[str, Any], ars: AutoscalingRunnerSet) -> bool:
    """Whether the ARS's record of its scale set needs GitHub's answer now: the runner-group or scale-set-name
    annotation is missing, the recorded name is not the spec's, or ``spec.runnerGroup`` is set and the recorded
    group is another (compared case-insensitively, as GitHub names groups and as ARC compares them).

    ARC restores a deleted ``actions.github.com/runner-group-name`` on the pass that sees it missing; tools
    and users read it (and copy it onto runners), so waiting for the periodic check would leave it absent.
    """
    annotations = ObjectView(ars_object).annotations
    group = annotations.get(ANNOTATION_RUNNER_GROUP_NAME)
    name = annotations.get(ANNOTATION_RUNNER_SCALE_SET_NAME)
    if not group or not name or name != scale_set_name_of(ars):
        return True
    return bool(ars.spec.runner_group) and group.casefold() != ars.spec.runner_group.casefold()


def registration_patch(
    ars_object: Mapping[str, Any],
    scale_set: RunnerScaleSet,
    *,
    url_labels: Mapping[str, str],
) -> dict[str, Any]:
    """The ARS merge patch that records ``scale_set`` (only the keys that change; ``{}`` when none)."""
    view = ObjectView(ars_object)
    annotations = view.annotations
    labels = view.labels
    wanted_annotations = {
        ANNOTATION_RUNNER_SCALE_SET_ID: str(scale_set.id),
        ANNOTATION_RUNNER_SCALE_SET_NAME: scale_set.name,
        ANNOTATION_RUNNER_GROUP_NAME: scale_set.runner_group_name,
    }
    patch: dict[str, Any] = {}
    changed_annotations = {k: v for k, v in wanted_annotations.items() if annotations.get(k) != v}
    metadata: dict[str, Any] = {}
    if changed_annotations:
        metadata["annotations"] = changed_annotations
    changed_labels = _url_label_changes(labels, url_labels)
    if changed_labels:
        metadata["labels"] = changed_labels
    if metadata:
        patch["metadata"] = metadata
    if not view.spec.get("runnerScaleSetName"):
        patch["spec"] = {"runnerScaleSetName": view.name}
    return patch


def url_labels_patch(ars_object: Mapping[str, Any], url_labels: Mapping[str, str]) -> dict[str, Any]:
    """The ARS merge patch that brings its config URL labels in line (``{}`` when they are)."""
    changes = _url_label_changes(ObjectView(ars_object).labels, url_labels)
    return {"metadata": {"labels": changes}} if changes else {}


def _url_label_changes(labels: Mapping[str, str], url_labels: Mapping[str, str]) -> dict[str, str | None]:
    changes: dict[str, str | None] = {k: v for k, v in url_labels.items() if labels.get(k) != v}
    # A URL moved from a repository to its organization leaves a stale repository label: delete it.
    changes.update({k: None for k in URL_LABEL_KEYS if k in labels and k not in url_labels})
    return changes


async def scale_set_client(github: GitHubAccess, ars: AutoscalingRunnerSet) -> ActionsClient:
    """The Actions-service client for this scale set's GitHub fields (URL, Secret, proxy, CA, vault)."""
    return await github.client_for(
        namespace=ars.namespace,
        config_url=ars.spec.github_config_url,
        secret_name=ars.spec.github_config_secret,
        proxy=ars.spec.proxy,
        tls=ars.spec.github_server_tls,
        vault=ars.spec.vault_config,
    )
