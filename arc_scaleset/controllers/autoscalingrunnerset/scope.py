"""The scope of one AutoscalingRunnerSet pass and what the controller remembers about each scale set.

The shape is the one of every kind (docs/controllers.md, "The shape of a pass"): :class:`ScaleSetPass` is what
the phases read and fill in; :class:`ScaleSetMemory` is the scale set's slot in the controller's one
:class:`~arc_scaleset.controllers.reconcile_pass.ObjectMemory`, forgotten when the scale set is gone or
deleting.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.api.views import AutoscalingRunnerSetView
from arc_scaleset.controllers.autoscalingrunnerset.ownership import listener_is_own
from arc_scaleset.controllers.autoscalingrunnerset.status import ReconcileReport
from arc_scaleset.controllers.own_writes import OwnWrites
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.ownerrefs import Owner

WAIT_REQUEUE_SECONDS = 5.0
"""Requeue while waiting for something to be deleted (its deletion is watched too; this is a backstop)."""
CONFLICT_REQUEUE_SECONDS = 0.5
"""Requeue after a write raced another one (a conflict, or a create the cache has not seen yet)."""


@dataclass
class ScaleSetMemory:
    """What the controller remembers about one scale set between passes (its ``ObjectMemory`` slot)."""

    verified_at: float | None = None
    """When the scale set was last confirmed on GitHub (the clock's monotonic time), ``None``: never."""
    verified_id: int = 0
    """The scale set ID that confirmation was for (a new ID is verified afresh)."""
    gone_report: dt.datetime | None = None
    """The listener's latest "scale set not found" report a verification acted on (its time): each report
    is acted on once."""
    writes: OwnWrites = field(default_factory=OwnWrites)
    """This controller's writes of the scale set (metadata, spec or status) its cache may not show yet: the
    status write diffs against the freshest (:mod:`.status_write`)."""

    def verified(self, scale_set_id: int, *, at: float) -> None:
        """Record that ``scale_set_id`` was confirmed on GitHub (registered, found) at monotonic time ``at``."""
        self.verified_at, self.verified_id = at, scale_set_id


@dataclass
class ScaleSetPass:
    """One reconcile of one AutoscalingRunnerSet: the object as read (raw, view, parsed model), its key, what
    the pass reports, its memory slot, and what earlier phases found for later ones."""

    obj: Object
    view: AutoscalingRunnerSetView
    ars: AutoscalingRunnerSet
    key: Request
    report: ReconcileReport
    memory: ScaleSetMemory
    listener: Object | None
    """The AutoscalingListener under the scale set's listener name, whoever's it is (:attr:`own_listener`)."""
    url_labels: Mapping[str, str] = field(default_factory=dict)
    """The config URL's labels (set by the registration phase, which parses the URL)."""
    scale_set_id: int = 0
    """The scale set's ID on GitHub (set by the registration phase; 0 until then: GitHub's IDs start at 1)."""
    gone_report: dt.datetime | None = None
    """When the listener reported the scale set gone on GitHub, if that report is why this pass verifies it."""
    runner_set_name: str = ""
    """The scale set's current EphemeralRunnerSet, once the pass found it in line (the listener's target)."""

    def wrote(self, stored: Object) -> None:
        """Record that this pass wrote the scale set and the server returned ``stored``: the status written at
        the end of the pass is diffed against it (:mod:`.status_write`)."""
        self.memory.writes.wrote(self.obj, stored)

    def carry_on(self, stored: Object) -> bool:
        """Record this pass's write of the scale set's metadata (:meth:`wrote`) and go on with ``stored``, the
        object the server returned, as the pass's object; ``False`` (nothing adopted) when the write changed the
        spec (a new generation: the pass that change brings works on it).

        A write of the scale set itself (its finalizer, its registration record, its URL labels) need not end the
        pass: the server's answer is the object as stored, fresher than the cache, and what the next phases read
        of it is its metadata. Ending the pass there cost a status write and a trip through the queue per write
        (issue 30: a new scale set's first three passes wrote three statuses on its kind's one client bucket).
        """
        self.wrote(stored)
        view = AutoscalingRunnerSetView(stored)
        if view.generation != self.report.generation:
            return False
        self.obj, self.view, self.ars = stored, view, AutoscalingRunnerSet.from_object(stored)
        return True

    @property
    def owner(self) -> Owner:
        return Owner.of(self.obj)

    @property
    def own_listener(self) -> Object | None:
        """:attr:`listener` if it is this scale set's: another scale set's listener under this name is never
        used, patched or deleted here (:mod:`.ownership`); the listener phase reports the conflict."""
        listener = self.listener
        return listener if listener is not None and listener_is_own(listener, self.owner) else None
