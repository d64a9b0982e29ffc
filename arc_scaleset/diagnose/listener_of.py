"""Which AutoscalingListener ``status`` and ``explain`` show for a scale set: a pure decision on listed objects.

A listener lives in the controller namespace, where no owner reference can point at its scale set, and anybody
who may create AutoscalingListeners in some namespace can write one whose spec names any scale set. The
controller serves a listener only in its own namespace and only while its
``actions.github.com/autoscaling-runner-set-uid`` annotation is the scale set's UID (docs/controllers.md,
"AutoscalingListener"); the diagnosis counts a listener by the same rule, so a decoy never stands in for the
real listener on another team's screen:

- a listener counts only when its spec names the scale set *and* its UID annotation matches;
- with the controller namespace known (``--controller-namespace``), only a listener there counts;
- without it, the one namespace holding such a listener is taken for the controller's; when several do (a copy
  of the real listener, annotation and all, made elsewhere), none is shown and a note names them all.

Every listener that names the scale set but does not count is named in a note (the first few; the rest are
counted), so a decoy is seen, not hidden, and a thousand decoys do not fill the screen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from arc_scaleset.api.keys import ANNOTATION_AUTOSCALING_RUNNER_SET_UID
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.kube.views import ObjectView

NAMED_AT_MOST: Final = 3
"""Listeners named one by one in the notes; the rest are counted (anyone may create many decoys)."""


@dataclass(frozen=True)
class ListenerChoice:
    """The listener shown (``None``: none counts) and what the user should know about the others."""

    listener: Mapping[str, Any] | None
    notes: list[str] = field(default_factory=list)


def listener_of(
    scale_set: Mapping[str, Any], listeners: Sequence[Mapping[str, Any]], *, controller_namespace: str | None
) -> ListenerChoice:
    """The listener of ``scale_set`` among ``listeners`` by the rules of the module docstring."""
    ars = ObjectView(scale_set)
    counted: list[Mapping[str, Any]] = []
    notes = []
    ignored = 0
    for al in listeners:
        view = AutoscalingListenerView(al)
        if (view.scale_set_namespace, view.scale_set_name) != (ars.namespace, ars.name):
            continue
        refusal = _not_its_listener(al, uid=ars.uid, controller_namespace=controller_namespace)
        if refusal is None:
            counted.append(al)
            continue
        ignored += 1
        if ignored <= NAMED_AT_MOST:
            notes.append(f"AutoscalingListener {_where(al)} names this scale set but {refusal}: not shown")
    if ignored > NAMED_AT_MOST:
        notes.append(f"{ignored - NAMED_AT_MOST} more AutoscalingListeners name this scale set: not shown")
    if len(counted) > 1:
        notes.append(
            f"AutoscalingListeners {_names(counted)} all claim this scale set: none shown"
            " (--controller-namespace says which namespace is the controller's)"
        )
        return ListenerChoice(None, notes)
    return ListenerChoice(counted[0] if counted else None, notes)


def _names(listeners: Sequence[Mapping[str, Any]]) -> str:
    named = ", ".join(_where(al) for al in listeners[:NAMED_AT_MOST])
    more = len(listeners) - NAMED_AT_MOST
    return f"{named} and {more} more" if more > 0 else named


def _not_its_listener(listener: Mapping[str, Any], *, uid: str, controller_namespace: str | None) -> str | None:
    """Why a listener naming the scale set is not its listener, or ``None`` when it is."""
    view = ObjectView(listener)
    if controller_namespace is not None and view.namespace != controller_namespace:
        return f"is outside the controller namespace {controller_namespace}"
    if not uid or view.annotation(ANNOTATION_AUTOSCALING_RUNNER_SET_UID) != uid:
        return f"was not made for it (its {ANNOTATION_AUTOSCALING_RUNNER_SET_UID} is not the scale set's UID)"
    return None


def _where(listener: Mapping[str, Any]) -> str:
    view = ObjectView(listener)
    return f"{view.namespace}/{view.name}"
