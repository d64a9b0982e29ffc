"""Moving a running scale set from ARC to this controller (docs/migration.md).

Each test stops this controller (ARC's controller "scaled to 0"), makes what ARC's release 0.14.2 leaves for a
running scale set (:mod:`arc_scaleset_lab.harness.arc_install`: the chart's AutoscalingRunnerSet,
EphemeralRunnerSets and EphemeralRunners as ARC's resource builder writes them, ARC's listener with its pod
holding the message session), lets ARC's listener give some runners a job, then starts this controller and
watches it take over: busy runners finish undisturbed, idle ones are kept (or rolled once when the template
changed), the listener is replaced exactly once, every job runs exactly once, and the runner counts are current
in the metrics, those ARC wrote into the status removed (the default, as ARC's current code, #4557). The last test
reads ``kubectl get``'s columns after a scale-up."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from arc_scaleset.api import keys
from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.backoff import Backoff
from arc_scaleset.controllers.autoscalingrunnerset.status import RUNNER_COUNTS
from arc_scaleset.controllers.ephemeralrunnerset.counts import COUNT_FIELDS
from arc_scaleset.kube import resources
from arc_scaleset.kube.errors import Gone, KubeError
from arc_scaleset.kube.resources import Resource
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.arc_install import ArcInstaller, ArcScaleSet, listener_session_key_names
from arc_scaleset_lab.harness.system import System
from arc_scaleset_lab.harness.waiting import eventually
from tests.e2e.harness import ScaleSetFactory, ScaleSetHandle

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
JOB_SECONDS = 25.0


# -- watching what happens ----------------------------------------------------------------------------------


@dataclass
class Seen:
    """One object's life as watched: its name, the phases it went through, whether it was deleted and what
    its phase was when the deletion was first seen."""

    name: str
    phases: list[str] = field(default_factory=list)
    deleted_in_phase: str | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    tracked: list[Any] = field(default_factory=list)


class Watch:
    """Every object of ``resource`` in ``namespace`` (matching ``keep``) seen through a watch, by UID.

    ``track`` picks a value out of each version of an object; each change of it is appended to
    :attr:`Seen.tracked`, so a test sees every value the object went through, not a sampled few."""

    def __init__(self, system: System, resource: Resource, namespace: str, keep: Any = None, track: Any = None) -> None:
        self.system, self.resource, self.namespace = system, resource, namespace
        self.keep = keep or (lambda obj: True)
        self.track = track
        self.seen: dict[str, Seen] = {}
        self.task: asyncio.Task[None] | None = None

    def _record(self, kind: str, obj: Mapping[str, Any]) -> None:
        if not self.keep(obj):
            return
        view = ObjectView(obj)
        entry = self.seen.setdefault(view.uid, Seen(view.name))
        entry.annotations = dict(view.annotations)
        phase = str(view.status.get("phase") or "")
        if not entry.phases or entry.phases[-1] != phase:
            entry.phases.append(phase)
        if (view.is_deleting or kind == "DELETED") and entry.deleted_in_phase is None:
            entry.deleted_in_phase = phase
        if self.track is not None:
            value = self.track(obj)
            if not entry.tracked or entry.tracked[-1] != value:
                entry.tracked.append(value)

    async def _run(self) -> None:
        kube = self.system.kube
        backoff = Backoff(base=0.2, cap=5.0)
        while True:
            try:
                listed = await kube.list(self.resource, namespace=self.namespace)
                backoff.reset()
                for item in listed.items:
                    self._record("ADDED", item)
                async for event in kube.watch(
                    self.resource, namespace=self.namespace, resource_version=listed.resource_version
                ):
                    if event.type != "BOOKMARK":
                        self._record(event.type, event.object)
            except (Gone, KubeError):
                # A watch that ends in an error re-lists after the project's backoff, as an informer does.
                await asyncio.sleep(backoff.next_delay())

    async def __aenter__(self) -> Watch:
        self.task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    def by_name(self, name: str) -> list[Seen]:
        return [seen for seen in self.seen.values() if seen.name == name]


# -- the scene ----------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def arc_controller_scaled_to_zero(system: System) -> AsyncIterator[None]:
    """This controller stopped while the test builds ARC's scale set (as ARC's is stopped in a migration); it
    runs again after the test, whatever happened, for the tests that follow."""
    await system.stop_controller()
    try:
        yield
    finally:
        if not system.controller_running:
            await system.start_controller()


def installer_for(system: System, factory: ScaleSetFactory) -> ArcInstaller:
    return ArcInstaller(
        system.kube,
        controller_namespace=system.controller_namespace,
        config_url=system.config_url(),
        token=system.pat,
        namespace=factory.namespace,
    )


async def install_arc_scale_set(
    system: System, factory: ScaleSetFactory, installer: ArcInstaller, *, min_runners: int, max_runners: int
) -> tuple[ArcScaleSet, ScaleSetHandle]:
    """ARC's AutoscalingRunnerSet, registered; a handle the factory deletes after the test."""
    name = factory.stem
    secret = await system.create_pat_secret(factory.namespace, name=f"{name}-github-token")
    arc = await installer.install(
        name,
        secret=secret,
        min_runners=min_runners,
        max_runners=max_runners,
        template=scale_sets.runner_template(env={scale_sets.TEMPLATE_REVISION_ENV: "1"}),
    )
    handle = ScaleSetHandle.tracked(
        system, namespace=factory.namespace, name=name, min_runners=min_runners, every_runner_set=True
    )
    factory.created.append(handle)
    return arc, handle


