"""Every EphemeralRunner ever created in a namespace, seen through a watch (a poll could miss a runner that
lives for less than one period, e.g. an idle runner replaced at once by a revision roll)."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import Gone, KubeError
from arc_scaleset_lab.harness.scale_sets import RunnerView, owned_by_runner_set

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SeenRunner:
    name: str
    uid: str
    revision: int


class RunnerTracker:
    """``asyncio.create_task(tracker.run())``; cancel to stop. ``seen`` maps uid -> first sighting.

    ``runner_set``: only the runners of the EphemeralRunnerSet of that name (others may share the namespace).
    """

    def __init__(self, kube: KubeClient, *, namespace: str, runner_set: str | None = None) -> None:
        self._kube = kube
        self._namespace = namespace
        self._runner_set = runner_set
        self.seen: dict[str, SeenRunner] = {}

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
        if view.uid and view.uid not in self.seen:
            self.seen[view.uid] = SeenRunner(view.name, view.uid, view.revision)

    async def run(self) -> None:
        while True:
            try:
                listed = await self._kube.list(EPHEMERAL_RUNNERS, namespace=self._namespace)
                for item in listed.items:
                    self._record(item)
                async for event in self._kube.watch(
                    EPHEMERAL_RUNNERS, namespace=self._namespace, resource_version=listed.resource_version
                ):
                    if event.type in ("ADDED", "MODIFIED"):
                        self._record(event.object)
            except Gone:
                continue
            except KubeError as error:
                log.warning("runner tracker: watch failed, relisting: %s", error)
                await asyncio.sleep(0.5)
