"""One in-memory fake of each collaborator the unit tests stand in for: the Actions-service client
(:class:`FakeActions`) and the Kubernetes API server (:class:`FakeKube`).

They prove the code's own decisions (order of calls, reactions to each failure, concurrency, timing on a fake
clock). The real client, the simulated GitHub and the real API server are exercised by tests/integration.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import itertools
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from arc_scaleset.clock import FakeClock
from arc_scaleset.github import Credentials, GitHubConfig, JobStillRunning, TransientError
from arc_scaleset.github._auth import AdminConnection
from arc_scaleset.github.models import Message, MessageSession, Statistics
from arc_scaleset.kube import errors as kube_errors
from arc_scaleset.kube.resources import SECRETS, Resource

FAR_FUTURE = dt.datetime(2100, 1, 1, tzinfo=dt.UTC)


def session(number: int) -> str:
    """The ID of the ``number``-th session the fake service opens: a UUID, as the service's are."""
    return f"5e5510e0-0000-4000-8000-{number:012d}"


class FakeActions:
    """An in-memory Actions-service client: the calls of :class:`arc_scaleset.github.ActionsClient` that the
    listener and the controllers make, scripted, each recorded.

    Every call is appended to ``log`` (a listener harness shares it with its patcher), with its fake-clock time
    in ``times``.

    Sessions and messages (the listener): each ``*_script`` is consumed first; then
    ``poll_forever``/``create_forever``/``acquire_forever``, when set, is raised (``poll_forever`` may also be a
    message, returned) on every further call (a fault that does not go away). A poll with nothing scripted is
    a long poll that never ends (until cancelled).

    Runner removals (the controllers): a removal takes a few turns of the event loop, so that concurrent ones
    overlap (``most_at_once`` is the most under way at once); a runner ID in ``busy`` answers JobStillRunning,
    one in ``failing`` a transient error, any other is appended to ``removed``.

    ``credentials``: what the client was built with, when a pool built it (:meth:`pool_factory`).
    """

    def __init__(
        self,
        log: list[tuple[Any, ...]] | None = None,
        clock: FakeClock | None = None,
        *,
        busy: frozenset[int] = frozenset(),
        failing: frozenset[int] = frozenset(),
        credentials: Credentials | None = None,
    ) -> None:
        self.log: list[tuple[Any, ...]] = [] if log is None else log
        self.clock = clock or FakeClock()
        self.busy, self.failing = busy, failing
        self.credentials = credentials
        self.removed: list[int] = []
        self.under_way = self.most_at_once = 0
        self.create_script: deque[Exception] = deque()
        self.poll_script: deque[Message | Exception | None] = deque()
        self.ack_script: deque[Exception] = deque()
        self.acquire_script: deque[Exception] = deque()
        self.refresh_script: deque[Exception] = deque()
        self.delete_session_script: deque[Exception] = deque()
        self.poll_forever: Exception | Message | None = None
        self.create_forever: Exception | None = None
        self.acquire_forever: Exception | None = None
        self.session_stats = Statistics(total_assigned_jobs=0, total_available_jobs=0)
        self.ids = itertools.count(1)
        self.deleted_sessions: list[str] = []
        self.times: dict[str, list[float]] = {}

    @classmethod
    def pool_factory(cls, built: list[FakeActions]) -> Callable[..., FakeActions]:
        """A client factory for :class:`arc_scaleset.github.ActionsClientPool`: every client it builds is a
        FakeActions holding the credentials it was given, appended to ``built``."""

        def build(config: GitHubConfig, credentials: Credentials, **_: Any) -> FakeActions:
            client = cls(credentials=credentials)
            built.append(client)
            return client

        return build

    def calls_at(self, name: str) -> list[float]:
        """The fake-clock times of every call named ``name``, in order."""
        return list(self.times.get(name, []))

    def _record(self, *entry: Any) -> None:
        self.log.append(entry)
        self.times.setdefault(entry[0], []).append(self.clock.monotonic())

    def _session(self) -> MessageSession:
        number = next(self.ids)
        return MessageSession(
            session_id=session(number),
            owner_name="pod-a",
            message_queue_url=f"https://broker.example/queue-{number}",
            message_queue_access_token=f"queue-token-{number}",
            statistics=self.session_stats,
        )

    async def admin_connection(self) -> AdminConnection:
        """Not scripted nor logged: the client makes it for its other calls, which are."""
        return AdminConnection(url="https://pipelines.example/tenant/", token="admin-token", expires_at=FAR_FUTURE)

    async def create_message_session(self, scale_set_id: int, owner: str) -> MessageSession:
        self._record("create_session", scale_set_id, owner)
        await asyncio.sleep(0)  # a real call yields; a fault that repeats must not starve the test
        if self.create_script:
            raise self.create_script.popleft()
        if self.create_forever is not None:
            raise self.create_forever.with_traceback(None)
        return self._session()

    async def refresh_message_session(self, scale_set_id: int, session_id: str) -> MessageSession:
        self._record("refresh_session", session_id)
        await asyncio.sleep(0)
        if self.refresh_script:
            raise self.refresh_script.popleft()
        fresh = self._session()
        fresh.session_id = session_id
        return fresh

    async def delete_message_session(self, scale_set_id: int, session_id: str) -> None:
        self._record("delete_session", session_id)
        if self.delete_session_script:
            raise self.delete_session_script.popleft()
        self.deleted_sessions.append(session_id)

    async def get_message(self, session: MessageSession, last_message_id: int, max_capacity: int) -> Message | None:
        self._record("poll", session.session_id, last_message_id, max_capacity)
        await asyncio.sleep(0)
        if not self.poll_script:
            if isinstance(self.poll_forever, Exception):
                raise self.poll_forever.with_traceback(None)
            if self.poll_forever is not None:
                return self.poll_forever
            await asyncio.Event().wait()  # a long poll that never ends (until cancelled)
        result = self.poll_script.popleft()
        if isinstance(result, Exception):
            raise result
        return result

    async def delete_message(self, session: MessageSession, message_id: int) -> None:
        self._record("ack", message_id)
        if self.ack_script:
            raise self.ack_script.popleft()

    async def acquire_jobs(self, session: MessageSession, scale_set_id: int, request_ids: Sequence[int]) -> list[int]:
        self._record("acquire", list(request_ids))
        if self.acquire_script:
            raise self.acquire_script.popleft()
        if self.acquire_forever is not None:
            raise self.acquire_forever.with_traceback(None)
        return list(request_ids)

    async def remove_runner(self, runner_id: int) -> None:
        self._record("remove_runner", runner_id)
        self.under_way += 1
        self.most_at_once = max(self.most_at_once, self.under_way)
        try:
            for _ in range(3):
                await asyncio.sleep(0)  # a turn of the loop: lets the other removals start (no timing involved)
            if runner_id in self.busy:
                raise JobStillRunning(method="DELETE", url=f"https://x/agents/{runner_id}", status=400)
            if runner_id in self.failing:
                raise TransientError(method="DELETE", url=f"https://x/agents/{runner_id}", status=503)
            self.removed.append(runner_id)
        finally:
            self.under_way -= 1

    async def aclose(self) -> None:
        return None


class FakeKube:
    """An API server that holds only Secrets: the calls a controller step makes, for its unit tests (the real
    API server is in tests/integration).

    ``get`` answers the Secrets in ``secrets`` (name -> string data; served base64-encoded, as the API server
    does) and NotFound for anything else; ``delete`` succeeds and appends the name to ``deleted``; ``patch``
    answers NotFound, since no other object exists.
    """

    def __init__(self, secrets: dict[str, dict[str, str]] | None = None) -> None:
        self.secrets: dict[str, dict[str, str]] = {} if secrets is None else secrets
        self.deleted: list[str] = []

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        if resource == SECRETS and name in self.secrets:
            encoded = {k: base64.b64encode(v.encode()).decode() for k, v in self.secrets[name].items()}
            return {"metadata": {"name": name, "namespace": namespace}, "data": encoded}
        raise kube_errors.NotFound(404, "NotFound", f"{name} not found")

    async def delete(self, resource: Resource, name: str, **_: Any) -> None:
        self.deleted.append(name)

    async def patch(self, resource: Resource, name: str, body: Any, **_: Any) -> None:
        raise kube_errors.NotFound(404, "NotFound", f"{name} not found")
