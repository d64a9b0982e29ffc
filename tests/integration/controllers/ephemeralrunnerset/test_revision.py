"""Revision-tracked update propagation (docs/revisions.md) on the real control plane: busy runners survive, idle
and pending ones are replaced once, ``appliedActionableRevision`` only moves forward, also across restarts
and against a concurrent status writer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import pytest

import arc_scaleset.controllers.ephemeralrunnerset.reconciler as ers_module
import arc_scaleset.controllers.ephemeralrunnerset.runner_writes as runner_writes_module
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.controllers.ephemeralrunnerset.cleanup import execute_cleanup
from arc_scaleset.controllers.ephemeralrunnerset.status import patch_applied_actionable_revision
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset.kube.informer import Informer
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import harness_fixture  # noqa: F401 - fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

REV = "actions.github.com/actionable-revision"


class Observer:
    """Watches the namespace: every runner ever created (with its revision) and every applied revision the
    set ever showed, from every watch event (not samples), so a test can assert on the whole history."""

    def __init__(self, h: ControllerHarness) -> None:
        self.h = h
        self.runners: dict[str, str] = {}
        self.applied: list[int] = []
        self._runner_watch = Informer(h.kube, EPHEMERAL_RUNNERS, namespace=h.namespace)
        self._set_watch = Informer(h.kube, EPHEMERAL_RUNNER_SETS, namespace=h.namespace)

    def _saw_runner(self, runner: Mapping[str, Any]) -> None:
        meta = runner["metadata"]
        self.runners.setdefault(meta["name"], (meta.get("annotations") or {}).get(REV, "0"))

    def _saw_set(self, ers: Mapping[str, Any]) -> None:
        applied = (ers.get("status") or {}).get("appliedActionableRevision", 0)
        if not self.applied or self.applied[-1] != applied:
            self.applied.append(applied)

    async def __aenter__(self) -> Observer:
        self._runner_watch.add_handler(on_add=self._saw_runner, on_update=lambda _, new: self._saw_runner(new))
        self._set_watch.add_handler(on_add=self._saw_set, on_update=lambda _, new: self._saw_set(new))
        for watch in (self._runner_watch, self._set_watch):
            watch.start()
            await watch.wait_synced()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for watch in (self._runner_watch, self._set_watch):
            await watch.stop()

    async def caught_up(self) -> None:
        """Wait until the watch has delivered every runner the API lists now."""
        listed = {r["metadata"]["name"] for r in await self.h.runners()}
        await eventually(lambda: listed <= self.runners.keys(), what="the watch to catch up with the API")

    def created_at(self, revision: int) -> set[str]:
        return {name for name, rev in self.runners.items() if rev == str(revision)}


async def _busy_idle_and_pending(h: ControllerHarness) -> tuple[str, set[str], str]:
    """Three running runners (one busy), then a fourth left pending (no ER controller, no runner ID)."""
    await h.start()
    await h.create_ers(replicas=3, patch_id=0)
    runners = await h.wait_running(3)
    busy = runners[0]["metadata"]["name"]
    await h.make_busy(busy)
    idle = {r["metadata"]["name"] for r in runners[1:]}
    await h.stop()
    await h.start("EphemeralRunnerSet")
    await h.patch_ers(replicas=4, patchID=0)
    pending_runners = await h.wait_runners(lambda rs: len(rs) == 4, what="a fourth, pending runner")
    pending = next(r["metadata"]["name"] for r in pending_runners if r["metadata"]["name"] not in idle | {busy})
    await h.stop()
    return busy, idle, pending


async def _assert_converged(h: ControllerHarness, obs: Observer, *, busy: str, replaced: set[str]) -> None:
    def converged(runners: list[dict[str, Any]]) -> bool:
        by_rev = {r["metadata"]["name"]: r["metadata"]["annotations"][REV] for r in runners}
        return (
            len(runners) == 4
            and by_rev.get(busy) == "0"
            and sorted(by_rev.values()) == ["0", "1", "1", "1"]
            and all((r.get("status") or {}).get("phase") == "Running" for r in runners)
        )

    await h.wait_runners(converged, timeout=60, what="3 runners of revision 1 next to the busy one")
    ers = await eventually(_applied_is(h, 1), what="applied revision 1")
    assert ers["status"]["phase"] == "Running"
    assert not (replaced & {r["metadata"]["name"] for r in await h.runners()})  # idle and pending replaced
    assert len(obs.created_at(1)) == 3, f"runners of revision 1 created: {sorted(obs.created_at(1))}"
    assert obs.applied == sorted(obs.applied), f"applied revision moved backwards: {obs.applied}"
    assert busy in h.registered()


async def test_spec_update_replaces_idle_and_pending_runners_once_and_keeps_busy_ones(h: ControllerHarness) -> None:
    busy, idle, pending = await _busy_idle_and_pending(h)
    async with Observer(h) as obs:
        await h.patch_ers(actionableRevision=1, ephemeralRunnerSpec={"metadata": {"labels": {"rev": "1"}}})
        await h.start()
        await _assert_converged(h, obs, busy=busy, replaced=idle | {pending})
        # The busy runner's job ends: it is replaced by a runner of the new revision, once.
        h.sim.state.runner_exit(busy)
        await h.finish_pod(busy, exit_code=0)
        await h.wait_runners(
            lambda rs: len(rs) == 4 and all(r["metadata"]["annotations"][REV] == "1" for r in rs), what="all rev 1"
        )
        await obs.caught_up()  # the watch runs on its own: let it deliver what wait_runners saw
        assert len(obs.created_at(1)) == 4


@pytest.mark.parametrize("crash_at", ["before-cleanup", "mid-cleanup", "after-cleanup-before-status-write"])
async def test_restart_at_any_step_of_an_update_converges_without_double_creation(
    h: ControllerHarness, crash_at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy, idle, pending = await _busy_idle_and_pending(h)
    crashed = asyncio.Event()

    def crash(after: Callable[..., Any] | None = None) -> Callable[..., Any]:
        async def crashing(*args: Any, **kwargs: Any) -> Any:
            if after is not None:  # do part of the work first
                plan = args[1]
                partial = type(plan)(delete=plan.delete[:1], remove=plan.remove[:1], remove_limit=plan.remove_limit)
                await after(args[0], partial, **kwargs)
            crashed.set()
            raise RuntimeError(f"simulated crash {crash_at}")

        return crashing

    async with Observer(h) as obs:
        await h.patch_ers(actionableRevision=1, ephemeralRunnerSpec={"metadata": {"labels": {"rev": "1"}}})
        if crash_at == "mid-cleanup":
            monkeypatch.setattr(runner_writes_module, "execute_cleanup", crash(execute_cleanup))
        elif crash_at == "after-cleanup-before-status-write":
            monkeypatch.setattr(ers_module, "patch_applied_actionable_revision", crash())
        if crash_at != "before-cleanup":
            await h.start()
            await asyncio.wait_for(crashed.wait(), 30)
            await h.stop()
            assert (await h.get_ers())["status"].get("appliedActionableRevision", 0) == 0
            assert obs.created_at(1) == set()  # nothing of the new revision before it is recorded
            monkeypatch.undo()
        await h.start()  # the restart
        await _assert_converged(h, obs, busy=busy, replaced=idle | {pending})


async def test_applied_revision_write_retries_a_conflict_and_never_lowers_a_concurrent_advance(
    h: ControllerHarness, kube: KubeClient, namespace: str
) -> None:
    await h.create_ers(replicas=0, patch_id=0, revision=5)
    interfered: list[bool] = []

    class Interfering(KubeClient):
        """Another writer advances the applied revision between our read and our write (once)."""

        async def patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            if kwargs.get("subresource") == "status" and not interfered:
                interfered.append(True)
                await kube.patch(EPHEMERAL_RUNNER_SETS, "arc", {"status": {"appliedActionableRevision": 4,
                                 "finishedRunnerCleanupPatchID": 9}}, namespace=namespace,
                                 subresource="status", patch_type=PatchType.MERGE)  # fmt: skip
            return await super().patch(*args, **kwargs)

    interfering = Interfering(kube._config)
    try:
        stored = await patch_applied_actionable_revision(interfering, namespace=namespace, name="arc", target=3)
        assert interfered == [True]
        # The write computed from the first read (applied 0 -> 3) hit a 409 and was redone on a fresh read,
        # which already showed 4: nothing lowered, the other writer's marker kept.
        assert stored["status"]["appliedActionableRevision"] == 4
        assert stored["status"]["finishedRunnerCleanupPatchID"] == 9
        advanced = await patch_applied_actionable_revision(interfering, namespace=namespace, name="arc", target=5)
        assert advanced["status"]["appliedActionableRevision"] == 5
        assert advanced["status"]["finishedRunnerCleanupPatchID"] == 0
    finally:
        await interfering.close()


async def test_stale_outdated_runners_are_replaced_and_current_ones_make_the_set_outdated(h: ControllerHarness) -> None:
    await h.start()
    await h.create_ers(replicas=2, patch_id=0)
    runners = await h.wait_running(2)
    first, second = (r["metadata"]["name"] for r in runners)
    # A runner of revision 0 exits 7 after revision 1 was applied: stale, replaced, set stays Running.
    await h.patch_ers(actionableRevision=1)
    await eventually(_applied_is(h, 1), what="revision 1 applied")
    new = await h.wait_runners(
        lambda rs: (
            len(rs) == 2
            and all(r["metadata"]["annotations"][REV] == "1" for r in rs)
            and all((r.get("status") or {}).get("phase") == "Running" for r in rs)
        ),
        what="two runners of revision 1",
    )
    assert first not in {r["metadata"]["name"] for r in new}
    stale_name = new[0]["metadata"]["name"]
    await h.stop()
    await h.kube.patch(EPHEMERAL_RUNNERS, stale_name, {"metadata": {"annotations": {REV: "0"}}},
                       namespace=h.namespace)  # fmt: skip
    await h.start()
    await h.finish_pod(stale_name, exit_code=7)
    await h.wait_runners(
        lambda rs: stale_name not in {r["metadata"]["name"] for r in rs} and len(rs) == 2, what="stale replaced"
    )
    assert (await h.get_ers())["status"]["phase"] == "Running"
    # A runner of the current revision exits 7: the set turns Outdated and creates nothing more.
    current = next(r["metadata"]["name"] for r in await h.live_runners() if r["metadata"]["name"] != stale_name)
    await h.finish_pod(current, exit_code=7)
    await eventually(_phase_is(h, "Outdated"), what="set Outdated")
    runners = await h.runners()
    assert [r["status"]["phase"] for r in runners if r["metadata"]["name"] == current] == ["Outdated"]
    # A spec change clears it: the revision cleanup deletes the Outdated runner; phase Running again.
    await h.patch_ers(actionableRevision=2)
    await eventually(_applied_is(h, 2), what="revision 2 applied")
    await eventually(_phase_is(h, "Running"), what="set Running again")
    del second


def _applied_is(h: ControllerHarness, value: int) -> Any:
    async def check() -> dict[str, Any] | None:
        ers = await h.get_ers()
        return ers if ers.get("status", {}).get("appliedActionableRevision") == value else None

    return check


def _phase_is(h: ControllerHarness, phase: str) -> Any:
    async def check() -> bool:
        return bool((await h.get_ers()).get("status", {}).get("phase") == phase)

    return check