async def make_busy(handle: ScaleSetHandle, count: int, *, duration: float = JOB_SECONDS) -> set[str]:
    """ARC's listener acquires ``count`` jobs and the service gives them to idle runners; their names."""
    before = (await handle.snapshot()).busy
    await handle.enqueue(count, duration=duration)
    snapshot = await handle.wait(lambda s: s.busy == before + count, timeout=60, what=f"{count} more busy runners")
    return {r.name for r in snapshot.live_runners() if r.busy}


async def kill_arcs_listener(system: System, arc: ArcScaleSet) -> str:
    """ARC's listener dies without deleting its session (a crash, an OOM kill): the session keeps the scale set
    until the service expires it. Returns the session's ID."""
    sessions = [s for s in await system.sim.sessions() if s["scaleSetId"] == arc.scale_set_id]
    assert [s["ownerName"] for s in sessions] == [arc.listener], sessions
    pid = system.listener_pids().get(arc.listener)
    assert pid is not None, f"no listener process for {arc.listener}: {system.listener_pids()}"
    os.kill(pid, signal.SIGKILL)
    # ARC's listener never writes this project's listener-state annotation; the process playing it did.
    stripped = dict.fromkeys(listener_session_key_names())
    if stripped:
        await system.kube.patch(
            EPHEMERAL_RUNNER_SETS, arc.current_set, {"metadata": {"annotations": stripped}}, namespace=arc.namespace
        )
    return str(sessions[0]["sessionId"])


async def kubectl_get(system: System, resource: Resource, namespace: str) -> tuple[list[str], list[list[Any]]]:
    """``kubectl get <resource>``: the column names and the rows' cells, from the API's Table output."""
    table = await system.kube.request_raw("GET", resource.path(namespace=namespace), accept=TABLE)
    columns = [column["name"] for column in table["columnDefinitions"] if column.get("priority", 0) == 0]
    shown = [i for i, column in enumerate(table["columnDefinitions"]) if column.get("priority", 0) == 0]
    rows = [[row["cells"][i] for i in shown] for row in table.get("rows") or []]
    return columns, rows


async def counts_of(system: System, resource: Resource, name: str, namespace: str) -> dict[str, Any]:
    obj = await system.kube.get(resource, name, namespace=namespace)
    return dict(ObjectView(obj).status)


