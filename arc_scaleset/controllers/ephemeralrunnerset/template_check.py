"""A runner spec is tried on the API server before its first runner is registered on GitHub.

Without this, a template the API server rejects (a volume mount naming no volume, a policy or webhook that
refuses the pod, a missing ServiceAccount) costs a JIT registration per slot: each new runner registers
on GitHub, its pod is refused, it is marked Failed and unregistered, reaped after a minute and replaced --
forever (issue 15). So before the EphemeralRunnerSet creates runners from a runner spec, it sends the pod
the first of them would get (:func:`dry_run_pod`, built by the runner controller's own builder) as a
server-side dry run (``dryRun=All``: defaulting, admission and validation, nothing stored). A refusal is
the set's ``Degraded`` condition with reason ``InvalidRunnerTemplate`` and a Warning Event quoting the API
server, and no runner is created; nothing is registered on GitHub (:mod:`.spec_problems`). A template above the
controller's size bound is not tried at all.

Verdicts are remembered per set (in its slot of the controller's memory), for the runner spec they were
given for (:class:`TemplateChecks`): a refusal is tried again after ``recheck_rejected`` seconds (the cause
may lie outside the spec: a missing ServiceAccount or PriorityClass, a namespace policy, all fixable without
touching the set), an acceptance after ``recheck_accepted`` seconds (a policy added later is found within
that time). A new runner spec (a revision) is always tried before its first runner.

What the dry run cannot judge is not held against the template: a quota that is full now (the runner
controller waits for room) and a webhook that does not support dry runs (the API server refuses the dry
run itself, 400) count as accepted; any other error propagates and the pass is retried.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import arc_scaleset
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.controllers.ephemeralrunnerset.builders import desired_ephemeral_runner
from arc_scaleset.controllers.runner_pod import desired_runner_pod
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import BadRequest, Forbidden, Invalid
from arc_scaleset.kube.resources import PODS

log = logging.getLogger(__name__)

DEFAULT_RECHECK_REJECTED: Final = 60.0
DEFAULT_RECHECK_ACCEPTED: Final = 600.0
QUOTA_EXCEEDED_MARKER: Final = "exceeded quota:"
"""In a 403 from the ResourceQuota admission plugin: the namespace is full now, the template may be fine."""
DRY_RUN_NAME_SUFFIX: Final = "dryrn"
"""Five characters, as many as the API server appends to a runner's ``generateName``: the dry-run pod's name
is as long as a real runner pod's, so a name too long for a pod is found too."""


def dry_run_pod(
    ers: Mapping[str, Any], *, exclude_label_prefixes: Iterable[str] = (), version: str = arc_scaleset.__version__
) -> dict[str, Any]:
    """The pod the next runner of ``ers`` would get, ready for a dry-run create.

    Built exactly as the runners are (the set's runner builder, then the runner controller's pod builder),
    except that it has no owner reference: its runner does not exist, and a reference without a UID is
    itself invalid.
    """
    runner = desired_ephemeral_runner(ers, exclude_label_prefixes=exclude_label_prefixes)
    metadata = dict(runner["metadata"])
    metadata["name"] = f"{metadata.pop('generateName')}{DRY_RUN_NAME_SUFFIX}"
    metadata["uid"] = "dry-run"  # the builder references its runner; the reference is dropped below
    pod = desired_runner_pod({**runner, "metadata": metadata}, runner_id=0, version=version)
    pod["metadata"].pop("ownerReferences", None)
    return pod


def rejection_of(error: Exception) -> str | None:
    """The API server's refusal of a dry-run pod as a message, or ``None`` when ``error`` says nothing
    about the template (see the module docstring); unexpected errors are re-raised."""
    if isinstance(error, Invalid):
        return str(error.message)
    if isinstance(error, Forbidden):
        return None if QUOTA_EXCEEDED_MARKER in error.message else str(error.message)
    if isinstance(error, BadRequest) and "dry run" in error.message.lower():
        log.info("the runner template cannot be tried with a dry run (%s); runners are created untried", error)
        return None
    raise error


async def try_runner_pod(kube: KubeClient, pod: Mapping[str, Any]) -> str | None:
    """Send ``pod`` as a dry-run create: ``None`` when the API server would accept it (or cannot judge),
    else its refusal."""
    try:
        await kube.create(PODS, pod, dry_run=True)
    except (Invalid, Forbidden, BadRequest) as exc:
        return rejection_of(exc)
    return None


@dataclass(frozen=True)
class TemplateVerdict:
    """What the API server said about one runner spec of one set, and when (monotonic seconds)."""

    uid: str
    runner_spec: Mapping[str, Any]
    runner_metadata: Mapping[str, Any]
    rejection: str | None
    checked_at: float

    @property
    def rejected(self) -> bool:
        return self.rejection is not None


class TemplateChecks:
    """The last dry-run verdict of one set, for the runner spec it was given for; one per set, in its slot of
    the controller's memory (:mod:`.scope`)."""

    def __init__(
        self,
        *,
        clock: Clock = REAL_CLOCK,
        recheck_rejected: float = DEFAULT_RECHECK_REJECTED,
        recheck_accepted: float = DEFAULT_RECHECK_ACCEPTED,
    ) -> None:
        self._clock = clock
        self._recheck_rejected = recheck_rejected
        self._recheck_accepted = recheck_accepted
        self._verdict: TemplateVerdict | None = None

    def known(self, ers: Mapping[str, Any]) -> TemplateVerdict | None:
        """The verdict for the set's current runner spec, however old (``None``: never tried)."""
        verdict = self._verdict
        view = EphemeralRunnerSetView(ers)
        if verdict is None or verdict.uid != view.uid:
            return None
        if verdict.runner_spec != view.runner_spec or verdict.runner_metadata != view.runner_metadata:
            return None
        return verdict

    def due_in(self, verdict: TemplateVerdict | None) -> float:
        """Seconds until ``verdict`` should be checked again (0: now)."""
        if verdict is None:
            return 0.0
        interval = self._recheck_rejected if verdict.rejected else self._recheck_accepted
        return max(0.0, verdict.checked_at + interval - self._clock.monotonic())

    def record(self, ers: Mapping[str, Any], rejection: str | None) -> TemplateVerdict:
        view = EphemeralRunnerSetView(ers)
        verdict = TemplateVerdict(
            uid=view.uid,
            runner_spec=view.runner_spec,
            runner_metadata=view.runner_metadata,
            rejection=rejection,
            checked_at=self._clock.monotonic(),
        )
        self._verdict = verdict
        return verdict
