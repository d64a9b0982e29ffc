"""The listener loop and its session keeper, against in-memory fakes of the GitHub client and the ERS patcher.

Fakes are right here: these tests prove the loop's own decisions (order of calls, reactions to each
failure, backoff timing on a fake clock). The real client, simulator and API server are exercised by
tests/integration/listener.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import FakeClock
from arc_scaleset.github.errors import (
    FatalError,
    MessageQueueTokenExpired,
    NotFound,
    RateLimited,
    SessionConflict,
    SessionNotFound,
    TransientError,
    Unauthorized,
)
from arc_scaleset.github.models import (
    JobAvailable,
    JobStarted,
    Message,
    MessageSession,
    Statistics,
)
from arc_scaleset.kube import errors as kube_errors
from arc_scaleset.kube.client import PatchType
from arc_scaleset.kube.resources import Resource
from arc_scaleset.listener.errors import FatalListenerError
from arc_scaleset.listener.health import Health
from arc_scaleset.listener.loop import Listener, LoopSettings
from arc_scaleset.listener.scaler import Scaler
from arc_scaleset.listener.session import CredentialStrikes, SessionKeeper
from arc_scaleset.listener.stop import StopSignal

SCALE_SET_ID = 7
MAX_RUNNERS = 10


def error(cls: type[Exception], status: int = 500, **extra: Any) -> Exception:
    return cls(method="GET", url="https://pipelines.example/_apis/x", status=status, **extra)


def stats(assigned: int = 0) -> Statistics:
    return Statistics(total_assigned_jobs=assigned)


def message(message_id: int, *jobs: Any, assigned: int = 0) -> Message:
    return Message(
        message_id=message_id, message_type="RunnerScaleSetJobMessages", statistics=stats(assigned), jobs=list(jobs)
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


class FakeActions:
    """Scripted Actions-service calls; every call is appended to ``log`` (shared with the patcher)."""

    def __init__(self, log: list[tuple[Any, ...]]) -> None:
        self.log = log
        self.create_script: deque[Exception] = deque()
        self.poll_script: deque[Message | Exception | None] = deque()
        self.ack_script: deque[Exception] = deque()
        self.acquire_script: deque[Exception] = deque()
        self.refresh_script: deque[Exception] = deque()
        self.session_stats = stats(0)
        self.ids = itertools.count(1)
        self.polled = asyncio.Event()
        self.deleted_sessions: list[str] = []

    def _session(self) -> MessageSession:
        number = next(self.ids)
        return MessageSession(
            session_id=f"session-{number}",
            owner_name="pod-a",
            message_queue_url=f"https://broker.example/queue-{number}",
            message_queue_access_token=f"queue-token-{number}",
            statistics=self.session_stats,
        )

    async def create_message_session(self, scale_set_id: int, owner: str) -> MessageSession:
        self.log.append(("create_session", scale_set_id, owner))
        if self.create_script:
            raise self.create_script.popleft()
        return self._session()

    async def refresh_message_session(self, scale_set_id: int, session_id: str) -> MessageSession:
        self.log.append(("refresh_session", session_id))
        if self.refresh_script:
            raise self.refresh_script.popleft()
        fresh = self._session()
        fresh.session_id = session_id
        return fresh

    async def delete_message_session(self, scale_set_id: int, session_id: str) -> None:
        self.log.append(("delete_session", session_id))
        self.deleted_sessions.append(session_id)

    async def get_message(self, session: MessageSession, last_message_id: int, max_capacity: int) -> Message | None:
        self.log.append(("poll", session.session_id, last_message_id, max_capacity))
        self.polled.set()
        if not self.poll_script:
            await asyncio.Event().wait()  # a long poll that never ends (until cancelled)
        result = self.poll_script.popleft()
        if isinstance(result, Exception):
            raise result
        return result

    async def delete_message(self, session: MessageSession, message_id: int) -> None:
        self.log.append(("ack", message_id))
        if self.ack_script:
            raise self.ack_script.popleft()

    async def acquire_jobs(self, session: MessageSession, scale_set_id: int, request_ids: Sequence[int]) -> list[int]:
        self.log.append(("acquire", list(request_ids)))
        if self.acquire_script:
            raise self.acquire_script.popleft()
        return list(request_ids)


class FakePatcher:
    """Records Kubernetes patches in the shared log; ``fail`` holds errors to raise on the next patches."""

    def __init__(self, log: list[tuple[Any, ...]]) -> None:
        self.log = log
        self.fail: deque[Exception] = deque()
        self.missing_runners: set[str] = set()

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
        if self.fail:
            raise self.fail.popleft()
        if resource.plural == "ephemeralrunners" and name in self.missing_runners:
            raise kube_errors.NotFound(404, "NotFound", f"ephemeralrunners {name} not found")
        kind = "ers" if resource.plural == "ephemeralrunnersets" else "er"
        self.log.append((kind, name, subresource, patch))
        return {}

    def ers_patches(self) -> list[dict[str, Any]]:
        return [entry[3]["spec"] for entry in self.log if entry[0] == "ers"]


class Harness:
    def __init__(self, *, min_runners: int = 0, max_runners: int = MAX_RUNNERS) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.clock = FakeClock()
        self.actions = FakeActions(self.log)
        self.patcher = FakePatcher(self.log)
        self.stop = StopSignal(clock=self.clock)
        self.strikes = CredentialStrikes()
        self.sessions = SessionKeeper(
            self.actions,
            scale_set_id=SCALE_SET_ID,
            owner="pod-a",
            stop=self.stop,
            strikes=self.strikes,
            backoff=Backoff(base=1.0, cap=30.0, jitter=0.0),
            on_attempt=lambda: self.health.session_attempt(),
        )
        self.health = Health(session_held=lambda: self.sessions.held, clock=self.clock, liveness_window=150)
        self.scaler = Scaler(
            self.patcher,
            namespace="arc",
            ephemeral_runner_set="set-a",
            min_runners=min_runners,
            max_runners=max_runners,
        )
        self.listener = Listener(
            self.actions,
            sessions=self.sessions,
            scaler=self.scaler,
            settings=LoopSettings(scale_set_id=SCALE_SET_ID, max_runners=max_runners),
            stop=self.stop,
            health=self.health,
            strikes=self.strikes,
            backoff=Backoff(base=1.0, cap=30.0, jitter=0.0),
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

    async def stop_and_wait(self) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, timeout=5)

    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def calls(self, name: str) -> list[tuple[Any, ...]]:
        return [entry for entry in self.log if entry[0] == name]


async def test_startup_creates_a_session_owned_by_the_pod_and_publishes_the_sessions_statistics() -> None:
    h = Harness(min_runners=1)
    h.actions.session_stats = stats(2)
    h.start()
    await h.settle(lambda: bool(h.calls("poll")))
    assert h.calls("create_session") == [("create_session", SCALE_SET_ID, "pod-a")]
    assert h.patcher.ers_patches() == [{"patchID": 0, "replicas": 3}]
    assert h.calls("poll") == [("poll", "session-1", 0, MAX_RUNNERS)]
    await h.stop_and_wait()


async def test_a_message_is_acked_then_jobs_acquired_then_the_ers_patched_before_runner_bookkeeping() -> None:
    h = Harness()
    h.actions.poll_script.append(
        message(5, JobAvailable(runner_request_id=11), started(10, "runner-x"), assigned=2),
    )
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 2)
    order = [entry[0] for entry in h.log if entry[0] in ("ack", "acquire", "ers", "er")]
    assert order == ["ers", "ack", "acquire", "ers", "er"]  # the first "ers" is the startup publish
    assert h.calls("acquire") == [("acquire", [11])]
    assert h.patcher.ers_patches()[-1] == {"patchID": 1, "replicas": 2}
    assert h.calls("poll")[-1] == ("poll", "session-1", 5, MAX_RUNNERS)
    await h.stop_and_wait()


async def test_job_started_patches_the_runner_status_with_only_non_empty_job_facts() -> None:
    h = Harness()
    job = started(10, "runner-x")
    job.workflow_run_id = 0
    h.actions.poll_script.append(message(1, job, assigned=1))
    h.start()
    await h.settle(lambda: bool(h.calls("er")))
    assert h.calls("er") == [
        (
            "er",
            "runner-x",
            "status",
            {
                "status": {
                    "jobRequestId": 10,
                    "jobRepositoryName": "octo/hello",
                    "jobId": "job-10",
                    "jobWorkflowRef": "octo/hello/.github/workflows/ci.yml@refs/heads/main",
                    "jobDisplayName": "build",
                }
            },
        )
    ]
    await h.stop_and_wait()


async def test_a_started_job_whose_runner_is_gone_is_ignored() -> None:
    h = Harness()
    h.patcher.missing_runners.add("runner-gone")
    h.actions.poll_script.extend([message(1, started(10, "runner-gone"), assigned=1), None])
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 3)
    assert h.calls("er") == []
    assert h.running()
    await h.stop_and_wait()


async def test_an_empty_poll_publishes_the_latest_count_again() -> None:
    h = Harness()
    h.actions.poll_script.extend([message(1, assigned=3), None, None])
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 4)
    assert [p["replicas"] for p in h.patcher.ers_patches()] == [None, 3, 3, 3]
    await h.stop_and_wait()


async def test_a_target_of_zero_is_sent_as_null_replicas() -> None:
    h = Harness()
    h.start()
    await h.settle(lambda: bool(h.calls("poll")))
    assert h.patcher.ers_patches() == [{"patchID": 0, "replicas": None}]
    await h.stop_and_wait()


async def test_a_job_offered_again_is_never_acquired_twice() -> None:
    h = Harness()
    h.actions.poll_script.extend(
        [
            message(1, JobAvailable(runner_request_id=11), JobAvailable(runner_request_id=11)),
            message(2, JobAvailable(runner_request_id=11), JobAvailable(runner_request_id=12)),
        ]
    )
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 3)
    assert h.calls("acquire") == [("acquire", [11]), ("acquire", [12])]
    await h.stop_and_wait()


async def test_a_redelivered_message_is_acked_again_but_not_handled_twice() -> None:
    h = Harness()
    h.actions.poll_script.extend([message(1, started(10, "runner-x"), assigned=1), message(1, started(10, "runner-x"))])
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 3)
    assert len(h.calls("ack")) == 2
    assert len(h.calls("er")) == 1
    await h.stop_and_wait()


async def test_a_held_session_is_waited_out_with_backoff_and_taken_over_without_exiting() -> None:
    h = Harness()
    h.actions.create_script.extend([error(SessionConflict, 409)] * 3)
    h.start()
    await h.settle()
    assert len(h.calls("create_session")) == 1
    for delay in (1.0, 2.0, 4.0):
        await h.clock.advance(delay - 0.001)
        attempts = len(h.calls("create_session"))
        await h.clock.advance(0.001)
        await h.settle()
        assert len(h.calls("create_session")) == attempts + 1
    await h.settle(lambda: bool(h.calls("poll")))
    assert len(h.calls("create_session")) == 4
    assert h.sessions.held
    assert h.running()
    await h.stop_and_wait()


async def test_a_scale_set_that_does_not_exist_is_fatal_with_a_clear_message() -> None:
    h = Harness()
    h.actions.create_script.append(error(NotFound, 404))
    with pytest.raises(FatalListenerError, match="runner scale set 7 does not exist"):
        await asyncio.wait_for(h.listener.run(), timeout=5)


async def test_credentials_refused_once_are_retried_and_refused_twice_are_fatal() -> None:
    h = Harness()
    h.actions.create_script.extend([error(Unauthorized, 401), error(Unauthorized, 401)])
    task = h.start()
    await h.settle()
    assert not task.done()
    await h.clock.advance(1.0)
    await h.settle(task.done)
    with pytest.raises(FatalListenerError, match="refused the credentials 2 times in a row"):
        await task


async def test_a_refused_then_accepted_credential_resets_the_count() -> None:
    h = Harness()
    h.actions.create_script.append(error(Unauthorized, 401))
    h.actions.poll_script.append(error(Unauthorized, 401))
    h.start()
    await h.settle()
    await h.clock.advance(1.0)
    await h.settle(lambda: len(h.calls("poll")) == 1)
    await h.clock.advance(1.0)
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert h.running()
    await h.stop_and_wait()


async def test_an_evicted_session_is_replaced_in_process_and_polling_starts_over() -> None:
    h = Harness()
    h.actions.poll_script.extend([message(4, assigned=1), error(SessionNotFound, 404)])
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 3)
    assert [c[1] for c in h.calls("poll")] == ["session-1", "session-1", "session-2"]
    assert h.calls("poll")[-1][2] == 0  # lastMessageId starts over with the new session
    assert h.actions.deleted_sessions == ["session-1"]
    assert h.sessions.sessions_created == 2
    await h.stop_and_wait()


async def test_a_refused_queue_token_refreshes_the_session() -> None:
    h = Harness()
    h.actions.poll_script.append(error(MessageQueueTokenExpired, 401))
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert h.calls("refresh_session") == [("refresh_session", "session-1")]
    assert h.sessions.current().message_queue_access_token == "queue-token-2"
    assert h.sessions.sessions_created == 1
    await h.stop_and_wait()


async def test_a_session_that_cannot_be_refreshed_is_replaced() -> None:
    h = Harness()
    h.actions.poll_script.append(error(MessageQueueTokenExpired, 401))
    h.actions.refresh_script.append(error(SessionNotFound, 404))
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert h.calls("poll")[-1][1] == "session-2"
    await h.stop_and_wait()


async def test_transient_poll_failures_back_off_exponentially_up_to_thirty_seconds() -> None:
    h = Harness()
    h.actions.poll_script.extend([error(TransientError, 503)] * 7)
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 1)
    for delay in (1, 2, 4, 8, 16, 30, 30):
        polls = len(h.calls("poll"))
        await h.clock.advance(delay - 0.01)
        await h.settle()
        assert len(h.calls("poll")) == polls, f"polled before {delay}s passed"
        await h.clock.advance(0.01)
        await h.settle()
        assert len(h.calls("poll")) == polls + 1
    assert h.running()
    await h.stop_and_wait()


async def test_a_rate_limited_poll_waits_exactly_retry_after() -> None:
    h = Harness()
    h.actions.poll_script.append(error(RateLimited, 429, retry_after=42.0))
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 1)
    await h.clock.advance(41.9)
    await h.settle()
    assert len(h.calls("poll")) == 1
    await h.clock.advance(0.1)
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert len(h.calls("poll")) == 2
    await h.stop_and_wait()


async def test_a_malformed_message_is_retried_not_fatal() -> None:
    h = Harness()
    h.actions.poll_script.append(error(FatalError, 200))
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 1)
    await h.clock.advance(1.0)
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert len(h.calls("poll")) == 2
    await h.stop_and_wait()


async def test_a_failed_ers_patch_is_retried_until_it_lands_keeping_the_dirty_flag() -> None:
    h = Harness()
    h.actions.poll_script.append(message(1, started(10, "runner-x"), assigned=0))
    h.start()
    await h.settle(lambda: len(h.patcher.ers_patches()) == 1)
    h.patcher.fail.extend([kube_errors.ServerError(503, "ServiceUnavailable", "etcd")] * 2)
    await h.settle(lambda: h.clock.sleepers > 0)
    await h.clock.advance(1.0)
    await h.settle()
    await h.clock.advance(2.0)
    await h.settle(lambda: len(h.patcher.ers_patches()) == 2)
    # Same target (0) at min: without the job event it would be a forced 0; the failed attempts must not
    # have consumed the dirty flag.
    assert h.patcher.ers_patches()[-1]["patchID"] != 0
    await h.stop_and_wait()


async def test_a_lost_session_during_ack_is_replaced_before_the_next_poll_and_the_count_still_published() -> None:
    h = Harness()
    h.actions.poll_script.append(message(3, JobAvailable(runner_request_id=11), assigned=1))
    h.actions.ack_script.append(error(SessionNotFound, 404))
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert h.calls("acquire") == []  # the session is gone: acquisition waits for the job to be offered again
    assert h.patcher.ers_patches()[1] == {"patchID": 1, "replicas": 1}
    assert h.calls("poll")[-1][1] == "session-2"
    await h.stop_and_wait()


async def test_a_failed_acquisition_is_retried_a_few_times_then_left_to_the_service() -> None:
    h = Harness()
    h.actions.poll_script.append(message(1, JobAvailable(runner_request_id=11)))
    h.actions.acquire_script.extend([error(TransientError, 502)] * 3)
    h.start()
    await h.settle(lambda: len(h.calls("acquire")) == 1)
    await h.clock.advance(1.0)
    await h.settle(lambda: len(h.calls("acquire")) == 2)
    await h.clock.advance(2.0)
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert len(h.calls("acquire")) == 3
    assert 11 not in h.listener._acquired  # may be acquired when offered again
    await h.stop_and_wait()


async def test_shutdown_interrupts_the_long_poll_and_run_returns() -> None:
    h = Harness()
    h.start()
    await h.settle(lambda: bool(h.calls("poll")))
    await h.stop_and_wait()
    assert h.task is not None
    assert h.task.result() is None
    assert await h.sessions.close(within=1.0)
    assert h.actions.deleted_sessions == ["session-1"]


async def test_shutdown_while_waiting_for_a_held_session_returns_without_a_session() -> None:
    h = Harness()
    h.actions.create_script.extend([error(SessionConflict, 409)] * 100)
    h.start()
    await h.settle()
    await h.stop_and_wait()
    assert not h.sessions.held
    assert await h.sessions.close(within=1.0)
    assert h.actions.deleted_sessions == []


async def test_liveness_fails_after_the_window_without_a_successful_poll_and_readiness_follows_the_session() -> None:
    h = Harness()
    assert h.health.ready() == (False, "no message session held")
    h.actions.poll_script.extend([None, error(TransientError, 503)] + [error(TransientError, 503)] * 20)
    h.start()
    await h.settle(lambda: len(h.calls("poll")) == 2)
    assert h.health.ready()[0]
    assert h.health.live()[0]
    await h.clock.advance(150.5)
    assert h.health.live()[0] is False
    await h.stop_and_wait()


async def test_liveness_holds_while_waiting_patiently_for_a_held_session() -> None:
    h = Harness()
    h.actions.create_script.extend([error(SessionConflict, 409)] * 100)
    h.start()
    await h.settle()
    for _ in range(20):
        await h.clock.advance(30.0)
        await h.settle()
    assert h.health.live()[0]
    await h.stop_and_wait()
