"""Liveness and readiness of the listener (ARC #3005: a listener offline while Running).

- **live**: the loop made progress within ``liveness_window`` seconds. Progress is a successful long poll
  or, while no session is held, an answered attempt to obtain one (waiting for a held session to be
  released is patience, not a hang). A listener that stops polling, for whatever reason, fails it, and
  the kubelet restarts it.
- **ready**: a message session is held, i.e. GitHub sees this scale set online.
"""

from __future__ import annotations

from collections.abc import Callable

from arc_scaleset.clock import REAL_CLOCK, Clock

# The service holds a long poll for about 50 s; two polls' worth plus the longest backoff delay (30 s).
DEFAULT_LIVENESS_WINDOW = 2 * 60.0 + 30.0


class Health:
    """Tracks the loop's progress on the injected clock; the probe handlers ask :meth:`live`/:meth:`ready`.

    ``session_held`` says whether a session is held; it may be set after construction (the session keeper
    reports its attempts here, so each needs the other).
    """

    def __init__(
        self,
        *,
        session_held: Callable[[], bool] = lambda: False,
        clock: Clock = REAL_CLOCK,
        liveness_window: float = DEFAULT_LIVENESS_WINDOW,
    ) -> None:
        self._clock = clock
        self.session_held = session_held
        self.liveness_window = liveness_window
        self._last_progress = clock.monotonic()  # starting up counts as progress
        self.last_poll: float | None = None

    def polled(self) -> None:
        """A long poll returned (a message or none)."""
        self.last_poll = self._clock.monotonic()
        self._last_progress = self.last_poll

    def session_attempt(self) -> None:
        """The service answered (or failed) an attempt to obtain a session."""
        if not self.session_held():
            self._last_progress = self._clock.monotonic()

    def live(self) -> tuple[bool, str]:
        """(is the loop alive, why) — the reason is what the probe endpoint prints."""
        silent_for = self._clock.monotonic() - self._last_progress
        if silent_for <= self.liveness_window:
            return True, f"last progress {silent_for:.0f}s ago"
        return False, f"no successful poll for {silent_for:.0f}s (window {self.liveness_window:.0f}s)"

    def ready(self) -> tuple[bool, str]:
        """(is a message session held, why)."""
        if self.session_held():
            return True, "message session held"
        return False, "no message session held"
