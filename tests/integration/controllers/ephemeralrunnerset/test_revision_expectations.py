"""A revision that lands while a scale-up is in flight (the demo's template change during its burst): the runners
the set had just created are replaced with the others, and the set goes on to create the new revision's runners
at once instead of waiting for the replaced ones to "reach the cache" they already left (docs/revisions.md).

The race is made deterministic with two hooks in the set's runner writes (a subclass of
:class:`RunnerWrites` handed to the reconciler of the real controllers): the scale-up pass that creates runners
does not end until the set's cache holds them and the new revision (so the next pass is the revision's, and no
pass in between sees them), and the revision's pass does not end until those runners are gone (their
finalizers removed by the runner controller), as happens when that pass is slow (behind a proxy, its
registration removals and its proxy Secret write take a while). The creation expectations never give up here,
so a set that waits on them would never scale up: the assertion counts runners, not seconds.
"""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.controllers.ephemeralrunnerset.cleanup import CleanupResult
from arc_scaleset.controllers.ephemeralrunnerset.runner_writes import RunnerWrites
from arc_scaleset.controllers.ephemeralrunnerset.scaling import CleanupPlan
from arc_scaleset.controllers.ephemeralrunnerset.scope import SetPass
from arc_scaleset.controllers.metrics import DeletedReason
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import harness_fixture  # noqa: F401 - fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

REV = "actions.github.com/actionable-revision"
NEVER = 24 * 3600.0


async def test_runners_created_just_before_a_revision_and_replaced_by_it_do_not_hold_up_its_new_runners(
    h: ControllerHarness,
) -> None:
    created: set[str] = set()
    first: set[str] = set()

    def in_cache(name: str) -> bool:
        assert h.ctx is not None
        return h.ctx.cache(EPHEMERAL_RUNNERS).get(h.namespace, name) is not None

    def set_at_revision_1() -> bool:
        assert h.ctx is not None
        ers = h.ctx.cache(EPHEMERAL_RUNNER_SETS).get(h.namespace, "arc")
        return ers is not None and EphemeralRunnerSetView(ers).actionable_revision == 1

    class HeldWrites(RunnerWrites):
        """The set's runner writes, holding the two passes of the race until the caches are where it needs them."""

        async def create(self, scope: SetPass, count: int) -> None:
            await super().create(scope, count)
            if created or not first:
                return
            created.update({r["metadata"]["name"] for r in await h.runners()} - first)
            await h.patch_ers(actionableRevision=1, ephemeralRunnerSpec={"metadata": {"labels": {"rev": "1"}}})
            await eventually(
                lambda: set_at_revision_1() and all(in_cache(name) for name in created),
                what="the set's cache to hold the new runners and revision 1",
            )

        async def cleanup(self, scope: SetPass, plan: CleanupPlan, *, removal: str) -> CleanupResult:
            result = await super().cleanup(scope, plan, removal=removal)
            if removal == DeletedReason.REVISION:
                await eventually(
                    lambda: not any(in_cache(name) for name in created), what="the replaced new runners to be gone"
                )
            return result

    await h.start(ers_options={"expectation_timeout": NEVER, "runner_writes": HeldWrites})
    await h.create_ers(replicas=2, patch_id=0)
    first.update(r["metadata"]["name"] for r in await h.wait_running(2))
    await h.patch_ers(replicas=4, patchID=0)

    def four_of_revision_1(runners: list[dict[str, Any]]) -> bool:
        live = [r for r in runners if not r["metadata"].get("deletionTimestamp")]
        return len(live) == 4 and all(r["metadata"]["annotations"][REV] == "1" for r in live)

    await h.wait_runners(four_of_revision_1, timeout=60, what="4 runners of revision 1")
    assert len(created) == 2, f"the scale-up created {sorted(created)}"
    assert not created & {r["metadata"]["name"] for r in await h.runners()}, "the replaced runners are gone"
