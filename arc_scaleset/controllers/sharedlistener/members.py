"""Which AutoscalingListeners a shared listener serves: its members (docs/listener.md, "Shared listener").

A member is an AutoscalingListener of the controller namespace, not being deleted, that the AutoscalingListener
controller serves (:func:`~arc_scaleset.controllers.autoscalinglistener.ownership.listener_refusal`: made by the
live scale set its spec names) and whose group, judged from that scale set
(:func:`~arc_scaleset.controllers.autoscalinglistener.group_membership.trusted_group`), is the group's. Its label
only finds the candidates. :func:`member_of` and :func:`select_members` are pure.

:class:`MemberVerdicts` remembers each candidate's verdict while neither the listener nor its scale set changed: a
group's pass runs at every event of any of its members (up to ``--shared-listener-max-members``), and judging and
parsing every member again in each pass made a member's set-up cost grow with the size of its group (issue 30).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import pydantic

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.controllers.autoscalinglistener.group_membership import trusted_group
from arc_scaleset.controllers.autoscalinglistener.ownership import listener_refusal
from arc_scaleset.kube.views import ObjectView, metadata_of


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


_UNREAD_METADATA = frozenset({"resourceVersion", "managedFields"})


def concerns_group(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether an update of a listener can change its group's pass: anything but its status changed (its
    resourceVersion and managedFields aside). A group's pass reads no member's status, and every member's status
    write queued a pass over the whole group (issue 30)."""
    if any(old.get(key) != new.get(key) for key in {*old, *new} if key not in ("metadata", "status")):
        return True
    before, after = metadata_of(old), metadata_of(new)
    return any(before.get(key) != after.get(key) for key in {*before, *after} if key not in _UNREAD_METADATA)


ScaleSetOf: TypeAlias = Callable[[Mapping[str, Any]], Mapping[str, Any] | None]
"""The live AutoscalingRunnerSet a listener's spec names (``None``: none)."""


def member_of(
    obj: Mapping[str, Any], scale_set: Mapping[str, Any] | None, *, group: str, controller_namespace: str
) -> Member | None:
    """``obj`` as a member of ``group`` given its live scale set ``scale_set``; ``None``: not a member (being
    deleted, no scale set, refused, judged to be in another group, or unreadable: its own controller reports it)."""
    if ObjectView(obj).is_deleting or scale_set is None:
        return None
    if listener_refusal(obj, controller_namespace=controller_namespace, scale_set=scale_set) is not None:
        return None
    if trusted_group(obj, scale_set) != group:
        return None
    try:
        return Member(obj, AutoscalingListener.from_object(obj))
    except pydantic.ValidationError:
        return None


def select_members(
    candidates: Iterable[Mapping[str, Any]],
    *,
    group: str,
    controller_namespace: str,
    scale_set_of: ScaleSetOf,
) -> list[Member]:
    """The members of ``group`` among ``candidates`` (the listeners labelled with it), sorted by name
    (:func:`member_of` for each)."""
    found = (
        member_of(obj, scale_set_of(obj), group=group, controller_namespace=controller_namespace) for obj in candidates
    )
    return sorted((member for member in found if member is not None), key=lambda member: member.name)


_Version: TypeAlias = tuple[str, str, str, str]
"""What a verdict was made from: the listener's resourceVersion, its scale set's UID and resourceVersion, and the
controller namespace."""


class MemberVerdicts:
    """:func:`select_members` with each candidate's verdict remembered, by group and listener UID, for as long as
    the listener's and its scale set's resourceVersions are the ones it was made from.

    Contract: :meth:`select` returns what :func:`select_members` would for the same arguments, and judges a
    candidate again only when it or its scale set changed (or either has no resourceVersion, as objects not read
    from the API). A pass keeps the verdicts of its own candidates only, so what is remembered is bounded by the
    listeners that carry a group label now. Not safe for two passes of one group at once (a controller never runs
    one key twice at once).
    """

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, tuple[_Version, Member | None]]] = {}
        self.judged = 0
        """How many verdicts were made, not recalled (for tests)."""

    def select(
        self,
        candidates: Iterable[Mapping[str, Any]],
        *,
        group: str,
        controller_namespace: str,
        scale_set_of: ScaleSetOf,
    ) -> list[Member]:
        """The members of ``group`` among ``candidates``, as :func:`select_members`."""
        known, kept = self._groups.get(group, {}), {}
        members = []
        for obj in candidates:
            scale_set = scale_set_of(obj)
            view, owner = ObjectView(obj), ObjectView(scale_set or {})
            version = (view.resource_version, owner.uid, owner.resource_version, controller_namespace)
            remembered = known.get(view.uid)
            if remembered is not None and remembered[0] == version:
                member = remembered[1]
            else:
                self.judged += 1
                member = member_of(obj, scale_set, group=group, controller_namespace=controller_namespace)
            if view.uid and view.resource_version and owner.resource_version:
                kept[view.uid] = (version, member)
            if member is not None:
                members.append(member)
        if kept:
            self._groups[group] = kept
        else:
            self._groups.pop(group, None)
        return sorted(members, key=lambda member: member.name)
