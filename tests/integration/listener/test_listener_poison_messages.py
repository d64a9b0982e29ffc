"""The listener against malformed queue answers from the simulated GitHub, over real HTTP: every unreadable
message is acknowledged and skipped (or, without a readable ID, polled again after the backoff), and the next
good message still scales the EphemeralRunnerSet.

The simulated service only sends well-formed messages, so each test puts a scripted queue in front of the
sim's own, on the sim instance it started: the scripted answers come first, with message IDs 1..n, and the
sim's own messages follow, their IDs shifted past n.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from arc_scaleset.api.listener_state import ListenerPhase
from arc_scaleset.github.models import (
    RUNNER_SCALE_SET_JOB_MESSAGES,
    UNREADABLE_BODY,
    UNREADABLE_BODY_SHAPE,
    UNREADABLE_FIELDS,
    UNREADABLE_MESSAGE_TYPE,
)
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.listener.metrics import SKIPPED_MESSAGES
from arc_scaleset_lab.sim.state import JobState, SimState
from tests.integration.listener.conftest import (
    SCALE_SET_NAME,
    ListenerSim,
    StartListener,
    listener_config,
    wait_for_replicas,
)

pytestmark = pytest.mark.cluster


@dataclass
class _Answer:
    payload: Any

    def to_json(self) -> Any:
        return self.payload


@dataclass
class ScriptedQueue:
    """Scripted raw answers in front of the sim's queue (see the module docstring)."""

    state: SimState
    script: deque[tuple[Any, int | None]]
    offset: int
    acked: list[int] = field(default_factory=list)

    @classmethod
    def install(cls, monkeypatch: pytest.MonkeyPatch, state: SimState, answers: Iterable[Any]) -> ScriptedQueue:
        script = deque((answer, _message_id(answer)) for answer in answers)
        offset = max((message_id or 0 for _, message_id in script), default=0)
        queue = cls(state, script, offset)
        real_next, real_ack = state.next_message, state.ack_message

        def next_message(scale_set_id: int, *, last_message_id: int) -> Any:
            while queue.script:
                payload, message_id = queue.script[0]
                if message_id is None:
                    queue.script.popleft()  # an answer without an ID is given once
                    return _Answer(payload)
                if message_id <= last_message_id or message_id in queue.acked:
                    queue.script.popleft()
                    continue
                return _Answer(payload)
            real = real_next(scale_set_id, last_message_id=max(0, last_message_id - queue.offset))
            if real is None:
                return None
            return _Answer({**real.to_json(), "messageId": real.id + queue.offset})

        def ack_message(scale_set_id: int, message_id: int) -> None:
            if message_id <= queue.offset:
                queue.acked.append(message_id)
            else:
                real_ack(scale_set_id, message_id - queue.offset)

        monkeypatch.setattr(state, "next_message", next_message)
        monkeypatch.setattr(state, "ack_message", ack_message)
        return queue


