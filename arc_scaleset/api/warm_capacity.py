"""``spec.warmCapacity`` of an AutoscalingRunnerSet: warm room for runners without idle runners.

Not an ARC field (ARC's objects stay valid without it, docs/capacity.md "Warm capacity"). Where a scale set asks
for it, the warm-capacity controller (``arc_scaleset.controllers.warmcapacity``) keeps *placeholder* pods: inert
pods with the runner's shape (resource requests, image, scheduling constraints) at a priority below every
runner's, so a runner pod takes a placeholder's room at once (the scheduler preempts it) and the placeholder,
recreated, waits for the next node in the background. Placeholders are never runners: they carry none of the
labels or owners a runner pod carries (:data:`LABEL_WARM_POOL` only) and live in the controller's namespace.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field

from arc_scaleset.api.api_model import ApiModel
from arc_scaleset.api.constants import MAX_RUNNERS_UNBOUNDED
from arc_scaleset.api.schedule import WarmWindow

DEFAULT_WARM_MAX: Final = 10
"""The bound of a scale set's warm placeholders when neither ``max`` nor ``maxRunners`` is set."""

LABEL_WARM_POOL: Final = "arc-scaleset.dev/warm-pool"
"""The label of every placeholder pod: its pool's ID (a digest of the runner shape the pool holds room for).
Placeholders carry no ``actions.github.com/*`` label, so no runner cache, count or index can select them."""
ANNOTATION_WARM_SHAPE: Final = "arc-scaleset.dev/warm-shape"
"""On a placeholder: the runner shape its pool holds room for, in words (requests, image, node selection)."""

CONDITION_WARM_CAPACITY: Final = "WarmCapacity"
"""The condition the warm-pool controller writes on each member scale set: its pool, the pool's size and why."""
EVENT_WARM_POOL_RESIZED: Final = "WarmPoolResized"
EVENT_WARM_PLACEHOLDER_PREEMPTED: Final = "WarmPlaceholderPreempted"


class WarmCapacity(ApiModel):
    """Room kept warm for this scale set's runners by placeholder pods (shared by every scale set whose runners
    have the same shape), instead of idle runners."""

    runners: int = Field(default=0, ge=0, le=MAX_RUNNERS_UNBOUNDED)
    """Placeholders wanted outside any schedule window (default 0)."""
    max: int | None = Field(default=None, ge=0, le=MAX_RUNNERS_UNBOUNDED)
    """The most placeholders this scale set asks for, whatever the schedule says (default: maxRunners, else 10)."""
    schedule: list[WarmWindow] | None = None
    """Windows of the week with their own number of placeholders; the largest window that contains now wins."""
    forecast: bool = False
    """Grow the placeholders ahead of bursts that recur at the same time of day in recent job arrivals."""

    def bound(self, max_runners: int | None) -> int:
        """The most placeholders this scale set may ask for: ``max``, else ``maxRunners``, else 10."""
        if self.max is not None:
            return self.max
        return max_runners if max_runners is not None else DEFAULT_WARM_MAX
