"""Stand-in for the schedule module of issue 27 (owned by its "schedule" part, merged separately).

Only the agreed signature, so the warm-pool controller can call it: outside that work no window is read and
this asks for nothing. Replaced whole by the real module.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from arc_scaleset.api.schedule import WarmWindow


def scheduled_runners(windows: Sequence[WarmWindow], now: datetime) -> int:
    """The largest ``runners`` of the windows containing ``now``; this stand-in reads no window (0)."""
    del windows, now
    return 0