def listener_pods(system: System, name: str) -> Watch:
    return Watch(
        system,
        resources.PODS,
        system.controller_namespace,
        keep=lambda pod: ObjectView(pod).labels.get(keys.LABEL_SCALE_SET_NAME) == name,
    )


def listeners(system: System, name: str) -> Watch:
    return Watch(
        system,
        AUTOSCALING_LISTENERS,
        system.controller_namespace,
        keep=lambda al: ObjectView(al).spec.get("autoscalingRunnerSetName") == name,
    )


def assert_finished_undisturbed(runners: Watch, pods: Watch, busy: set[str]) -> None:
    """Each busy runner ran its job to the end: its pod exited 0 on its own (Succeeded) before anything
    deleted it, and the runner was Succeeded before it was deleted."""
    for name in busy:
        (runner,) = runners.by_name(name)
        assert "Succeeded" in runner.phases, (name, runner)
        assert runner.deleted_in_phase in (None, "Succeeded"), (name, runner)
        (pod,) = pods.by_name(name)
        assert pod.deleted_in_phase in (None, "Succeeded"), (name, pod)


async def gauged(system: System, handle: ScaleSetHandle) -> dict[str, float]:
    """The scale set's runners by phase as the controller's ``gha_controller_<phase>_ephemeral_runners`` gauges
    count them now (pending, running, failed)."""
    scale_set = {"name": handle.name, "namespace": handle.namespace}
    found = dict.fromkeys(("pending", "running", "failed"), 0.0)
    for family in text_string_to_metric_families(await system.controller_metrics()):
        for sample in family.samples:
            phase = sample.name.removeprefix("gha_controller_").removesuffix("_ephemeral_runners")
            if phase in found and scale_set.items() <= sample.labels.items():
                found[phase] += sample.value
    return found


async def wait_counts(
    handle: ScaleSetHandle, system: System, runner_set: str, *, running: int, timeout: float = 60
) -> None:
    """Until the controller's gauges count ``running`` runners of the scale set, all Running, and neither the set's
    nor the scale set's status holds a count (ARC's are removed: by default the counts are metrics only), the
    scale set Running."""
    uncounted = {name for name, _ in RUNNER_COUNTS} | set(COUNT_FIELDS)

    async def current() -> bool:
        ers = await counts_of(system, EPHEMERAL_RUNNER_SETS, runner_set, handle.namespace)
        ars = await counts_of(system, AUTOSCALING_RUNNER_SETS, handle.name, handle.namespace)
        if uncounted & (ers.keys() | ars.keys()) or ars.get("phase") != "Running":
            return False
        return await gauged(system, handle) == {"pending": 0, "running": running, "failed": 0}

    await handle.wait_until(current, timeout=timeout, what=f"metrics counting {running} running runners")


# -- the tests ------------------------------------------------------------------------------------------------


