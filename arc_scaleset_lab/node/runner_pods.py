"""The pod player: plays the kubelet's part for runner pods on kwok nodes (which run no containers).

kwok marks a scheduled pod Running. The player then tells the sim that the runner in it (runner name = pod
name = EphemeralRunner name) is online, so the sim may hand it a job. When the sim asks for the runner to
end (its job completed: exit 0; or an injected failure), the player writes the pod's status through the
status subresource: phase Succeeded/Failed and every container terminated, the ``runner`` container with the
requested exit code - what the ER controller reads to decide what to do next.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from typing import Any, Protocol

from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import Gone, KubeError, NotFound
from arc_scaleset_lab.sim.notify import ChangeNotifier
from arc_scaleset_lab.sim.state import RunnerExitRequest, SimState

log = logging.getLogger(__name__)

RUNNER_POD_SELECTOR = "actions-ephemeral-runner=True"
RUNNER_CONTAINER = "runner"


class RunnerService(Protocol):
    """What the player needs from the sim; met by :class:`InProcessRunnerService` and ``SimAdminClient``."""

    async def runner_online(self, name: str) -> Any: ...

    async def next_runner_events(self, *, after: int, wait_seconds: float) -> list[RunnerExitRequest]: ...


class InProcessRunnerService:
    """Adapts an in-process sim's model (``sim.state``, woken by ``sim.changes``) to :class:`RunnerService`."""

    def __init__(self, state: SimState, changes: ChangeNotifier) -> None:
        self._state = state
        self._changes = changes

    async def runner_online(self, name: str) -> Any:
        return self._state.runner_online(name)

    async def next_runner_events(self, *, after: int, wait_seconds: float) -> list[RunnerExitRequest]:
        return await self._changes.poll_until(lambda: self._state.runner_events_after(after), within=wait_seconds)


def terminated_status(pod: dict[str, Any], *, exit_code: int, now: dt.datetime) -> dict[str, Any]:
    """The status merge patch that ends ``pod``: its phase and every container terminated.

    The ``runner`` container gets ``exit_code``; other containers exit 0. containerStatuses is a list, which a
    merge patch replaces whole, so it is rebuilt from the pod's spec and current statuses.
    """
    stamp = now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    current = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
    statuses = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        name = container.get("name")
        code = exit_code if name == RUNNER_CONTAINER else 0
        previous = current.get(name) or {}
        started = ((previous.get("state") or {}).get("running") or {}).get("startedAt", stamp)
        statuses.append(
            {
                "name": name,
                "image": previous.get("image") or container.get("image", ""),
                "imageID": previous.get("imageID", ""),
                "ready": False,
                "started": False,
                "restartCount": previous.get("restartCount", 0),
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Completed" if code == 0 else "Error",
                        "startedAt": started,
                        "finishedAt": stamp,
                    }
                },
            }
        )
    conditions = []
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Ready", "ContainersReady"):
            condition = {**condition, "status": "False", "reason": "PodCompleted", "lastTransitionTime": stamp}
        conditions.append(condition)
    status: dict[str, Any] = {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "containerStatuses": statuses,
    }
    if conditions:
        status["conditions"] = conditions
    return {"status": status}


class PodPlayer:
    """Run with ``await player.run()`` (cancel to stop). ``namespace=None`` watches every namespace."""

    def __init__(
        self,
        kube: KubeClient,
        service: RunnerService,
        *,
        namespace: str | None,
        events_after: int = 0,
        poll_timeout: float = 20.0,
    ) -> None:
        self._kube = kube
        self._service = service
        self._namespace = namespace
        self._events_after = events_after
        self._poll_timeout = poll_timeout
        self._pods: dict[str, str] = {}  # pod name -> namespace, for pods currently seen
        self._online: set[str] = set()  # pod uids already reported online
        self.ended: list[tuple[str, int]] = []  # (pod name, exit code) written so far

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self._watch_pods(), name="pod-player-watch")
            group.create_task(self._end_runners(), name="pod-player-exits")

    async def _watch_pods(self) -> None:
        while True:
            try:
                listed = await self._kube.list(
                    resources.PODS, namespace=self._namespace, label_selector=RUNNER_POD_SELECTOR
                )
                for pod in listed.items:
                    await self._observe("ADDED", pod)
                async for event in self._kube.watch(
                    resources.PODS,
                    namespace=self._namespace,
                    label_selector=RUNNER_POD_SELECTOR,
                    resource_version=listed.resource_version,
                ):
                    if event.type != "BOOKMARK":
                        await self._observe(event.type, event.object)
            except Gone:
                continue
            except KubeError as error:
                log.warning("pod player: watch failed, relisting: %s", error)
                await asyncio.sleep(1.0)

    async def _observe(self, event_type: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        name, uid = meta.get("name", ""), meta.get("uid", "")
        if event_type == "DELETED":
            self._pods.pop(name, None)
            self._online.discard(uid)
            return
        self._pods[name] = meta.get("namespace", "")
        phase = (pod.get("status") or {}).get("phase")
        if phase != "Running" or uid in self._online or meta.get("deletionTimestamp"):
            return
        try:
            await self._service.runner_online(name)
        except Exception as error:  # the runner is not registered (yet): the next pod event retries
            log.info("pod player: runner %s not brought online: %s", name, error)
            return
        self._online.add(uid)

    async def _end_runners(self) -> None:
        while True:
            events = await self._service.next_runner_events(after=self._events_after, wait_seconds=self._poll_timeout)
            for event in events:
                self._events_after = max(self._events_after, event.seq)
                for attempt in range(5):
                    try:
                        await self._end(event)
                        break
                    except KubeError as error:
                        # A pod left Running forever would hold its runner slot: try a few times.
                        log.warning(
                            "pod player: ending %s failed (attempt %d): %s", event.runner_name, attempt + 1, error
                        )
                        await asyncio.sleep(0.5 * (attempt + 1))

    async def _end(self, event: RunnerExitRequest) -> None:
        namespace = self._pods.get(event.runner_name) or self._namespace
        if namespace is None:
            return  # not a pod this player knows
        try:
            pod = await self._kube.get(resources.PODS, event.runner_name, namespace=namespace)
        except NotFound:
            return
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        patch = terminated_status(pod, exit_code=event.exit_code, now=dt.datetime.now(dt.UTC))
        with contextlib.suppress(NotFound):
            await self._kube.patch(resources.PODS, event.runner_name, patch, namespace=namespace, subresource="status")
            self.ended.append((event.runner_name, event.exit_code))
