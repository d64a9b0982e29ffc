"""A scale set's EphemeralRunnerSets: which one is current, which are superseded, which are draining.

A scale set made by this controller has one EphemeralRunnerSet, named after its AutoscalingRunnerSet, and every
runner-spec change is applied to it in place (docs/revisions.md). ARC's releases (0.9 through 0.14) name theirs
``<ARS name>-<5 random characters>`` (``generateName``) and, on a runner-spec change, create another one beside
it and delete the old one a reconcile later; a scale set moved from ARC may therefore have one or several sets,
under any name (docs/migration.md). So sets are never found by name or label, but as ARC finds them: by their
controller owner reference to the AutoscalingRunnerSet (by UID here: a reference to a deleted namesake is
garbage for the collector, not a set of this scale set).

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


def scale_set_uid_of(runner_set: RunnerSet) -> str:
    """The UID of the AutoscalingRunnerSet that controls ``runner_set`` (``""`` when none does)."""
    ref = ObjectView(runner_set).controller_owner
    if ref is None or ref.get("kind") != AUTOSCALING_RUNNER_SETS.kind:
        return ""
    # ARC's builders filled apiVersion from the in-memory object in 0.11 to 0.14.1 (#4475): the group is
    # checked, the version is not.
    if not str(ref.get("apiVersion", "")).startswith(f"{AUTOSCALING_RUNNER_SETS.group}/"):
        return ""
    uid = ref.get("uid")
    return uid if isinstance(uid, str) else ""


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
