"""What one pass of the EphemeralRunnerSet controller works on (:class:`SetPass`), and what the controller
remembers about a set between passes (:class:`SetMemory`); the shape is docs/controllers.md, "The shape of a
pass"."""

from __future__ import annotations

from dataclasses import dataclass, field

from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.job_window import WindowBounds
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.clock import Clock
from arc_scaleset.controllers.ephemeralrunnerset.counts import StatusPacer
from arc_scaleset.controllers.ephemeralrunnerset.expectations import CreationExpectations, DeletionExpectations
from arc_scaleset.controllers.ephemeralrunnerset.finished_marker import FinishedMarker
from arc_scaleset.controllers.ephemeralrunnerset.kept_jobs import KeptJobs
from arc_scaleset.controllers.ephemeralrunnerset.proxy import ProxySecretCheck
from arc_scaleset.controllers.ephemeralrunnerset.runner_index import SetRunners, controller_uid
from arc_scaleset.controllers.ephemeralrunnerset.template_check import TemplateChecks
from arc_scaleset.controllers.own_writes import OwnWrites
from arc_scaleset.controllers.reconcile_pass import ObjectMemory
from arc_scaleset.controllers.runner_classification import RunnerStates
from arc_scaleset.kube.controller import Request, controller_owner_request
from arc_scaleset.kube.informer import Object


@dataclass
class SetMemory:
    """Everything the controller remembers about one set between passes: the set's slot of the controller's
    :class:`~arc_scaleset.controllers.reconcile_pass.ObjectMemory`, bound to its UID and forgotten when the set
    is gone or has drained.
    """

    created: CreationExpectations
    """The runners this process created that the cache may not show yet (no double creation)."""
    deleted: DeletionExpectations
    """The runners this process deleted that the cache may not show deleting yet (no second removal)."""
    template: TemplateChecks
    """The API server's last verdict on the set's runner pod (:mod:`.template_check`)."""
    counts: StatusPacer
    """When a change of the runner counts may be written (:mod:`.counts`)."""
    jobs: KeptJobs
    """Finished jobs on their way into ``status.recentJobs`` (:mod:`.kept_jobs`)."""
    marker: FinishedMarker = field(default_factory=FinishedMarker)
    """``status.finishedRunnerCleanupPatchID`` as this process stored or recorded it (:mod:`.finished_marker`)."""
    status_writes: OwnWrites = field(default_factory=OwnWrites)
    """The set as this controller's last status write returned it, while the cache shows a version it replaced:
    the advertised capacity is assessed and written against it (:mod:`.capacity_status`)."""
    proxy: ProxySecretCheck = field(default_factory=ProxySecretCheck)
    """The runner proxy Secret as this process last found or wrote it in line (:mod:`.proxy`)."""
    runners: SetRunners | None = None
    """The set's classified runners (:mod:`.runner_index`); ``None`` until a pass builds them from the cache, and
    again when a new controller starts (its event handlers start afresh)."""

    @classmethod
    def new(
        cls, *, clock: Clock, expectation_timeout: float, counts_interval: float, job_window: WindowBounds | None = None
    ) -> SetMemory:
        """An empty slot: nothing expected, no verdict, no counts written, no finished job seen."""
        return cls(
            created=CreationExpectations(clock=clock, timeout=expectation_timeout),
            deleted=DeletionExpectations(clock=clock, timeout=expectation_timeout),
            template=TemplateChecks(clock=clock),
            counts=StatusPacer(clock=clock, interval=counts_interval),
            jobs=KeptJobs(job_window or WindowBounds()),
            proxy=ProxySecretCheck(clock=clock),
        )


def set_memory_of(memory: ObjectMemory[SetMemory], runner: Object) -> SetMemory | None:
    """The memory slot of the set that controls ``runner``, found by the set's key and UID in the runner's
    controller reference (so no index by UID is kept beside the memory); ``None`` before a pass of that very
    set."""
    request = controller_owner_request(runner, EPHEMERAL_RUNNER_SETS)
    return None if request is None else memory.peek(request, controller_uid(runner))


def runner_index_of(memory: ObjectMemory[SetMemory], runner: Object) -> SetRunners | None:
    """The runner index of the set that controls ``runner`` (:func:`set_memory_of`); ``None`` when no pass has
    built one for that very set."""
    slot = set_memory_of(memory, runner)
    return None if slot is None else slot.runners


@dataclass
class SetReport:
    """What a pass found that its end writes to the set's status (``reconcile``'s ``finally``)."""

    counts: bool = False
    """Write the runner counts of :attr:`SetPass.states` (with :attr:`phase`, unless ``None``)."""
    phase: str | None = None
    assessed: bool = False
    """The pass got through its scaling: ``Degraded`` follows :attr:`problem`, and the capacity is published."""
    problem: tuple[str, str] | None = None
    """``(reason, message)`` of what keeps the set from its runners; ``None``: nothing does."""


@dataclass
class SetPass:
    """One pass over one EphemeralRunnerSet: the set (as read from the cache, and its view), its key, its
    runners by state against the applied revision, its memory slot and what the pass reports."""

    ers: Object
    view: EphemeralRunnerSetView
    request: Request
    memory: SetMemory
    states: RunnerStates
    report: SetReport = field(default_factory=SetReport)

    @property
    def key(self) -> str:
        """``namespace/name``, for logs."""
        return str(self.request)
