"""Every EphemeralRunner ever created in a namespace, seen through a watch (a poll could miss a runner that
lives for less than one period, e.g. an idle runner replaced at once by a revision roll)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.harness.following import follow
from arc_scaleset_lab.harness.scale_sets import RunnerView, owned_by_runner_set


@dataclass(frozen=True)
class SeenRunner:
    name: str
    uid: str
    revision: int


class RunnerTracker:
    """``asyncio.create_task(tracker.run())``; cancel to stop. ``seen`` maps uid -> first sighting, ``latest`` uid
    -> the last state the watch showed (a deleted runner's last one: its job's record, e.g. ``status.jobTimeline``).

    ``runner_set``: only the runners of the EphemeralRunnerSet of that name (others may share the namespace).
    """

    def __init__(self, kube: KubeClient, *, namespace: str, runner_set: str | None = None) -> None:
        self._kube = kube
        self._namespace = namespace
        self._runner_set = runner_set
        self.seen: dict[str, SeenRunner] = {}
        self.latest: dict[str, dict[str, Any]] = {}

    @property
    def created(self) -> int:
        return len(self.seen)

    def by_revision(self) -> Counter[int]:
        return Counter(r.revision for r in self.seen.values())

    def names(self) -> Counter[str]:
        """How many distinct runners (uids) carried each name: a count above 1 is a duplicate name."""
        return Counter(r.name for r in self.seen.values())

    def _record(self, er: dict[str, Any]) -> None:
        if self._runner_set is not None and not owned_by_runner_set(er, self._runner_set):
            return
        view = RunnerView.of(er)
        if not view.uid:
            return
        self.latest[view.uid] = er
        if view.uid not in self.seen:
            self.seen[view.uid] = SeenRunner(view.name, view.uid, view.revision)

    async def run(self) -> None:
        await follow(self._kube, EPHEMERAL_RUNNERS, namespace=self._namespace, seen=self._record, what="runner tracker")
