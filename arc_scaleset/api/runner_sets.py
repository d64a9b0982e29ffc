"""A scale set's EphemeralRunnerSets: which one is current, which are superseded, which are draining.

A scale set made by this controller has one EphemeralRunnerSet, named after its AutoscalingRunnerSet, and every
runner-spec change is applied to it in place (docs/revisions.md). ARC's releases (0.9 through 0.14) name theirs
``<ARS name>-<5 random characters>`` (``generateName``) and, on a runner-spec change, create another one beside
it and delete the old one a reconcile later; a scale set moved from ARC may therefore have one or several sets,
under any name (docs/migration.md). So sets are never found by name or label, but as ARC finds them: by their
controller owner reference to the AutoscalingRunnerSet, matched by identity (:func:`runner_sets_of`): a set
belongs to a scale set only when it is in the scale set's namespace and its controller reference names the
scale set's group, kind, name and UID (:mod:`arc_scaleset.kube.ownerrefs`). By UID alone, a set another team
made in its own namespace, carrying this scale set's UID, would take part in the rules below: become the current
set, make this scale set's own set superseded (scaled to nothing, then deleted) and have this scale set patch or
delete whatever name it gives. A reference to a deleted namesake (same name, another UID) is garbage for the
collector, not a set of this scale set.

The rules, pure, shared by both controllers that need them:

- a set being deleted is **draining**: its controller removes its idle runners and lets busy ones finish their
  job, then it goes;
- the **current** set is the newest set not being deleted (``creationTimestamp``, then name, for sets made in
  the same second), as ARC's ``latest()`` picks it. It keeps its name: the listener patches it and revisions
  are applied to it in place;
- every other set not being deleted is **superseded**: the AutoscalingRunnerSet controller deletes it, which
  drains it, and until then its own controller creates no runner for it and removes its idle ones: no
  listener scales it any more, so a set kept at its last replica count would keep idle runners registered
  forever.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.kube.ownerrefs import Owner, OwnerIndex, children_of, claimed_owner
from arc_scaleset.kube.views import ObjectView

_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

RunnerSet = Mapping[str, Any]


@dataclass(frozen=True)
class ScaleSetRunnerSets:
    """The EphemeralRunnerSets of one scale set, sorted by the rules of the module docstring."""

    current: RunnerSet | None = None
    superseded: tuple[RunnerSet, ...] = ()
    """Not being deleted, older than the current one: to be deleted (drained)."""
    draining: tuple[RunnerSet, ...] = ()
    """Being deleted: their runners are being removed, busy ones finish first."""

    @property
    def current_name(self) -> str:
        return ObjectView(self.current).name if self.current is not None else ""

    def all(self) -> tuple[RunnerSet, ...]:
        head = (self.current,) if self.current is not None else ()
        return (*head, *self.superseded, *self.draining)


def _age_key(runner_set: RunnerSet) -> tuple[dt.datetime, str]:
    view = ObjectView(runner_set)
    return (view.creation_timestamp or _EPOCH, view.name)


def sort_runner_sets(runner_sets: Iterable[RunnerSet]) -> ScaleSetRunnerSets:
    """Sort the sets of one scale set (all controlled by the same AutoscalingRunnerSet)."""
    live: list[RunnerSet] = []
    draining: list[RunnerSet] = []
    for runner_set in runner_sets:
        (draining if ObjectView(runner_set).is_deleting else live).append(runner_set)
    if not live:
        return ScaleSetRunnerSets(draining=tuple(draining))
    newest_first = sorted(live, key=_age_key, reverse=True)
    return ScaleSetRunnerSets(current=newest_first[0], superseded=tuple(newest_first[1:]), draining=tuple(draining))


def scale_set_of(runner_set: RunnerSet) -> Owner | None:
    """The AutoscalingRunnerSet ``runner_set``'s controller reference names, in the set's own namespace
    (``None``: no controller reference, or one to another kind).

    This is what the set claims; whether that scale set exists and has this UID is for the caller to see
    (:func:`runner_sets_of` starts from the scale set, so it does).
    """
    owner = claimed_owner(runner_set)
    # ARC's builders filled apiVersion from the in-memory object in 0.11 to 0.14.1 (#4475): the group is
    # checked, the version is not.
    if owner is None or (owner.group, owner.kind) != (AUTOSCALING_RUNNER_SETS.group, AUTOSCALING_RUNNER_SETS.kind):
        return None
    return owner


def runner_sets_of(cache: OwnerIndex, scale_set: Owner) -> list[RunnerSet]:
    """The EphemeralRunnerSets in ``cache`` that belong to ``scale_set`` (the identity rule of the module
    docstring), whatever their names."""
    return children_of(cache, scale_set)


def siblings_of(cache: OwnerIndex, runner_set: RunnerSet) -> list[RunnerSet]:
    """The sets of ``runner_set``'s scale set (``runner_set`` among them), by the same identity rule: only sets
    of its namespace that name the same scale set, so a set elsewhere claiming the scale set's UID is none."""
    scale_set = scale_set_of(runner_set)
    return runner_sets_of(cache, scale_set) if scale_set is not None else []


def is_superseded(runner_set: RunnerSet, siblings: Iterable[RunnerSet]) -> bool:
    """Whether ``runner_set`` (not being deleted) has a newer sibling set of its scale set that is current.

    ``siblings`` are the sets controlled by the same AutoscalingRunnerSet (``runner_set`` among them or not).
    """
    view = ObjectView(runner_set)
    if view.is_deleting:
        return False
    others = [s for s in siblings if ObjectView(s).uid != view.uid]
    current = sort_runner_sets([runner_set, *others]).current
    return current is not None and ObjectView(current).uid != view.uid
