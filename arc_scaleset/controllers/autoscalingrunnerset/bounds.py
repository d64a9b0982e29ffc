"""How many runners a scale set may ask for: ``minRunners``, ``maxRunners`` (and, without a maximum, the runners of
each ``minRunnersSchedule`` window) against the controller's ceiling.

The CRD bounds both fields by 2^31-1 (what the listener's configuration can hold); the controller adds its
own, lower ceiling (``--max-runners-ceiling``, default 10,000). A scale set above it is refused before
anything is registered or created for it -- a ``RunnersAboveCeiling`` condition and Warning Event, retried
with backoff like any bad input -- so a typo such as ``minRunners: 500000`` never becomes a listener asking
for half a million runners. An unset ``maxRunners`` (unbounded, as in ARC) is not refused: the listener then
asks for as many runners as there are jobs, and the EphemeralRunnerSet keeps at most the ceiling.
"""

from __future__ import annotations

from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.controllers.errors import RunnersAboveCeiling


def check_runner_bounds(ars: AutoscalingRunnerSet, *, ceiling: int) -> None:
    """Raise :class:`RunnersAboveCeiling` naming the field(s) of ``ars`` above ``ceiling``."""
    spec = ars.spec
    counts = [("minRunners", spec.min_runners), ("maxRunners", spec.max_runners)]
    if spec.max_runners is None:
        # A window's runners are capped by maxRunners; without one, they are a minimum like minRunners.
        counts += [
            (f"minRunnersSchedule[{index}].runners", window.runners)
            for index, window in enumerate(spec.min_runners_schedule or ())
        ]
    above = [f"{field} {value}" for field, value in counts if value is not None and value > ceiling]
    if above:
        one = len(above) == 1
        raise RunnersAboveCeiling(
            f"{' and '.join(above)} {'is' if one else 'are'} above the controller's ceiling of {ceiling} runners"
            f" per scale set (--max-runners-ceiling): set {'it' if one else 'them'} to at most {ceiling}, or start"
            " the controller with a higher ceiling; nothing is created for this scale set until then"
        )