async def test_a_plain_takeover_keeps_every_runner_replaces_the_listener_once_and_waits_out_its_session(
    system: System, scale_set: ScaleSetFactory
) -> None:
    installer = installer_for(system, scale_set)
    async with (
        arc_controller_scaled_to_zero(system),
        Watch(system, EPHEMERAL_RUNNERS, scale_set.namespace) as runners,
        Watch(system, resources.PODS, scale_set.namespace) as runner_pods,
        listener_pods(system, scale_set.stem) as pods,
        listeners(system, scale_set.stem) as als,
    ):
        arc, handle = await install_arc_scale_set(system, scale_set, installer, min_runners=2, max_runners=6)
        # One set under the scale set's own name (as ARC names it since #4516), with ARC's finalizer.
        runner_set = await installer.add_runner_set(arc, generated_name=False)
        await installer.add_runners(arc, runner_set, 4)
        await installer.add_listener(arc)
        busy = await make_busy(handle, 2)
        idle = {r.uid: r.name for r in (await handle.snapshot()).live_runners() if not r.busy}
        assert len(idle) == 2
        arc_session = await kill_arcs_listener(system, arc)

        await system.start_controller()

        await handle.assert_every_job_ran_once(timeout=120)
        settled = await handle.wait_settled(timeout=120)
        await wait_counts(handle, system, runner_set, running=2)

    # Busy runners finished their job; the idle ones are the same runners as before (zero churn).
    assert_finished_undisturbed(runners, runner_pods, busy)
    assert {r.uid: r.name for r in settled.live_runners()} == idle
    # ARC's set adopted in place: same object, revision 0 applied, ARC's finalizer kept.
    ers = await system.kube.get(EPHEMERAL_RUNNER_SETS, runner_set, namespace=arc.namespace)
    assert ObjectView(ers).uid == arc.uids[f"EphemeralRunnerSet/{runner_set}"]
    assert (settled.desired_revision, settled.applied_revision) == (0, 0)
    # The listener: ARC's replaced by exactly one of ours, which waited for ARC's session to expire.
    assert len(als.seen) == 2
    assert arc.uids[f"AutoscalingListener/{arc.listener}"] in als.seen
    assert len(pods.seen) == 2
    assert arc.uids[f"Pod/{arc.listener}"] in pods.seen
    (ours,) = [seen for uid, seen in pods.seen.items() if uid != arc.uids[f"Pod/{arc.listener}"]]
    assert "Failed" not in ours.phases, ours
    assert ours.deleted_in_phase is None, ours
    sessions = [s for s in await system.sim.sessions() if s["scaleSetId"] == arc.scale_set_id]
    assert [s["ownerName"] for s in sessions] == [ours.name]
    assert sessions[0]["sessionId"] != arc_session


async def test_a_takeover_of_a_set_arc_made_before_patch_id_runs_every_job_once_and_replaces_the_listener_once(
    system: System, scale_set: ScaleSetFactory
) -> None:
    installer = installer_for(system, scale_set)
    async with (
        arc_controller_scaled_to_zero(system),
        Watch(system, EPHEMERAL_RUNNERS, scale_set.namespace) as runners,
        Watch(system, resources.PODS, scale_set.namespace) as runner_pods,
        listener_pods(system, scale_set.stem) as pods,
        listeners(system, scale_set.stem) as als,
    ):
        arc, handle = await install_arc_scale_set(system, scale_set, installer, min_runners=2, max_runners=6)
        # ARC before 0.9: its CRD had no spec.patchID, nor its sets; the user then upgraded the CRDs.
        async with installer.before_patch_id():
            runner_set = await installer.add_runner_set(arc, generated_name=False, before_patch_id=True)
            await installer.add_runners(arc, runner_set, 4)
            await installer.add_listener(arc)
            busy = await make_busy(handle, 2)
            await kill_arcs_listener(system, arc)
            await installer.strip_patch_id(runner_set)
        assert (
            "patchID" not in (await system.kube.get(EPHEMERAL_RUNNER_SETS, runner_set, namespace=arc.namespace))["spec"]
        )

        await system.start_controller()
        await handle.change_template()  # a spec write of ARC's set: refused while it has no patchID
        await handle.enqueue(2, duration=3.0)

        await handle.assert_every_job_ran_once(timeout=150)
        settled = await handle.wait_settled(timeout=150)
        await wait_counts(handle, system, runner_set, running=2)

    assert_finished_undisturbed(runners, runner_pods, busy)
    ers = await system.kube.get(EPHEMERAL_RUNNER_SETS, runner_set, namespace=arc.namespace)
    assert ObjectView(ers).uid == arc.uids[f"EphemeralRunnerSet/{runner_set}"], "ARC's set adopted in place"
    assert isinstance(ers["spec"].get("patchID"), int)
    assert (settled.desired_revision, settled.applied_revision) == (1, 1)
    # ARC's listener replaced by exactly one of ours.
    assert len(als.seen) == 2
    assert arc.uids[f"AutoscalingListener/{arc.listener}"] in als.seen
    assert len(pods.seen) == 2


