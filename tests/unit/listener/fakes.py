"""The listener's fake of the Kubernetes patcher, and a harness wiring a listener to it and to the fake
Actions-service client (tests/unit/fakes.py).

These prove the listener's own decisions (order of calls, reactions to each failure, backoff timing on a fake
clock). The real client, simulator and API server are exercised by tests/integration/listener.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from arc_scaleset.api.keys import ANNOTATION_LISTENER_STATE
from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.api.listener_state import ListenerState
from arc_scaleset.api.windows import Window
from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import FakeClock
from arc_scaleset.github.errors import ActionsError
from arc_scaleset.github.models import JobAvailable, JobStarted, Message, Statistics
from arc_scaleset.kube import errors as kube_errors
from arc_scaleset.kube.client import PatchType
from arc_scaleset.kube.resources import Resource
from arc_scaleset.listener.app import ListenerApp, Timing
from arc_scaleset.listener.errors import RETRY_BASE, RETRY_CAP
from arc_scaleset.listener.health import Health
from arc_scaleset.listener.loop import Listener, LoopSettings
from arc_scaleset.listener.metrics import ListenerMetrics, ScaleSetIdentity
from arc_scaleset.listener.scaler import Scaler
from arc_scaleset.listener.session import CredentialStrikes, SessionKeeper
from arc_scaleset.listener.state_report import StateReporter
from arc_scaleset.listener.stop import StopSignal
from tests.unit.fakes import FakeActions

SCALE_SET_ID = 7
MAX_RUNNERS = 10
IDENTITY = ScaleSetIdentity(enterprise="", organization="octo", repository="", name="set-a", namespace="arc")


def error(cls: type[ActionsError], status: int = 500, **extra: Any) -> ActionsError:
    return cls(method="GET", url="https://pipelines.example/_apis/x", status=status, **extra)


def stats(assigned: int = 0, available: int = 0) -> Statistics:
    return Statistics(total_assigned_jobs=assigned, total_available_jobs=available)


def message(message_id: int, *jobs: Any, assigned: int = 0, available: int | None = None) -> Message:
    """A job message; ``available`` (``totalAvailableJobs``) defaults to the number of ``JobAvailable`` in it."""
    if available is None:
        available = sum(isinstance(job, JobAvailable) for job in jobs)
    statistics = stats(assigned, available)
    return Message(
        message_id=message_id, message_type="RunnerScaleSetJobMessages", statistics=statistics, jobs=list(jobs)
    )


def started(request_id: int, runner: str) -> JobStarted:
    return JobStarted(
        runner_request_id=request_id,
        runner_name=runner,
        owner_name="octo",
        repository_name="hello",
        job_id=f"job-{request_id}",
        workflow_run_id=99,
        job_workflow_ref="octo/hello/.github/workflows/ci.yml@refs/heads/main",
        job_display_name="build",
    )


KILLED_POD_SESSION = "dead0000-0000-4000-8000-000000000001"
"""A session a predecessor (a killed pod) recorded."""


class FakePatcher:
    """Records Kubernetes patches in the shared log and keeps the ERS's annotations, as the API server would.

    ``fail`` holds errors to raise on the next patches (of any object). When ``runner_gate`` is given, patches
    of runners wait until it is set; ``runners_waiting`` counts them.
    """

    def __init__(self, log: list[tuple[Any, ...]]) -> None:
        self.log = log
        self.fail: deque[Exception] = deque()
        self.missing_runners: set[str] = set()
        self.ers_annotations: dict[str, str] = {}
        self.ers_status: dict[str, Any] = {}  # what the controller wrote on the ERS status (the patch returns it)
        self.refused_state_writes: dict[str, int] = {}  # phase -> how many writes of it still to refuse
        self.runner_gate: asyncio.Event | None = None
        self.runners_waiting = 0

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | list[Any],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        assert patch_type is PatchType.MERGE
        assert isinstance(patch, Mapping)
        if self.fail:
            raise self.fail.popleft()
        if resource.plural == "ephemeralrunners" and name in self.missing_runners:
            raise kube_errors.NotFound(404, "NotFound", f"ephemeralrunners {name} not found")
        if resource.plural == "ephemeralrunnersets":
            if ANNOTATION_LISTENER_STATE in ((patch.get("metadata") or {}).get("annotations") or {}):
                phase = orjson.loads(patch["metadata"]["annotations"][ANNOTATION_LISTENER_STATE])["state"]
                if self.refused_state_writes.get(phase):
                    self.refused_state_writes[phase] -= 1
                    raise kube_errors.ServerError(503, "ServiceUnavailable", "etcd is slow")
            for key, value in ((patch.get("metadata") or {}).get("annotations") or {}).items():
                if value is None:
                    self.ers_annotations.pop(key, None)
                else:
                    self.ers_annotations[key] = value
            if patch:  # an empty patch only reads
                self.log.append(("ers", name, subresource, patch))
            return {
                "metadata": {"name": name, "annotations": dict(self.ers_annotations)},
                "spec": {},
                "status": dict(self.ers_status),
            }
        if self.runner_gate is not None:
            self.runners_waiting += 1
            try:
                await self.runner_gate.wait()
            finally:
                self.runners_waiting -= 1
        self.log.append(("er", name, subresource, patch))
        return {}

    def ers_patches(self) -> list[dict[str, Any]]:
        """The ``spec`` of every scaling patch of the ERS, in order."""
        return [entry[3]["spec"] for entry in self.log if entry[0] == "ers" and "spec" in entry[3]]

    def state_writes(self) -> list[ListenerState]:
        """Every listener state written to the ERS annotation, in order."""
        writes = []
        for entry in self.log:
            annotations = (entry[3].get("metadata") or {}).get("annotations") or {} if entry[0] == "ers" else {}
            if ANNOTATION_LISTENER_STATE in annotations:
                value = annotations[ANNOTATION_LISTENER_STATE]
                state = ListenerState.from_annotation(value)
                assert state is not None, value
                writes.append(state)
        return writes

    def record_state(self, state: dict[str, Any]) -> None:
        """What a previous listener left on the ERS."""
        self.ers_annotations[ANNOTATION_LISTENER_STATE] = orjson.dumps(state).decode()


class Harness:
    """A listener wired to the fakes on a fake clock, with the production backoff policy minus the jitter."""

    def __init__(
        self,
        *,
        min_runners: int = 0,
        max_runners: int = MAX_RUNNERS,
        liveness_window: float = 150.0,
        with_metrics: bool = False,
        schedule: Sequence[Window] = (),
    ) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.clock = FakeClock()
        self.actions = FakeActions(self.log, self.clock)
        self.patcher = FakePatcher(self.log)
        self.stop = StopSignal(clock=self.clock)
        self.strikes = CredentialStrikes()
        self.reporter = StateReporter(self.patcher, namespace="arc", ephemeral_runner_set="set-a", clock=self.clock)
        self.health = Health(
            clock=self.clock,
            liveness_window=liveness_window,
            scale_set_id=SCALE_SET_ID,
            owner="pod-a",
            on_change=self.reporter.report,
        )
        self.sessions = SessionKeeper(
            self.actions,
            scale_set_id=SCALE_SET_ID,
            owner="pod-a",
            stop=self.stop,
            strikes=self.strikes,
            backoff=Backoff(base=RETRY_BASE, cap=RETRY_CAP, jitter=0.0),
            health=self.health,
        )
        self.scaler = Scaler(
            self.patcher,
            namespace="arc",
            ephemeral_runner_set="set-a",
            min_runners=min_runners,
            max_runners=max_runners,
            schedule=schedule,
            clock=self.clock,
        )
        self.metrics = (
            ListenerMetrics(
                scale_set=ScaleSetIdentity(
                    enterprise="", organization="octo", repository="", name="set-a", namespace="arc"
                )
            )
            if with_metrics
            else None
        )
        self.listener = Listener(
            self.actions,
            sessions=self.sessions,
            scaler=self.scaler,
            settings=LoopSettings(scale_set_id=SCALE_SET_ID, max_runners=max_runners),
            stop=self.stop,
            health=self.health,
            strikes=self.strikes,
            metrics=self.metrics,
        )
        self.task: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.create_task(self.listener.run())
        return self.task

    async def settle(self, condition: Callable[[], bool] = lambda: False, *, rounds: int = 200) -> None:
        """Let the loop run (no time passes) until ``condition`` holds, then until it is quiet again."""
        for _ in range(rounds):
            if condition():
                break
            await asyncio.sleep(0)
        for _ in range(50):
            await asyncio.sleep(0)

    async def run_for(self, seconds: float, *, step: float = 0.5) -> None:
        """Let ``seconds`` of fake time pass in small steps, the loop running in between."""
        for _ in range(round(seconds / step)):
            await self.clock.advance(step)
            await self.settle()

    async def stop_and_wait(self) -> None:
        """Request shutdown and let fake time pass until the loop has returned (calls beside it may drain)."""
        self.stop.set()
        assert self.task is not None
        for _ in range(60):
            await self.settle(self.task.done)
            if self.task.done():
                break
            await self.clock.advance(1.0)
        await asyncio.wait_for(self.task, timeout=5)
        await self.close()

    async def close(self) -> None:
        """Stop what runs beside the loop (as ListenerApp.run does at the end)."""
        await self.reporter.aclose(within=1.0)

    def app(self) -> ListenerApp:
        """The process around the loop (ListenerApp), built from these fakes instead of real clients."""
        config = ListenerConfig.from_document(
            {
                "configure_url": "https://github.com/octo",
                "github_token": "ghp_unit_test_token_0123456789",
                "ephemeral_runner_set_namespace": "arc",
                "ephemeral_runner_set_name": "set-a",
                "min_runners": self.scaler.state.min_runners,
                "max_runners": self.scaler.state.max_runners,
                "runner_scale_set_id": SCALE_SET_ID,
            }
        )
        return ListenerApp(
            config=config,
            actions=self.actions,  # type: ignore[arg-type]
            kube=self.patcher,
            sessions=self.sessions,
            listener=self.listener,
            health=self.health,
            metrics=self.metrics or ListenerMetrics(scale_set=IDENTITY),
            stop=self.stop,
            timing=Timing(),
            reporter=self.reporter,
        )

    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def calls(self, name: str) -> list[tuple[Any, ...]]:
        return [entry for entry in self.log if entry[0] == name]
