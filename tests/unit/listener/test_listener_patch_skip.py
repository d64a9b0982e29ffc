"""The listener's ERS patch is not sent again when it is the very patch that landed last (issue 30's request
budget), until RESEND_AFTER has passed: the patch's answer carries the set's advertised capacity."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.clock import FakeClock
from arc_scaleset.kube.errors import ServerError
from arc_scaleset.listener.scaler import RESEND_AFTER, Scaler, patch_due
from tests.unit.listener.fakes import FakePatcher

FORCE_STATE = {"spec": {"patchID": 0, "replicas": 2}}


def test_an_identical_patch_is_due_only_after_resend_after() -> None:
    assert patch_due(FORCE_STATE, None, 0.0)
    assert not patch_due(FORCE_STATE, (FORCE_STATE, 100.0), 100.0 + RESEND_AFTER - 1)
    assert patch_due(FORCE_STATE, (FORCE_STATE, 100.0), 100.0 + RESEND_AFTER)
    assert patch_due({"spec": {"patchID": 3, "replicas": 2}}, (FORCE_STATE, 100.0), 100.0)  # a new patch ID
    assert patch_due({"spec": {"patchID": 0, "replicas": 3}}, (FORCE_STATE, 100.0), 100.0)  # a new target


def scaler() -> tuple[Scaler, FakePatcher, FakeClock]:
    log: list[tuple[Any, ...]] = []
    patcher, clock = FakePatcher(log), FakeClock()
    return Scaler(patcher, namespace="arc", ephemeral_runner_set="set-a", min_runners=2, max_runners=5,
                  clock=clock), patcher, clock  # fmt: skip


async def test_a_set_at_rest_is_patched_once_per_resend_interval() -> None:
    s, patcher, clock = scaler()
    for _ in range(3):  # three empty polls: the first decision, then force-state ones, all (0, 2)
        await s.publish(0)
    assert patcher.ers_patches() == [{"patchID": 0, "replicas": 2}]
    assert s.patches_skipped == 2
    await clock.advance(RESEND_AFTER)
    await s.publish(0)
    assert len(patcher.ers_patches()) == 2


async def test_a_job_event_or_a_new_count_is_always_sent() -> None:
    s, patcher, _ = scaler()
    await s.publish(0)
    s.note_job_event()
    await s.publish(0)  # dirty: a patch ID of its own, the set must see it
    await s.publish(1)
    assert [p["patchID"] != 0 for p in patcher.ers_patches()] == [False, True, True]
    assert s.patches_skipped == 0


async def test_a_patch_that_failed_is_sent_again() -> None:
    s, patcher, _ = scaler()
    patcher.fail.append(ServerError(503, "ServiceUnavailable", "etcd is slow"))
    with pytest.raises(ServerError):
        await s.publish(0)
    await s.publish(0)
    assert patcher.ers_patches() == [{"patchID": 0, "replicas": 2}]