async def test_a_takeover_of_arcs_generated_sets_leaves_one_set_and_the_runners_the_listener_asks_for(
    system: System, scale_set: ScaleSetFactory
) -> None:
    installer = installer_for(system, scale_set)
    async with (
        arc_controller_scaled_to_zero(system),
        Watch(system, EPHEMERAL_RUNNERS, scale_set.namespace) as runners,
        Watch(system, resources.PODS, scale_set.namespace) as runner_pods,
        Watch(system, EPHEMERAL_RUNNER_SETS, scale_set.namespace) as runner_sets,
        listeners(system, scale_set.stem) as als,
    ):
        arc, handle = await install_arc_scale_set(system, scale_set, installer, min_runners=2, max_runners=6)
        # ARC stopped between creating a new set for a spec change and deleting the old one: two sets.
        old = await installer.add_runner_set(arc)
        await installer.add_runners(arc, old, 2)
        current = await installer.add_runner_set(arc)
        await installer.add_listener(arc, older_name=True)  # as ARC 0.9.0 to 0.13.0 named it
        busy = await make_busy(handle, 1)  # on the old set: its runners are the only ones online
        await installer.add_runners(arc, current, 2)
        assert busy <= set(arc.runners[old])

        await system.start_controller()
        await handle.enqueue(2, duration=3.0)  # queued while one listener goes and the other comes

        await handle.assert_every_job_ran_once(timeout=120)
        settled = await handle.wait_settled(timeout=150)
        await wait_counts(handle, system, current, running=2)

        async def registrations_match_live_runners() -> bool:
            live = {r.name for r in (await handle.snapshot()).live_runners()}
            return await handle.registered_runner_names() == live

        await handle.wait_until(
            registrations_match_live_runners, timeout=60, what="registered runners to be the live ones"
        )

    assert settled.runner_sets == (current,), "exactly one EphemeralRunnerSet: ARC's newest, under its name"
    assert len(await handle.registered_runner_names()) == 2, "as many registered runners as the listener asks for"
    assert_finished_undisturbed(runners, runner_pods, busy)
    (old_set,) = runner_sets.by_name(old)
    assert old_set.deleted_in_phase is not None, "the superseded set was drained and deleted"
    # ARC's listener under its older name went; one listener of ours came.
    assert [seen.name for uid, seen in als.seen.items() if uid != arc.uids[f"AutoscalingListener/{arc.listener}"]] == [
        settled.listener_name
    ]
    assert settled.listener_name != arc.listener


async def test_a_template_change_during_the_takeover_lets_busy_runners_finish_and_rolls_idle_ones_once(
    system: System, scale_set: ScaleSetFactory
) -> None:
    installer = installer_for(system, scale_set)
    async with (
        arc_controller_scaled_to_zero(system),
        Watch(
            system,
            EPHEMERAL_RUNNER_SETS,
            scale_set.namespace,
            track=lambda ers: int(ers["spec"].get("actionableRevision") or 0),
        ) as runner_sets,
        Watch(system, EPHEMERAL_RUNNERS, scale_set.namespace) as runners,
        Watch(system, resources.PODS, scale_set.namespace) as runner_pods,
        listeners(system, scale_set.stem) as als,
    ):
        arc, handle = await install_arc_scale_set(system, scale_set, installer, min_runners=2, max_runners=6)
        runner_set = await installer.add_runner_set(arc)
        await installer.add_runners(arc, runner_set, 4)
        await installer.add_listener(arc)
        busy = await make_busy(handle, 2)
        idle = {r.name for r in (await handle.snapshot()).live_runners() if not r.busy}
        await system.start_controller()
        await handle.change_template()
        await handle.assert_every_job_ran_once(timeout=120)
        settled = await handle.wait_settled(timeout=120)
        await wait_counts(handle, system, runner_set, running=2)
        await eventually(
            lambda: any(seen.tracked[-1:] == [1] for seen in runner_sets.by_name(runner_set)),
            "the watch to see the applied revision",
        )

    assert_finished_undisturbed(runners, runner_pods, busy)
    for name in idle:  # rolled: removed while idle, never run to a job
        (runner,) = runners.by_name(name)
        assert runner.deleted_in_phase == "Running", (name, runner)
        assert "Succeeded" not in runner.phases, (name, runner)
    assert not {r.name for r in settled.live_runners()} & set(arc.all_runners())
    assert (settled.desired_revision, settled.applied_revision) == (1, 1)
    (watched_set,) = runner_sets.by_name(runner_set)
    assert watched_set.tracked == [0, 1], f"the revision was applied once: {watched_set.tracked}"
    assert all(r.revision == 1 for r in settled.live_runners())
    assert settled.runner_sets == (runner_set,)
    assert len(als.seen) == 2