def _message_id(answer: Any) -> int | None:
    value = answer.get("messageId") if isinstance(answer, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def job_message(message_id: int, **fields: Any) -> dict[str, Any]:
    return {"messageId": message_id, "messageType": RUNNER_SCALE_SET_JOB_MESSAGES, "body": "[]", **fields}


async def test_each_kind_of_malformed_message_is_skipped_and_the_next_good_message_still_scales(
    kube: KubeClient,
    namespace: str,
    ers: str,
    listener_sim: ListenerSim,
    start_listener: StartListener,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queue = ScriptedQueue.install(
        monkeypatch,
        listener_sim.sim.state,
        [
            {"messageId": 1, "messageType": "RunnerScaleSetSomethingNew", "body": "[]"},
            job_message(2, body="[{this is not json"),
            job_message(3, body='{"messageType": "JobAvailable"}'),
            job_message(4, body=orjson.dumps([{"messageType": "JobAvailable", "runnerRequestId": "x"}]).decode()),
            job_message(5, statistics={"totalAssignedJobs": "many"}),
            [{"messageId": 6}],  # a JSON array instead of an object: no readable ID
            {"messageId": "seven", "messageType": RUNNER_SCALE_SET_JOB_MESSAGES},  # no readable ID either
        ],
    )
    handle = await start_listener(listener_config(listener_sim, namespace, max_runners=5))
    request_id = listener_sim.sim.state.enqueue_job(SCALE_SET_NAME, repository="octo-org/hello").request_id
    await listener_sim.sim.changes.wait_until(
        lambda: listener_sim.sim.state.jobs[request_id].state is JobState.ACQUIRED, within=30
    )
    await wait_for_replicas(kube, namespace, 1, within=30)
    assert sorted(queue.acked) == [1, 2, 3, 4, 5]
    registry = handle.app.metrics.registry
    skipped = {
        reason: registry.get_sample_value(SKIPPED_MESSAGES, {"reason": reason})
        for reason in (UNREADABLE_MESSAGE_TYPE, UNREADABLE_BODY, UNREADABLE_BODY_SHAPE, UNREADABLE_FIELDS)
    }
    assert skipped == {UNREADABLE_MESSAGE_TYPE: 1, UNREADABLE_BODY: 1, UNREADABLE_BODY_SHAPE: 1, UNREADABLE_FIELDS: 2}
    assert not handle.task.done()


async def test_an_acquire_jobs_answer_of_the_wrong_shape_is_a_typed_error_and_the_listener_carries_on(
    kube: KubeClient,
    namespace: str,
    ers: str,
    listener_sim: ListenerSim,
    start_listener: StartListener,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = listener_sim.sim.state
    real_acquire = state.acquire_jobs
    garbled: list[list[int]] = []

    def acquire_jobs(scale_set_id: int, request_ids: Iterable[int]) -> list[Any]:
        acquired = real_acquire(scale_set_id, request_ids)
        if not garbled:
            garbled.append(acquired)
            return ["not-a-request-id", {"id": 1}]
        return acquired

    monkeypatch.setattr(state, "acquire_jobs", acquire_jobs)
    handle = await start_listener(listener_config(listener_sim, namespace, max_runners=5))
    first = state.enqueue_job(SCALE_SET_NAME, repository="octo-org/hello").request_id
    await listener_sim.sim.changes.wait_until(lambda: bool(garbled), within=30)
    second = state.enqueue_job(SCALE_SET_NAME, repository="octo-org/hello").request_id
    await listener_sim.sim.changes.wait_until(lambda: state.jobs[second].state is JobState.ACQUIRED, within=30)
    await wait_for_replicas(kube, namespace, 2, within=30)
    assert garbled == [[first]]
    assert not handle.task.done()


async def test_a_service_that_keeps_sending_the_same_unreadable_message_is_polled_with_growing_delays(
    kube: KubeClient,
    namespace: str,
    ers: str,
    listener_sim: ListenerSim,
    start_listener: StartListener,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 26, item 8: a service that ignores the acknowledgement got about 2,900 polls in half a second.
    poison = job_message(1, body="[{this is not json")
    polled: list[float] = []

    def next_message(scale_set_id: int, *, last_message_id: int) -> Any:
        polled.append(time.monotonic())
        return _Answer(poison)  # whatever was acknowledged, whatever lastMessageId says

    monkeypatch.setattr(listener_sim.sim.state, "next_message", next_message)
    handle = await start_listener(listener_config(listener_sim, namespace, max_runners=5))
    await listener_sim.sim.changes.wait_until(lambda: len(polled) >= 5, within=30)
    # The first delivery is skipped at once; each redelivery waits the backoff: 1 s, 2 s, 4 s (jitter only
    # lengthens a delay), so the first 2.5 s hold 3 polls, where a skip that reset the backoff made thousands.
    in_window = [at for at in polled if at - polled[0] < 2.5]
    assert len(in_window) <= 4, f"{len(in_window)} polls of the same message in 2.5 s"
    gaps = [later - earlier for earlier, later in itertools.pairwise(polled[:5])]
    assert 1.0 <= gaps[1] < gaps[2] < gaps[3], f"delays between polls: {gaps}"
    state = handle.app.health.state
    assert state is not None
    assert (state.state, state.last_error_class) == (ListenerPhase.FAILING, "UnreadableMessage")
    registry = handle.app.metrics.registry
    assert registry.get_sample_value(SKIPPED_MESSAGES, {"reason": UNREADABLE_BODY}) == 1
    assert not handle.task.done()
