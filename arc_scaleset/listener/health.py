"""What the listener knows about its own health: the probes' verdicts and the state it reports (docs/listener.md).

- **live** (``/healthz``): a poll of the message queue succeeded (a readable message or an idle 202) within
  ``liveness_window`` seconds, or the process started less than that ago. Nothing else counts as progress,
  not even an unreadable message skipped (a service that sends nothing else fails the probe like a down one):
  a listener that cannot poll, whatever the reason (the service failing, a session held by someone else, a
  hang), fails it after a bounded time and the kubelet restarts it. ARC's listener had no probes and could
  stay Running while offline (ARC #3005). The window is :data:`DEFAULT_LIVENESS_WINDOW` unless configured.
- **ready** (``/readyz``): a message session is held, i.e. GitHub sees this scale set online.
- **standing by** (a standby listener waiting for the Lease, docs/listener.md, "Standby listener"): live (it is
  doing what it is meant to), not ready (it holds no session); both say "standing by". Taking over restarts the
  liveness window, as starting does.
- **the reported state** (:class:`~arc_scaleset.api.listener_state.ListenerState`): phase, session, last
  successful poll and last error class. :class:`Health` calls ``on_change`` with a new state only when the
  phase, the session or the error class changes, never per poll, so writing it costs no API call at rest.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from arc_scaleset.api.listener_state import ListenerPhase, ListenerState
from arc_scaleset.clock import REAL_CLOCK, Clock

POLL_BOUND = 90.0
"""How long one long poll may take before the loop abandons it (``Timing.poll_timeout``; the service holds a
poll for about 50 s)."""

DEFAULT_LIVENESS_WINDOW = 360.0
"""Six minutes without a successful poll fail ``/healthz``. A working service answers a poll within
:data:`POLL_BOUND`; recovering from a failure costs at most the longest backoff delay (2 minutes plus 20 %
jitter) and two polls: 2 * 90 + 144 = 324 s, rounded up. Longer than that, the service is down or the
listener is stuck, and a restart is harmless (a new listener ends its predecessor's session at once)."""

STANDING_BY = "standing by"


class Health:
    """Tracks the listener's progress and state on the injected clock.

    The session keeper and the loop report events (:meth:`session_created`, :meth:`polled`, ...); the probe
    handlers ask :meth:`live` and :meth:`ready`; ``on_change`` receives each new reportable state.
    ``recorded_session_id`` seeds the session a predecessor left behind, so that the reported state keeps
    naming it until this listener has ended it (a successor of ours can then still end it).
    """

    def __init__(
        self,
        *,
        clock: Clock = REAL_CLOCK,
        liveness_window: float = DEFAULT_LIVENESS_WINDOW,
        scale_set_id: int = 0,
        owner: str = "",
        on_change: Callable[[ListenerState], None] = lambda _: None,
    ) -> None:
        self._clock = clock
        self.liveness_window = liveness_window
        self.scale_set_id = scale_set_id
        self.owner = owner
        self.on_change = on_change
        self._started = clock.monotonic()  # starting up counts as progress
        self.last_poll: float | None = None
        self.last_poll_at: dt.datetime | None = None
        self.session_id: str | None = None  # the session held now
        self.recorded_session_id: str | None = None  # the session a successor would have to end
        self.state: ListenerState | None = None
        self.standing_by = False

    # ---- standby (docs/listener.md, "Standby listener") ----------------------------------------------------

    def stand_by(self) -> None:
        """This process waits for the standby Lease before it does anything."""
        self.standing_by = True

    def became_active(self) -> None:
        """This process holds the Lease and starts: the liveness window starts now, not when it began waiting."""
        self.standing_by = False
        self._started = self._clock.monotonic()

    # ---- events ----------------------------------------------------------------------------------------

    def session_created(self, session_id: str) -> None:
        self.session_id = self.recorded_session_id = session_id
        self._report(ListenerPhase.POLLING, "")

    def session_ended(self, session_id: str, *, deleted: bool) -> None:
        """A session was given up; ``deleted`` when the service confirmed it is gone."""
        if self.session_id == session_id:
            self.session_id = None
        if deleted and self.recorded_session_id == session_id:
            self.recorded_session_id = None

    def waiting_for_session(self, error_class: str) -> None:
        """An attempt to create a session failed (``SessionConflict`` while another one holds the scale set)."""
        self._report(ListenerPhase.WAITING_FOR_SESSION, error_class)

    def polled(self) -> None:
        """A long poll returned a readable message or none."""
        self.last_poll = self._clock.monotonic()
        self.last_poll_at = self._clock.now()
        self._report(ListenerPhase.POLLING, "")

    def poll_failed(self, error_class: str) -> None:
        self._report(ListenerPhase.FAILING, error_class)

    def stopped(self) -> None:
        self._report(ListenerPhase.STOPPED, self.state.last_error_class if self.state else "")

    # ---- probes ----------------------------------------------------------------------------------------

    def live(self) -> tuple[bool, str]:
        """(is the loop alive, why) — the reason is what the probe endpoint prints."""
        if self.standing_by:
            return True, STANDING_BY
        since = self.last_poll if self.last_poll is not None else self._started
        silent_for = self._clock.monotonic() - since
        if silent_for <= self.liveness_window:
            return True, f"last successful poll {silent_for:.0f}s ago" if self.last_poll else "starting"
        return False, f"no successful poll for {silent_for:.0f}s (window {self.liveness_window:.0f}s)"

    def ready(self) -> tuple[bool, str]:
        """(is a message session held, why)."""
        if self.standing_by:
            return False, STANDING_BY
        if self.session_id is not None:
            return True, "message session held"
        return False, "no message session held"

    # ---- the reported state ----------------------------------------------------------------------------

    def _report(self, phase: ListenerPhase, error_class: str) -> None:
        state = ListenerState(
            scale_set_id=self.scale_set_id,
            owner=self.owner,
            session_id=self.recorded_session_id,
            state=phase,
            since=self._clock.now(),
            last_successful_poll=self.last_poll_at,
            last_error_class=error_class,
        )
        if state.same_report(self.state):
            return
        self.state = state
        self.on_change(state)
