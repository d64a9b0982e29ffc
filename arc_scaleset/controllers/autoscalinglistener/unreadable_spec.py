"""An AutoscalingListener whose spec this controller cannot read (docs/controllers.md, "A listener whose spec cannot
be read").

The CRD schema lets through what the listener's model refuses: a ``minRunnersSchedule`` day or time zone no parser
knows, a field an older or newer controller wrote in another shape, a hand edit. No phase can run on such a
listener (each needs its parsed spec), so the pass reports it and ends: ``Ready`` names the field and what is
wrong with it (reason ``InvalidSpec``), through the listener's usual conditions (:func:`.status.derive_conditions`:
a listener pod that still runs serves on its previous config, and ``Ready`` says so). The shell writes them only
when they change and records a Warning Event then, so a listener that stays unreadable costs no write and no
Event on later passes. The Event is on the listener alone: the scale set its spec names has not been checked
against it (docs/controllers.md, "Tenancy"); its own controller shows a listener that is not ``Ready``.

The message is :func:`~arc_scaleset.controllers.errors.first_spec_error`'s: the field's path and what is wrong,
never the value pydantic was given.

Not requeued: only an edit of the listener (or its replacement by its scale set's controller, which recreates a
listener whose spec is not the one it wants) can make it readable, and that edit wakes it.

A listener being deleted is deleted all the same: its children are found from its name, its annotations and the
one spec field that says where its Role and RoleBinding are (:func:`deletion_skeleton`), so an unreadable spec
never holds its finalizer (nor the deletion of its scale set, which waits for it).

Pure: the view, the error and what the cache shows come in, the pass's report goes out.
"""

from __future__ import annotations

import pydantic

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.controllers.autoscalinglistener.restart import BackoffState
from arc_scaleset.controllers.autoscalinglistener.status import ListenerReport
from arc_scaleset.controllers.errors import InvalidSpec, first_spec_error


def unreadable_spec_message(exc: pydantic.ValidationError) -> str:
    """What ``Ready`` and the Event say: the field, what is wrong, and what to do."""
    return (
        f"the AutoscalingListener cannot be read: {first_spec_error(exc)}; fix or remove that field (the controller"
        " of the AutoscalingRunnerSet that made the listener replaces one whose spec is not its own); nothing is"
        " created or changed for it until then"
    )


def deletion_skeleton(view: AutoscalingListenerView) -> AutoscalingListener:
    """The listener as far as its deletion reads it (:mod:`.deletion`, the deletion phases): its metadata and
    ``spec.autoscalingRunnerSetNamespace`` (where its Role and RoleBinding are), the rest of its spec left out.

    Raises ``pydantic.ValidationError`` only when its metadata cannot be read either (the API server checks it).
    """
    return AutoscalingListener.from_object(
        {"metadata": view.metadata, "spec": {"autoscalingRunnerSetNamespace": view.scale_set_namespace}}
    )


def unreadable_spec_report(
    view: AutoscalingListenerView, message: str, *, pod_running: bool, restarts: BackoffState | None
) -> ListenerReport:
    """The report of a pass that found the listener's spec unreadable (``message``: :func:`unreadable_spec_message`;
    ``pod_running``: its listener container runs, as last seen; ``restarts``: its restart backoff, as remembered)."""
    return ListenerReport(
        generation=view.generation, pod_running=pod_running, problem=(InvalidSpec.reason, message), restarts=restarts
    )
