"""A queue message that cannot be read is acknowledged and skipped; the scale set keeps scaling.

Issue: an unsupported ``messageType``, a body that does not parse or a missing ``messageId`` was polled again
forever and never acknowledged, so that scale set stopped scaling; a JSON array instead of an object raised
``AttributeError`` and killed the process with a raw traceback.
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest

from arc_scaleset.api.listener_state import ListenerPhase
from arc_scaleset.github.errors import TransientError, UnreadableMessage
from arc_scaleset.github.models import (
    RUNNER_SCALE_SET_JOB_MESSAGES,
    UNREADABLE_BODY,
    UNREADABLE_BODY_SHAPE,
    UNREADABLE_FIELDS,
    UNREADABLE_MESSAGE_TYPE,
    UNREADABLE_NO_MESSAGE_ID,
    MessageFormatError,
    parse_message,
)
from arc_scaleset.github.models import Message as ServiceMessage
from arc_scaleset.listener.metrics import SKIPPED_MESSAGES
from tests.unit.listener.fakes import Harness, error, message


def job_message(payload: dict[str, Any]) -> dict[str, Any]:
    return {"messageId": 3, "messageType": RUNNER_SCALE_SET_JOB_MESSAGES, **payload}


@pytest.mark.parametrize(
    ("payload", "reason", "message_id"),
    [
        ([{"messageId": 3}], UNREADABLE_NO_MESSAGE_ID, None),
        ("a string", UNREADABLE_NO_MESSAGE_ID, None),
        ({"messageType": RUNNER_SCALE_SET_JOB_MESSAGES, "body": "[]"}, UNREADABLE_NO_MESSAGE_ID, None),
        ({"messageId": "3", "messageType": RUNNER_SCALE_SET_JOB_MESSAGES}, UNREADABLE_NO_MESSAGE_ID, None),
        ({"messageId": True, "messageType": RUNNER_SCALE_SET_JOB_MESSAGES}, UNREADABLE_NO_MESSAGE_ID, None),
        ({"messageId": 3, "messageType": "RunnerScaleSetSomethingNew", "body": "[]"}, UNREADABLE_MESSAGE_TYPE, 3),
        ({"messageId": 3, "body": "[]"}, UNREADABLE_MESSAGE_TYPE, 3),
        (job_message({"body": "[{not json"}), UNREADABLE_BODY, 3),
        (job_message({"body": '{"messageType": "JobAvailable"}'}), UNREADABLE_BODY_SHAPE, 3),
        (job_message({"body": "[[1, 2]]"}), UNREADABLE_BODY_SHAPE, 3),
        (job_message({"body": 42}), UNREADABLE_BODY_SHAPE, 3),
        (
            job_message({"body": orjson.dumps([{"messageType": "JobAvailable", "runnerRequestId": "x"}]).decode()}),
            UNREADABLE_FIELDS,
            3,
        ),
        (job_message({"statistics": {"totalAssignedJobs": "many"}}), UNREADABLE_FIELDS, 3),
        (job_message({"statistics": [1]}), UNREADABLE_FIELDS, 3),
    ],
    ids=[
        "json-array",
        "json-string",
        "no-message-id",
        "message-id-as-string",
        "message-id-as-bool",
        "unsupported-message-type",
        "no-message-type",
        "body-not-json",
        "body-an-object",
        "body-of-arrays",
        "body-a-number",
        "job-field-of-the-wrong-type",
        "statistics-of-the-wrong-type",
        "statistics-an-array",
    ],
)
def test_every_unreadable_queue_answer_is_a_typed_error_naming_the_message_when_it_can(
    payload: Any, reason: str, message_id: int | None
) -> None:
    with pytest.raises(MessageFormatError) as raised:
        parse_message(payload)
    assert (raised.value.reason, raised.value.message_id) == (reason, message_id)


def test_a_readable_message_still_parses_and_unknown_job_types_are_ignored() -> None:
    body = [{"messageType": "JobAvailable", "runnerRequestId": 11}, {"messageType": "JobSomethingNew"}]
    parsed = parse_message(job_message({"body": orjson.dumps(body).decode(), "statistics": {"totalAssignedJobs": 2}}))
    assert isinstance(parsed, ServiceMessage)
    assert [job.runner_request_id for job in parsed.jobs_available] == [11]


def unreadable(message_id: int, reason: str) -> UnreadableMessage:
    return UnreadableMessage(
        message_id=message_id, skip_reason=reason, method="GET", url="https://broker.example/queue", status=200
    )


def gaps(times: list[float]) -> list[float]:
    """The delays between successive calls."""
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def skipped(h: Harness, reason: str) -> float | None:
    assert h.metrics is not None
    return h.metrics.registry.get_sample_value(SKIPPED_MESSAGES, {"reason": reason})


async def test_each_kind_of_unreadable_message_is_acknowledged_and_skipped_and_the_next_good_one_scales(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness(with_metrics=True)
    h.actions.poll_script.extend(
        [
            unreadable(1, UNREADABLE_MESSAGE_TYPE),
            unreadable(2, UNREADABLE_BODY),
            unreadable(3, UNREADABLE_BODY_SHAPE),
            unreadable(4, UNREADABLE_FIELDS),
            message(5, assigned=3),
        ]
    )
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 6)
    # Each was acknowledged, and polling moved past it at once (no backoff: the service answered).
    assert [entry[1] for entry in h.calls("ack")] == [1, 2, 3, 4, 5]
    assert [entry[2] for entry in h.calls("poll")] == [0, 1, 2, 3, 4, 5]
    assert h.patcher.ers_patches()[-1]["replicas"] == 3
    for reason in (UNREADABLE_MESSAGE_TYPE, UNREADABLE_BODY, UNREADABLE_BODY_SHAPE, UNREADABLE_FIELDS):
        assert skipped(h, reason) == 1
    warnings = [r for r in caplog.records if r.getMessage() == "skipping a queue message that cannot be read"]
    assert [(r.levelname, getattr(r, "message_id", None)) for r in warnings] == [
        ("WARNING", 1),
        ("WARNING", 2),
        ("WARNING", 3),
        ("WARNING", 4),
    ]
    assert h.running()
    await h.stop_and_wait()


async def test_an_answer_without_a_readable_message_id_is_polled_again_after_the_backoff() -> None:
    h = Harness(with_metrics=True)
    no_id = TransientError(method="GET", url="https://broker.example/queue", status=200, detail="no messageId")
    h.actions.poll_script.extend([no_id, no_id, message(1, assigned=2)])
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 1)
    await h.clock.advance(1.0)
    await h.settle(lambda: len(h.calls("poll")) == 2)
    await h.clock.advance(1.99)
    await h.settle()
    assert len(h.calls("poll")) == 2  # the second delay is 2 s
    await h.clock.advance(0.01)
    await h.settle(lambda: len(h.calls("poll")) == 4)
    assert h.calls("ack") == [("ack", 1)]  # nothing to acknowledge for the unreadable answers
    assert h.patcher.ers_patches()[-1]["replicas"] == 2
    assert skipped(h, UNREADABLE_NO_MESSAGE_ID) is None
    await h.stop_and_wait()


async def test_an_unreadable_message_delivered_again_is_acknowledged_again_but_counted_once() -> None:
    h = Harness(with_metrics=True)
    h.actions.ack_script.append(TransientError(method="DELETE", url="https://broker.example/queue/1", status=503))
    h.actions.poll_script.extend([unreadable(1, UNREADABLE_BODY), unreadable(1, UNREADABLE_BODY)])
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 3)
    await h.run_for(5.0)
    assert skipped(h, UNREADABLE_BODY) == 1
    assert [entry[1] for entry in h.calls("ack")] == [1, 1, 1]
    await h.stop_and_wait()


async def test_an_unreadable_message_delivered_again_and_again_is_polled_ever_more_slowly_and_fails_liveness() -> None:
    # Issue 26, item 8: the skip reset the backoff, so a service that kept sending the same unreadable message
    # (ignoring the acknowledgement) was polled about 2,900 times in half a second, and /healthz stayed green.
    h = Harness(with_metrics=True, liveness_window=150.0)
    h.actions.poll_forever = unreadable(7, UNREADABLE_BODY)
    h.start()
    await h.run_for(200.0)
    polls = h.actions.calls_at("poll")
    assert len(polls) <= 10, f"{len(polls)} polls in 200 s"
    # The first delivery is skipped at once (the next message may be good); each redelivery waits the backoff.
    assert gaps(polls) == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    assert skipped(h, UNREADABLE_BODY) == 1
    assert h.health.state is not None
    assert (h.health.state.state, h.health.state.last_error_class) == (ListenerPhase.FAILING, "UnreadableMessage")
    live, why = h.health.live()
    assert not live, why
    assert h.running()
    await h.stop_and_wait()


async def test_a_readable_message_delivered_again_and_again_is_polled_ever_more_slowly() -> None:
    # Issue 26, item 8: "the same message ID returned again backs off like an error", readable or not: a
    # service that ignores lastMessageId must not get a poll per round trip.
    h = Harness(liveness_window=150.0)
    h.actions.poll_forever = message(7, assigned=0)
    h.start()
    await h.run_for(200.0)
    polls = h.actions.calls_at("poll")
    assert gaps(polls) == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    assert h.health.state is not None
    assert (h.health.state.state, h.health.state.last_error_class) == (ListenerPhase.FAILING, "RedeliveredMessage")
    assert not h.health.live()[0]
    assert h.running()
    await h.stop_and_wait()


async def test_a_skipped_message_does_not_start_the_backoff_over() -> None:
    h = Harness()
    h.actions.poll_script.extend(
        [
            error(TransientError, 503),
            error(TransientError, 503),
            unreadable(1, UNREADABLE_BODY),
            error(TransientError, 503),
        ]
    )
    h.start()
    await h.run_for(10.0)
    polls = h.actions.calls_at("poll")
    # 1 s and 2 s after the two failures; the skip moves on at once; the failure after it waits 4 s, not 1 s.
    assert gaps(polls)[:4] == [1.0, 2.0, 0.0, 4.0]
    await h.stop_and_wait()


async def test_a_message_with_a_negative_assigned_job_count_keeps_the_set_at_min_runners() -> None:
    h = Harness(min_runners=1)
    h.actions.poll_script.extend([message(1, assigned=-5), message(2, assigned=2)])
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 3)
    assert [patch["replicas"] for patch in h.patcher.ers_patches()][-2:] == [1, 3]
    assert h.running()
    await h.stop_and_wait()
