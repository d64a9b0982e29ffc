"""Which AutoscalingListeners and EphemeralRunnerSets are a scale set's own, as pure decisions
(docs/controllers.md, "Tenancy").

A scale set acts (adopts, patches, deletes) only on children that are its own by identity, never by name alone:

- an **EphemeralRunnerSet** is its own by the ownership rule of :mod:`arc_scaleset.kube.ownerrefs`
  (:func:`arc_scaleset.api.runner_sets.runner_sets_of`): in its namespace, its controller reference naming its
  group, kind, name and UID. :func:`runner_sets_to_delete` adds the set named after the scale set only when
  it names no other owner. A set of its namespace that names it half-way (its UID under another scale set's
  name, or its name under another UID) is no one's: :func:`runner_set_conflict` reports it on each scale set it
  names, and nothing is done with it.
- an **AutoscalingListener** lives in the controller namespace, where no owner reference can reach the scale
  set, and its name ends in 8 decimal digits of a 32-bit hash (ARC's naming, kept so ARC's listeners are
  found): two scale sets of one name in different namespaces can be given colliding URLs, and so one listener
  name. :func:`listener_is_own` tells them apart by what the listener says of its scale set: its
  ``actions.github.com/autoscaling-runner-set-uid`` annotation, written by this controller, and its spec's
  scale set namespace and name, written by this controller and by ARC's. A listener named after this scale
  set's listener but serving another scale set is never touched: :func:`listener_name_conflict` reports it as
  ``ListenerNameConflict`` on the scale set that cannot have the name, which gets no listener until its
  name changes or the other listener goes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from arc_scaleset.api.keys import ANNOTATION_AUTOSCALING_RUNNER_SET_UID
from arc_scaleset.api.runner_sets import scale_set_of
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.kube.ownerrefs import Owner, claimed_owner
from arc_scaleset.kube.views import ObjectView

REASON_LISTENER_NAME_CONFLICT: Final = "ListenerNameConflict"
REASON_RUNNER_SET_OWNERSHIP_CONFLICT: Final = "RunnerSetOwnershipConflict"


class ListenerNameConflict(ConfigurationError):  # noqa: N818 - named as the condition it reports, as errors.py
    """The scale set's listener name is taken by another scale set's listener (left running, never deleted)."""

    reason = REASON_LISTENER_NAME_CONFLICT


def listener_is_own(listener: Mapping[str, Any], scale_set: Owner) -> bool:
    """Whether ``listener`` is ``scale_set``'s, so that it may be patched, replaced or deleted for it.

    - Its UID annotation is the scale set's UID: made by this controller for this scale set.
    - It carries no UID annotation and its spec names the scale set's namespace and name: made by ARC's
      controller (or by a release of this one before the annotation) for this scale set. Replaced once on a
      takeover, as ``decisions.listener_differences`` decides (docs/migration.md).
    - Its UID annotation is another UID, but its spec names the scale set's namespace and name: made for a
      scale set of this name that was deleted (only one object can hold a namespace and name, and it is this
      one, with another UID). Its own controller already refuses it (``NotOwnedByScaleSet``); it is replaced.

    A listener whose spec names another scale set is that scale set's, whatever its name: another scale set's
    live listener, or the listener of a scale set that is gone (which its own controller deletes).
    """
    view = AutoscalingListenerView(listener)
    uid = view.annotation(ANNOTATION_AUTOSCALING_RUNNER_SET_UID)
    if uid and uid == scale_set.uid:
        return True
    return (view.scale_set_namespace, view.scale_set_name) == (scale_set.namespace, scale_set.name)


def listener_holder(listener: Mapping[str, Any]) -> str:
    """The scale set a listener serves, as ``namespace/name`` for a message (what its spec says)."""
    view = AutoscalingListenerView(listener)
    return f"{view.scale_set_namespace}/{view.scale_set_name}"


def listener_name_conflict(live: Mapping[str, Any] | None, scale_set: Owner) -> ListenerNameConflict | None:
    """The conflict when ``live``, the listener found under ``scale_set``'s listener name, is another scale
    set's (``None``: no listener there, or it is this scale set's)."""
    if live is None or listener_is_own(live, scale_set):
        return None
    view = ObjectView(live)
    return ListenerNameConflict(
        f"the listener name {view.name} is taken: AutoscalingListener {view.namespace}/{view.name} is the listener"
        f" of AutoscalingRunnerSet {listener_holder(live)}, not of this one (a listener is named after its scale"
        " set's name and 8 digits of a hash of its namespace, runnerGroup and githubConfigUrl, as ARC names it);"
        " it is left running, and this"
        " scale set gets no listener, so it takes no job, until the other listener is gone or this scale set's"
        " name, runnerGroup or githubConfigUrl changes"
    )


def runner_sets_to_delete(
    scale_set: Owner, own: Iterable[Mapping[str, Any]], named_like_scale_set: Mapping[str, Any] | None, *, name: str
) -> list[str]:
    """The EphemeralRunnerSets to delete with ``scale_set``, by name, sorted.

    ``own``: its sets by identity (``runner_sets_of``). ``named_like_scale_set``: the cached set of ``name``,
    the name this controller gives a scale set's set (``None``: not cached). That name is also deleted when it
    is not cached (a set created a moment ago) or names no controller, but never when it names another owner:
    in a namespace with scale sets ``x`` and ``y``, a set ``x`` that ``y`` controls is ``y``'s.
    """
    names = {ObjectView(runner_set).name for runner_set in own}
    if named_like_scale_set is None or claimed_owner(named_like_scale_set) in (None, scale_set):
        names.add(name)
    return sorted(names)


INDEX_CLAIMED_SCALE_SET: Final = "claimed-scale-set"
"""EphemeralRunnerSets by the ``namespace/name`` of the AutoscalingRunnerSet their controller reference names."""


def claimed_scale_set_index(runner_set: Mapping[str, Any]) -> tuple[str, ...]:
    """The index function of :data:`INDEX_CLAIMED_SCALE_SET` (nothing for a set that names no scale set)."""
    claimed = scale_set_of(runner_set)
    return (f"{claimed.namespace}/{claimed.name}",) if claimed is not None else ()


class ClaimIndex(Protocol):
    """A cache of EphemeralRunnerSets indexed by their controller reference's UID and by
    :data:`INDEX_CLAIMED_SCALE_SET` (the manager's cache, once the index is added)."""

    def by_owner(self, uid: str) -> list[Any]: ...

    def by_index(self, index: str, value: str) -> list[Any]: ...


def conflict_candidates(cache: ClaimIndex, scale_set: Owner) -> list[Mapping[str, Any]]:
    """Every set :func:`runner_set_conflict` could report for ``scale_set``: those naming its UID or its name, each
    once. Found through two indexes, so a pass costs the same with ten sets in the namespace as with a thousand
    (scanning the namespace made each pass O(sets): 29 ms at 1,000 sets, bench/README.md)."""
    found: dict[tuple[str, str], Mapping[str, Any]] = {}
    by_name = cache.by_index(INDEX_CLAIMED_SCALE_SET, f"{scale_set.namespace}/{scale_set.name}")
    for runner_set in (*cache.by_owner(scale_set.uid), *by_name):
        view = ObjectView(runner_set)
        found.setdefault((view.namespace, view.name), runner_set)
    return list(found.values())


def runner_set_conflict(scale_set: Owner, runner_sets: Iterable[Mapping[str, Any]]) -> tuple[str, str] | None:
    """(reason, message) naming the sets of ``runner_sets`` in ``scale_set``'s namespace whose controller reference
    names the scale set half-way, or ``None``. Such a set is neither scale set's (the identity rule): it is never
    current, drained or deleted, so the user has to say whose it is; both scale sets it names report it.
    Sets of other namespaces are not reported here: another team's objects say nothing on this scale set."""
    found = []
    for runner_set in runner_sets:
        claimed = scale_set_of(runner_set)
        if claimed is None or claimed.namespace != scale_set.namespace or claimed == scale_set:
            continue
        name = ObjectView(runner_set).name
        if claimed.uid == scale_set.uid:
            found.append(f"{name} (names AutoscalingRunnerSet {claimed.name} with this scale set's UID)")
        elif claimed.name == scale_set.name:
            found.append(f"{name} (names this scale set with UID {claimed.uid}, not its UID {scale_set.uid})")
    if not found:
        return None
    return (
        REASON_RUNNER_SET_OWNERSHIP_CONFLICT,
        f"EphemeralRunnerSet {', '.join(sorted(found))}: a set belongs to the scale set its controller reference"
        " names by name and UID both, so this one is neither scale set's and is left untouched (never used nor"
        " deleted); correct or delete its owner reference",
    )
