"""What one pass over a shared listener does, as a pure plan (docs/controllers.md, "Shared listeners").

:func:`plan_group`: with no member left, every group object goes (:attr:`GroupPlan.delete_all`); otherwise the
ServiceAccount, config Secret and both Roles and RoleBindings as :mod:`.objects` builds them (the Roles' rules
and the bindings' subjects replaced when they drift), the config Secret's keys that no member owns pruned, and the
pod wanted once a member has published its config (before that the pod would serve nobody).

:func:`plan_group_pod`: the one step about the pod, in the order of the per-set listener's
(:func:`~arc_scaleset.controllers.autoscalinglistener.pod_plan.plan_pod`): a pod of that name that is not the
group's is in the way; a failed pod is replaced after the group's restart backoff; a pod whose spec no longer
derives from the desired one is recreated; otherwise it is kept. A membership change never reaches the pod's spec,
so it never recreates the pod.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from arc_scaleset.api.listener_group import LABEL_GROUP
from arc_scaleset.controllers.autoscalinglistener.pod import recreation_reason
from arc_scaleset.controllers.autoscalinglistener.restart import PodFailure
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.controllers.sharedlistener.members import Member
from arc_scaleset.controllers.sharedlistener.objects import GroupObjects
from arc_scaleset.kube.resources import ROLE_BINDINGS, ROLES, SECRETS, SERVICE_ACCOUNTS, Resource
from arc_scaleset.kube.views import ObjectView


@dataclass(frozen=True)
class Desired:
    """One group object as it should be; ``replace``: its top-level fields rewritten when they drift."""

    resource: Resource
    body: dict[str, Any]
    replace: tuple[str, ...] = ()


@dataclass(frozen=True)
class GroupPlan:
    """What the pass does: delete everything, or bring ``objects`` in line, prune ``prune``, and the pod."""

    delete_all: bool = False
    objects: tuple[Desired, ...] = ()
    prune: tuple[str, ...] = ()
    """Keys of the config Secret whose listener is not a member (gone, refused, regrouped)."""
    pod: dict[str, Any] | None = None
    """The pod as it should be; ``None``: no pod (no member left, or none has published yet)."""


def plan_group(
    group: str,
    members: list[Member],
    *,
    published: Collection[str],
    controller_namespace: str,
    settings: ControllerSettings,
) -> GroupPlan:
    """The plan for ``group`` with ``members`` (:func:`.members.select_members`); ``published``: the keys its
    config Secret holds now."""
    if not members:
        return GroupPlan(delete_all=True)
    objects = GroupObjects(
        group, members, controller_namespace=controller_namespace, excluded=settings.exclude_label_prefixes
    )
    names = {member.name for member in members}
    return GroupPlan(
        objects=(
            Desired(SERVICE_ACCOUNTS, objects.service_account()),
            Desired(SECRETS, objects.config_secret()),
            Desired(ROLES, objects.config_reader_role(), replace=("rules",)),
            Desired(ROLE_BINDINGS, objects.config_reader_role_binding(), replace=("subjects",)),
            Desired(ROLES, objects.runner_set_role(), replace=("rules",)),
            Desired(ROLE_BINDINGS, objects.runner_set_role_binding(), replace=("subjects",)),
        ),
        prune=tuple(sorted(key for key in published if key not in names)),
        pod=objects.pod(settings) if names & set(published) else None,
    )


class GroupPodAction(enum.StrEnum):
    NOTHING = "Nothing"
    IN_THE_WAY = "InTheWay"
    REMOVE = "Remove"
    WAIT_BACKOFF = "WaitBackoff"
    CREATE = "Create"
    REPLACE_FAILED = "ReplaceFailed"
    WAIT_TERMINATING = "WaitTerminating"
    RECREATE = "Recreate"
    KEEP = "Keep"


@dataclass(frozen=True)
class GroupPodStep:
    action: GroupPodAction
    why: str = ""
    """``IN_THE_WAY``, ``RECREATE``: why."""
    failure: PodFailure | None = None
    """``REPLACE_FAILED``: what ended the pod."""
    requeue_after: float | None = None
    """``WAIT_BACKOFF``: the backoff's remaining seconds."""


def is_group_object(obj: Mapping[str, Any], group: str) -> bool:
    """Whether ``obj`` is group ``group``'s (its label says so): only such an object is changed or deleted."""
    return ObjectView(obj).labels.get(LABEL_GROUP) == group


def in_the_way(live: Mapping[str, Any], desired: Mapping[str, Any], *, group: str) -> str | None:
    """Why ``live``, found under the name of group ``group``'s object ``desired``, may not be adopted (``None``:
    it may). Not the group's by its label; or a RoleBinding whose ``roleRef`` is not the desired one: a
    ``roleRef`` cannot be changed, and replacing the subjects of a binding to another Role would grant the
    group's listener that Role (as a per-set listener's binding: ``autoscalinglistener.ownership``)."""
    view = ObjectView(live)
    what = f"{view.kind or ObjectView(desired).kind} {view.namespace}/{view.name}"
    if not is_group_object(live, group):
        return (
            f"{what} exists but is not shared listener {group}'s (no {LABEL_GROUP} label naming it); it is left"
            " untouched: delete or rename it"
        )
    wanted = desired.get("roleRef")
    if wanted is not None and live.get("roleRef") != wanted:
        bound = (live.get("roleRef") or {}).get("name", "")
        return (
            f"{what} binds {bound!r}, not shared listener {group}'s Role {wanted.get('name')!r}, and a roleRef"
            " cannot be changed; it is left untouched: delete it"
        )
    return None


def plan_group_pod(
    live: Mapping[str, Any] | None,
    desired: Mapping[str, Any] | None,
    *,
    group: str,
    failure: PodFailure | None,
    backoff_remaining: float,
) -> GroupPodStep:
    """The one step to take about the group's pod (``desired`` ``None``: none is wanted)."""
    if live is not None and not is_group_object(live, group):
        view = ObjectView(live)
        why = f"Pod {view.namespace}/{view.name} exists but is not shared listener {group}'s; it is left untouched"
        return GroupPodStep(GroupPodAction.IN_THE_WAY, why=why)
    if desired is None:
        wanted_gone = live is not None and not ObjectView(live).is_deleting
        return GroupPodStep(GroupPodAction.REMOVE if wanted_gone else GroupPodAction.NOTHING)
    if live is None:
        if backoff_remaining > 0:
            return GroupPodStep(GroupPodAction.WAIT_BACKOFF, requeue_after=backoff_remaining)
        return GroupPodStep(GroupPodAction.CREATE)
    if failure is not None:
        return GroupPodStep(GroupPodAction.REPLACE_FAILED, failure=failure)
    if ObjectView(live).is_deleting:
        return GroupPodStep(GroupPodAction.WAIT_TERMINATING)
    reason = recreation_reason(live, desired)
    if reason is not None:
        return GroupPodStep(GroupPodAction.RECREATE, why=reason)
    return GroupPodStep(GroupPodAction.KEEP)
