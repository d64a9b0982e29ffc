"""Which AutoscalingListeners a shared listener serves: its members (docs/listener.md, "Shared listener").

A member is an AutoscalingListener of the controller namespace, not being deleted, that the AutoscalingListener
controller serves (:func:`~arc_scaleset.controllers.autoscalinglistener.ownership.listener_refusal`: made by the
live scale set its spec names) and whose group, judged from that scale set
(:func:`~arc_scaleset.controllers.autoscalinglistener.group_membership.trusted_group`), is the group's. Its label
only finds the candidates. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.controllers.autoscalinglistener.group_membership import trusted_group
from arc_scaleset.controllers.autoscalinglistener.ownership import listener_refusal
from arc_scaleset.kube.views import ObjectView


@dataclass(frozen=True)
class Member:
    """One member: its AutoscalingListener as read and as parsed."""

    obj: Mapping[str, Any]
    listener: AutoscalingListener

    @property
    def name(self) -> str:
        """The listener's name: its key in the group's config Secret."""
        return self.listener.name

    @property
    def scale_set_namespace(self) -> str:
        return self.listener.spec.autoscaling_runner_set_namespace

    @property
    def runner_set(self) -> str:
        """The EphemeralRunnerSet the member's listener scales (its own spec's, in its scale set namespace)."""
        return self.listener.spec.ephemeral_runner_set_name


def select_members(
    candidates: Iterable[Mapping[str, Any]],
    *,
    group: str,
    controller_namespace: str,
    scale_set_of: Callable[[Mapping[str, Any]], Mapping[str, Any] | None],
) -> list[Member]:
    """The members of ``group`` among ``candidates`` (the listeners labelled with it), sorted by name.

    ``scale_set_of``: the live AutoscalingRunnerSet a listener's spec names (``None``: none). A listener that
    cannot be parsed is not a member (its own controller reports it).
    """
    members = []
    for obj in candidates:
        view = ObjectView(obj)
        scale_set = scale_set_of(obj)
        if view.is_deleting or scale_set is None:
            continue
        if listener_refusal(obj, controller_namespace=controller_namespace, scale_set=scale_set) is not None:
            continue
        if trusted_group(obj, scale_set) != group:
            continue
        try:
            members.append(Member(obj, AutoscalingListener.from_object(obj)))
        except pydantic.ValidationError:
            continue
    return sorted(members, key=lambda member: member.name)
