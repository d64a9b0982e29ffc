"""What is wrong with an EphemeralRunnerSet's spec, as its ``Degraded`` condition says it, and whether runners may
still be created from it (docs/controllers.md, "EphemeralRunnerSet").

Three problems, the first that applies being the one reported (one condition names one cause):

1. the runner pod template is above the controller's size bound (``RunnerTemplateTooLarge``,
   :mod:`arc_scaleset.controllers.runner_template_size`): no runner is created, and the template is not even tried
   on the API server (a dry run of a pod that large costs the API server what the bound is there to spare it);
2. the API server refuses the runner pod (``InvalidRunnerTemplate``, :mod:`.template_check`): no runner is
   created, so none is registered on GitHub only to be refused;
3. ``replicas`` is above the controller's ceiling (``ReplicasAboveCeiling``, :func:`.scaling.replicas_above_ceiling`):
   runners are created, up to the ceiling (the scaling plan keeps it).

Pure: the pass's findings come in, the verdict goes out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

REASON_INVALID_RUNNER_TEMPLATE: Final = "InvalidRunnerTemplate"

Problem = tuple[str, str]
"""``(reason, message)`` of a ``Degraded`` condition."""


@dataclass(frozen=True)
class SpecVerdict:
    """The problem ``Degraded`` names (``None``: none) and whether the pass may create runners."""

    problem: Problem | None
    may_create: bool


def spec_verdict(*, oversized: Problem | None, rejection: str | None, above_ceiling: Problem | None) -> SpecVerdict:
    """The verdict on a set's spec from what the pass found (see the module docstring): ``oversized``, the size
    bound's problem; ``rejection``, the API server's refusal of the runner pod (its text); ``above_ceiling``, the
    ceiling's problem."""
    if oversized is not None:
        return SpecVerdict(oversized, may_create=False)
    if rejection is not None:
        message = (
            f"the API server refuses the runner pod: {rejection}; no runner is created (nor registered on GitHub)"
            " until the runner template is fixed"
        )
        return SpecVerdict((REASON_INVALID_RUNNER_TEMPLATE, message), may_create=False)
    return SpecVerdict(above_ceiling, may_create=True)
