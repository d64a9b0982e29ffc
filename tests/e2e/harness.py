"""What the end-to-end tests do to a scale set, in the words of the tests: create one, enqueue jobs, wait for a
state, change the runner template, delete it -- all through the running processes' public interfaces (the
Kubernetes API and the simulated GitHub's admin API), never by calling their code."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.kube import resources
from arc_scaleset.kube.errors import NotFound
from arc_scaleset_lab.demo.summary import audit_jobs
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.runner_tracker import RunnerTracker
from arc_scaleset_lab.harness.scale_sets import ScaleSetSnapshot
from arc_scaleset_lab.harness.system import ORG, System, SystemOptions
from tests.cli import run_cli

REPOSITORY = f"{ORG}/e2e"


def describe(snapshot: ScaleSetSnapshot | None) -> str:
    if snapshot is None:
        return "nothing observed"
    return (
        f"ARS phase {snapshot.ars_phase or '-'}; ERS replicas {snapshot.replicas} patchID {snapshot.patch_id} "
        f"revision {snapshot.applied_revision}/{snapshot.desired_revision}; runners "
        f"{dict(snapshot.by_phase())} by revision {dict(snapshot.by_revision())} busy {snapshot.busy}; "
        f"listener pod {snapshot.listener_pod_phase}, session {snapshot.session_owner}"
    )


@dataclass
class ScaleSetHandle:
    system: System
    namespace: str
    name: str
    min_runners: int
    tracker: RunnerTracker
    tracking: asyncio.Task[None]
    revision: int = 1
    job_ids: list[int] = field(default_factory=list)

    @classmethod
    def tracked(
        cls, system: System, *, namespace: str, name: str, min_runners: int, every_runner_set: bool = False
    ) -> ScaleSetHandle:
        """A handle on scale set ``name`` whose runners a :class:`RunnerTracker` follows from now on: those of
        its runner sets, or with ``every_runner_set`` those of every set in the namespace (ARC's sets, taken
        over, carry other names)."""
        tracker = RunnerTracker(system.kube, namespace=namespace, runner_set=None if every_runner_set else name)
        return cls(
            system=system,
            namespace=namespace,
            name=name,
            min_runners=min_runners,
            tracker=tracker,
            tracking=asyncio.create_task(tracker.run(), name=f"tracker-{name}"),
        )

    async def snapshot(self) -> ScaleSetSnapshot:
        return await scale_sets.observe(
            self.system.kube,
            self.system.sim,
            namespace=self.namespace,
            name=self.name,
            controller_namespace=self.system.controller_namespace,
        )

    async def wait(
        self, predicate: Callable[[ScaleSetSnapshot], Any], *, timeout: float, what: str
    ) -> ScaleSetSnapshot:
        """Observe until ``predicate(snapshot)`` holds; fail naming ``what`` and the last state seen."""
        deadline = time.monotonic() + timeout
        last: ScaleSetSnapshot | None = None
        while True:
            last = await self.snapshot()
            if predicate(last):
                return last
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last seen: {describe(last)}")
            await asyncio.sleep(0.2)

    async def wait_until(self, check: Callable[[], Awaitable[Any]], *, timeout: float, what: str) -> Any:
        """Poll ``check`` until it returns something truthy (returned); fail naming ``what``."""
        deadline = time.monotonic() + timeout
        while True:
            result = await check()
            if result:
                return result
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; {describe(await self.snapshot())}")
            await asyncio.sleep(0.2)

    async def wait_ready(self, *, timeout: float = 60.0) -> ScaleSetSnapshot:
        return await self.wait(
            lambda s: s.session_owner and s.idle_running >= self.min_runners,
            timeout=timeout,
            what=f"a listener session and {self.min_runners} idle runners",
        )

    async def wait_settled(self, *, timeout: float = 90.0) -> ScaleSetSnapshot:
        return await self.wait(
            lambda s: s.settled_at(self.min_runners),
            timeout=timeout,
            what=f"the set to rest at {self.min_runners} idle runners of the desired revision",
        )

    async def enqueue(self, count: int, *, duration: float) -> list[int]:
        ids = await self.system.sim.enqueue_job([self.name], repository=REPOSITORY, duration=duration, count=count)
        self.job_ids += ids
        return ids

    async def jobs(self) -> list[dict[str, Any]]:
        mine = set(self.job_ids)
        return [j for j in await self.system.sim.jobs() if j["runnerRequestId"] in mine]

    async def wait_jobs_completed(self, *, timeout: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            jobs = await self.jobs()
            if len(jobs) == len(self.job_ids) and all(j["state"] == "completed" for j in jobs):
                return jobs
            if time.monotonic() > deadline:
                states: dict[str, int] = {}
                for job in jobs:
                    states[job["state"]] = states.get(job["state"], 0) + 1
                pytest.fail(
                    f"timed out after {timeout:.0f}s waiting for {len(self.job_ids)} jobs to complete; job states "
                    f"{states}; {describe(await self.snapshot())}"
                )
            await asyncio.sleep(0.2)

    async def assert_every_job_ran_once(self, *, timeout: float) -> None:
        audit = audit_jobs(await self.wait_jobs_completed(timeout=timeout))
        assert audit.exactly_once, audit
        assert audit.succeeded == audit.total, audit

    async def change_template(self) -> None:
        """Bump the runner template (image tag and an env var): a new actionable revision."""
        self.revision += 1
        template = scale_sets.runner_template(
            image=f"{scale_sets.RUNNER_IMAGE}-e2e{self.revision}",
            env={scale_sets.TEMPLATE_REVISION_ENV: str(self.revision)},
        )
        await self.system.kube.patch(
            AUTOSCALING_RUNNER_SETS, self.name, {"spec": {"template": template}}, namespace=self.namespace
        )

    async def registered_runner_names(self) -> set[str]:
        """Runners registered in the sim for this scale set."""
        snapshot = await self.snapshot()
        if snapshot.scale_set_id is None:
            return set()
        return {r["name"] for r in await self.system.sim.runners() if r["runnerScaleSetId"] == snapshot.scale_set_id}

    async def delete(self, *, timeout: float = 60.0) -> None:
        with contextlib.suppress(NotFound):
            await self.system.kube.delete(AUTOSCALING_RUNNER_SETS, self.name, namespace=self.namespace)
        await self.wait(lambda s: s.ars is None, timeout=timeout, what=f"AutoscalingRunnerSet {self.name} to be gone")

    async def stop_tracking(self) -> None:
        self.tracking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.tracking


class ScaleSetFactory:
    """Creates AutoscalingRunnerSets named ``<stem>`` (then ``<stem>-2``...) and deletes them afterwards."""

    def __init__(self, system: System, *, namespace: str, stem: str) -> None:
        self.system = system
        self.namespace = namespace
        self.stem = stem
        self.created: list[ScaleSetHandle] = []

    async def create(
        self,
        *,
        min_runners: int,
        max_runners: int,
        credentials: str = "pat",
        proxy: dict[str, Any] | None = None,
        min_runners_schedule: list[dict[str, Any]] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> ScaleSetHandle:
        """A scale set with a PAT (or ``credentials="app"``) Secret of its own; ``proxy``: its ``spec.proxy``;
        ``min_runners_schedule``: its ``spec.minRunnersSchedule``; ``annotations``: added to its metadata."""
        name = self.stem if not self.created else f"{self.stem}-{len(self.created) + 1}"
        if credentials == "app":
            secret = await self.system.create_app_secret(self.namespace, name=f"{name}-github-app")
        else:
            secret = await self.system.create_pat_secret(self.namespace, name=f"{name}-github-token")
        handle = ScaleSetHandle.tracked(self.system, namespace=self.namespace, name=name, min_runners=min_runners)
        self.created.append(handle)
        manifest = scale_sets.autoscaling_runner_set(
            name=name,
            namespace=self.namespace,
            config_url=self.system.config_url(),
            secret=secret,
            min_runners=min_runners,
            max_runners=max_runners,
            template=scale_sets.runner_template(env={scale_sets.TEMPLATE_REVISION_ENV: "1"}),
        )
        if proxy is not None:
            manifest["spec"]["proxy"] = proxy
        if min_runners_schedule is not None:
            manifest["spec"]["minRunnersSchedule"] = min_runners_schedule
        if annotations:
            manifest["metadata"].setdefault("annotations", {}).update(annotations)
        await self.system.kube.create(AUTOSCALING_RUNNER_SETS, manifest, namespace=self.namespace)
        return handle

    async def delete_all(self) -> None:
        for handle in self.created:
            await handle.stop_tracking()
            # A test that failed may leave a set that will not go (`delete` fails the test then: pytest.fail).
            with contextlib.suppress(Exception, pytest.fail.Exception):
                await handle.delete(timeout=60.0)


async def active_faults(system: System) -> list[dict[str, Any]]:
    """The sim's fault rules still in force (``GET /_sim/faults``)."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{system.sim_url}/_sim/faults", timeout=aiohttp.ClientTimeout(total=10)) as response,
    ):
        response.raise_for_status()
        body = await response.json()
    rules: list[dict[str, Any]] = body["faults"] if isinstance(body, dict) else body
    return rules