ARC_COLUMNS = {
    "autoscalingrunnersets": ["Minimum Runners", "Maximum Runners", "Current Runners", "Phase", "Pending Runners",
                              "Running Runners", "Finished Runners", "Deleting Runners"],
    "ephemeralrunnersets": ["DesiredReplicas", "CurrentReplicas", "Pending Runners", "Running Runners",
                            "Finished Runners", "Deleting Runners", "Phase"],
    "ephemeralrunners": ["GitHub Config URL", "RunnerId", "Phase", "JobRepository", "JobWorkflowRef",
                         "WorkflowRunId", "JobDisplayName", "JobId", "Message", "Age"],
}  # fmt: skip


async def test_kubectl_get_shows_arcs_columns_after_a_scale_up_the_runner_counts_empty_as_with_arcs_current_code(
    system: System, scale_set: ScaleSetFactory
) -> None:
    # By default the counts are metrics (ARC #4557). With --runner-counts-in-status the controller writes them
    # (tests/integration/controllers/ephemeralrunnerset/test_adoption.py) and their columns show them (every
    # column's path: tests/integration/api/test_api_crds_on_cluster.py).
    handle = await scale_set.create(min_runners=1, max_runners=5)
    await handle.wait_ready()
    await handle.enqueue(3, duration=40.0)
    await handle.wait(lambda s: s.busy == 3 and s.idle_running == 1, timeout=60, what="3 busy runners and 1 idle")

    async def tables() -> dict[str, tuple[list[str], list[dict[str, Any]]]]:
        found = {}
        for resource in (AUTOSCALING_RUNNER_SETS, EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS):
            columns, rows = await kubectl_get(system, resource, handle.namespace)
            found[resource.plural] = (columns, [dict(zip(columns, row, strict=True)) for row in rows])
        return found

    async def current() -> dict[str, tuple[list[str], list[dict[str, Any]]]] | None:
        found = await tables()
        ars = [row for row in found["autoscalingrunnersets"][1] if row["Name"] == handle.name]
        ers_rows = [row for row in found["ephemeralrunnersets"][1] if row["DesiredReplicas"] == 4]
        empty = dict.fromkeys(("Pending Runners", "Running Runners", "Finished Runners", "Deleting Runners"))
        want_set = {"CurrentReplicas": None, "Phase": "Running", **empty}
        want_ars = {"Minimum Runners": 1, "Maximum Runners": 5, "Current Runners": None, "Phase": "Running", **empty}
        ok = any(all(row[k] == v for k, v in want_ars.items()) for row in ars) and any(
            all(row[k] == v for k, v in want_set.items()) for row in ers_rows
        )
        return found if ok else None

    found = await handle.wait_until(current, timeout=60, what="the printer columns to show the scale-up, no counts")
    for plural, columns in ARC_COLUMNS.items():
        assert found[plural][0] == ["Name", *columns], plural
    runners = found["ephemeralrunners"][1]
    assert len(runners) == 4
    assert all(row["Phase"] == "Running" and row["RunnerId"] for row in runners)
    assert sum(1 for row in runners if row["JobId"]) == 3
    assert {row["GitHub Config URL"] for row in runners} == {system.config_url()}


pytestmark = pytest.mark.timeout(600)
