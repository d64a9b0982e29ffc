"""How long each key's reconcile has been failing, and when that is worth telling the object's readers.

A reconcile that raises is retried with backoff (:mod:`.controller`). One failure is often a blip (a
timeout, a write that lost a race); one that keeps failing is not, and must not stay hidden in the
controller's log (docs/controllers.md, "No silent failure"). The rules:

* A key's failure is **persistent** once :attr:`FailurePolicy.attempts` passes in a row have failed, or
  :attr:`FailurePolicy.duration` seconds have passed since the first of them (the :class:`~arc_scaleset.clock.Clock`
  is injected, so tests move time instead of waiting for it).
* The controller hands a persistent failure to its :class:`FailureReporter` on every failing pass (so a
  condition someone else overwrote is put back), with ``announce`` true once per distinct error (its reason
  and text): the reporter writes a Warning Event then, never once per retry.
* The first successful pass clears the key's record; when a failure had been reported, the reporter is told
  it recovered (a Normal Event, the condition back to ``False``).
* Errors the reconcile reports itself (the controller's ``self_reported`` classes, e.g. bad input with its own
  condition and Event) are counted but never handed to the reporter: two writers must not take turns on one
  condition.

A reconciler that writes its own status at the end of every pass must not contradict the reporter
("no problem found" on a pass that failed): :func:`pass_failure`, called from inside the failing pass, says
whether the exception that ends it makes a persistent failure, counting this pass, with the same reason and
message the reporter is given afterwards.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime as dt
import re
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.kube.conditions import format_time
from arc_scaleset.observability.logging import redact

ERROR_TEXT_LIMIT: Final = 1000
"""Characters of an error's text kept in a failure's message (a condition or Event is not a log)."""
_CONDITION_REASON: Final = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")

K_contra = TypeVar("K_contra", contravariant=True)


@dataclass(frozen=True)
class FailurePolicy:
    """When a key's failure counts as persistent: ``attempts`` failed passes in a row, or ``duration`` seconds
    since the first of them, whichever comes first."""

    attempts: int = 3
    duration: float = 60.0


@dataclass(frozen=True)
class Failure:
    """A persistent reconcile failure: ``reason`` (CamelCase, usable as a condition's and an Event's reason),
    ``error`` (the error's one-line text, masked of secrets, then cut to :data:`ERROR_TEXT_LIMIT` characters),
    ``since`` (wall time of the first failed pass of the run) and ``attempts`` (failed passes so far)."""

    reason: str
    error: str
    since: dt.datetime
    attempts: int

    @property
    def message(self) -> str:
        """The text for a condition or an Event; stable across the passes of one error (no counter in it), so a
        condition that says it is not written again on every retry."""
        return f"reconciling has failed since {format_time(self.since)}, retried with backoff: {self.error}"

    @property
    def identity(self) -> tuple[str, str]:
        """What makes two failures the same error (one Warning Event each)."""
        return self.reason, self.error


class FailureReporter(Protocol[K_contra]):
    """Tells an object's readers about its persistent failure (one per primary kind; see the module docstring).

    Neither method may raise for an API error: reporting is a side note to the reconcile."""

    async def failing(self, key: K_contra, failure: Failure, *, announce: bool) -> None:
        """The key's reconcile keeps failing; ``announce``: this error was not reported before (Warning Event)."""
        ...

    async def recovered(self, key: K_contra, failure: Failure) -> None:
        """A pass succeeded after ``failure`` (the last one reported) was reported."""
        ...


def one_line(exc: BaseException) -> str:
    """``Type: message`` with the message's whitespace collapsed to single spaces."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def failure_reason(exc: BaseException) -> str:
    """The error's own reason when it has a usable one (a configuration error's ``reason``, a Kubernetes Status
    reason such as ``Invalid``), else its class name."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and len(reason) <= 128 and _CONDITION_REASON.fullmatch(reason):
        return reason
    return type(exc).__name__


def is_persistent(attempts: int, *, first: float, now: float, policy: FailurePolicy) -> bool:
    """Whether ``attempts`` failed passes in a row, the first at monotonic time ``first``, count as persistent."""
    return attempts >= policy.attempts or now - first >= policy.duration


@dataclass
class _Run:
    """A key's current run of failed passes."""

    attempts: int
    first: float
    since: dt.datetime
    announced: tuple[str, str] | None = None
    reported: Failure | None = None


class FailureTracker:
    """Each key's run of failed passes (in memory: a restarted controller starts counting again)."""

    def __init__(self, *, policy: FailurePolicy | None = None, clock: Clock = REAL_CLOCK) -> None:
        self.policy = policy or FailurePolicy()
        self._clock = clock
        self._runs: dict[Hashable, _Run] = {}

    def __len__(self) -> int:
        return len(self._runs)

    def judge(self, key: Hashable, exc: BaseException) -> Failure | None:
        """The persistent failure that recording ``exc`` for ``key`` now would make, or ``None`` when that pass
        would not (yet) be persistent. Changes nothing."""
        return self._judge(self._next(key), exc)

    def failed(self, key: Hashable, exc: BaseException) -> Failure | None:
        """Record a failed pass; the persistent failure it makes (as :meth:`judge` said), or ``None``."""
        run = self._next(key)
        self._runs[key] = run
        return self._judge(run, exc)

    def _next(self, key: Hashable) -> _Run:
        """The key's run with one more failed pass (a new object: the stored run is not changed)."""
        run = self._runs.get(key)
        if run is None:
            return _Run(attempts=1, first=self._clock.monotonic(), since=self._clock.now())
        return dataclasses.replace(run, attempts=run.attempts + 1)

    def _judge(self, run: _Run, exc: BaseException) -> Failure | None:
        if not is_persistent(run.attempts, first=run.first, now=self._clock.monotonic(), policy=self.policy):
            return None
        # Masked before it is cut: a secret across the cut would leave its first characters behind, which
        # neither its registered value nor a credential pattern matches when the condition or Event masks it.
        error = redact(one_line(exc))[:ERROR_TEXT_LIMIT]
        return Failure(reason=failure_reason(exc), error=error, since=run.since, attempts=run.attempts)

    def announce(self, key: Hashable, failure: Failure) -> bool:
        """Record that ``failure`` is being reported; True when its error differs from the last one reported
        for this run (the reporter writes an Event then)."""
        run = self._runs.get(key)
        if run is None:
            return False
        run.reported = failure
        if run.announced == failure.identity:
            return False
        run.announced = failure.identity
        return True

    def succeeded(self, key: Hashable) -> Failure | None:
        """End the key's run; the last failure reported during it, or ``None`` (nothing to take back)."""
        run = self._runs.pop(key, None)
        return run.reported if run is not None else None


_current: contextvars.ContextVar[tuple[FailureTracker, Hashable] | None] = contextvars.ContextVar(
    "arc_scaleset_reconcile_failures", default=None
)


@contextlib.contextmanager
def tracking(tracker: FailureTracker, key: Hashable) -> Iterator[None]:
    """Make ``tracker``'s record of ``key`` what :func:`pass_failure` consults (the controller wraps each
    reconcile call in it)."""
    token = _current.set((tracker, key))
    try:
        yield
    finally:
        _current.reset(token)


def pass_failure(exc: BaseException) -> Failure | None:
    """For a reconciler's own status write in a failing pass: the persistent failure ``exc`` makes, counting
    this pass (``None``: not persistent yet, or not called inside a controller's reconcile)."""
    current = _current.get()
    if current is None:
        return None
    tracker, key = current
    return tracker.judge(key, exc)