@contextlib.asynccontextmanager
async def started_system(
    workdir: Path, *, kubeconfig: Path, namespace: str, options: SystemOptions
) -> AsyncIterator[System]:
    """A system of its own (a test module's: its own controller namespace and options) with its scale-set
    ``namespace`` made; stopped when the block ends, also on failure. ``workdir`` stays the caller's (its logs
    may still be read after the stop)."""
    running = System(workdir, kubeconfig=kubeconfig, options=options)
    await running.start()
    try:
        await running.ensure_namespace(namespace, labels={"arc-scaleset.dev/test": "true"})
        yield running
    finally:
        await running.stop()


async def session_of(system: System, scale_set_id: int | None) -> str | None:
    """The ID of the session the simulated service holds for the scale set, if any."""
    sessions = await system.sim.sessions()
    return next((s["sessionId"] for s in sessions if s["scaleSetId"] == scale_set_id), None)


async def listener_recreations(system: System, listener_name: str) -> int:
    """How many times the controller recreated the listener's pod (its ``ListenerPodRecreating`` Events)."""
    events = (await system.kube.list(resources.EVENTS, namespace=system.controller_namespace)).items
    return sum(
        int((e.get("series") or {}).get("count", 1))
        for e in events
        if e.get("reason") == "ListenerPodRecreating" and (e.get("regarding") or {}).get("name") == listener_name
    )


async def arc(system: System, *args: str) -> tuple[int, str]:
    """Run ``arc-scaleset <args>`` (``kubectl arc``) against the system's cluster: its exit code and output."""
    return await run_cli(system.kubeconfig, *args)
