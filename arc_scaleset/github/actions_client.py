"""The Actions-service client: runner scale sets, runner groups, JIT configs, runners, message sessions, jobs.

Paths, query parameters, headers and JSON field names are the service's (docs/github.md). Every call has a
timeout; retries of transient failures are bounded (see ``_transport``); failures are typed
(:mod:`arc_scaleset.github.errors`). Two refresh-once rules:

- an Actions-service call answered 401 refreshes the admin token and is repeated once;
- a session-bound call (get/delete message, acquire jobs) answered 401 refreshes the *session* (new queue
  URL and token, updated in place on the :class:`MessageSession` passed in) and is repeated once.

Every secret the client is given or receives (credentials, tokens, queue tokens, JIT configs) is masked out
of its error texts for as long as the secret can be valid (:mod:`._secrets`); a JIT config is forgotten
when its runner is removed through this client.

Use as ``async with ActionsClient(...) as client:``, or keep one in an :class:`ActionsClientPool` and close
the pool at shutdown.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Collection, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import parse_qsl, quote_plus, urlencode, urlsplit, urlunsplit

import msgspec
import orjson

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.github._auth import AdminConnection, AuthChain
from arc_scaleset.github._response import Response
from arc_scaleset.github._secrets import JIT_CONFIG_RETENTION, jwt_expiry
from arc_scaleset.github._transport import HttpTransport, SharedSessions
from arc_scaleset.github.config_url import GitHubConfig
from arc_scaleset.github.credentials import Credentials
from arc_scaleset.github.errors import (
    ActionsError,
    FatalError,
    MessageQueueTokenExpired,
    NotFound,
    SessionConflict,
    SessionNotFound,
    TransientError,
    Unauthorized,
    UnreadableMessage,
)
from arc_scaleset.github.models import (
    NIL_UUID,
    AcquirableJob,
    JitConfig,
    Label,
    ListResponse,
    Message,
    MessageFormatError,
    MessageSession,
    RunnerGroup,
    RunnerReference,
    RunnerScaleSet,
    RunnerSetting,
    ServiceModel,
    from_service,
    parse_message,
)
from arc_scaleset.github.system_info import SystemInfo
from arc_scaleset.github.transport_options import DEFAULT_TRANSPORT, TransportOptions

# Session-bound calls: 401 = the queue token expired (refresh the session); 404 = the session was evicted.
_SESSION_BOUND: Mapping[int, type[ActionsError]] = {401: MessageQueueTokenExpired, 404: SessionNotFound}

_M = TypeVar("_M", bound=ServiceModel)

API_VERSION = "6.0-preview"
JSON = "application/json"


def build_service_url(base: str, relative: str) -> str:
    """``relative`` (path and optional query) joined to the service ``base``, with ``api-version`` added.

    The query is the union of the base's and the relative path's, re-encoded like Go's ``url.Values.Encode``:
    keys sorted, values percent-encoded (``+`` for space).
    """
    base_parts = urlsplit(base)
    rel_parts = urlsplit(relative)
    path = base_parts.path.rstrip("/") + "/" + rel_parts.path.lstrip("/")
    pairs = parse_qsl(base_parts.query, keep_blank_values=True) + parse_qsl(rel_parts.query, keep_blank_values=True)
    if not any(key == "api-version" for key, _ in pairs):
        pairs.append(("api-version", API_VERSION))
    return urlunsplit((base_parts.scheme, base_parts.netloc, path, encode_query(pairs), ""))


def encode_query(pairs: Sequence[tuple[str, str]]) -> str:
    """Go's ``url.Values.Encode``: sorted by key (stable for repeated keys), ``QueryEscape``-d."""
    return urlencode(sorted(pairs, key=lambda pair: pair[0]), quote_via=quote_plus)


class ActionsClient:
    """A client for one config URL and one set of credentials. Safe to share between tasks of one loop."""

    def __init__(
        self,
        config: GitHubConfig,
        credentials: Credentials,
        *,
        system_info: SystemInfo,
        transport: TransportOptions = DEFAULT_TRANSPORT,
        clock: Clock = REAL_CLOCK,
        long_poll_timeout: float = 70.0,
        rng: random.Random | None = None,
        shared_sessions: SharedSessions | None = None,
    ) -> None:
        """``transport`` is how the requests travel (CA, proxy, deadlines, retries, response limit);
        ``long_poll_timeout`` must exceed the service's hold time (~50 s) so an idle poll ends in 202; ``rng``
        draws the jitter of retry waits; ``shared_sessions``: connection pools shared with other clients of the
        process (:class:`SharedSessions`; the caller closes it), instead of a pool of the client's own.

        Raises ``ValueError`` when ``transport.root_ca_pem`` is not a PEM certificate bundle.
        """
        self.config = config
        self.system_info = system_info
        self._clock = clock
        self.long_poll_timeout = long_poll_timeout
        self._user_agent = system_info.user_agent()
        self._transport = HttpTransport(transport, clock=clock, rng=rng, shared=shared_sessions)
        self._auth = AuthChain(
            config=config, credentials=credentials, transport=self._transport, user_agent=self._user_agent, clock=clock
        )

    def __repr__(self) -> str:
        return f"ActionsClient(config_url={self.config.url!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connections. The client may not be used afterwards."""
        await self._transport.aclose()

    # ---- the admin connection ------------------------------------------------------------------------------

    async def admin_connection(self) -> AdminConnection:
        """The Actions-service URL and admin token (refreshed when missing or expiring within 60 s)."""
        return await self._auth.admin()

    async def refresh_admin_connection(self) -> AdminConnection:
        """A new admin token now, whatever the current one's expiry (a standby listener keeps its token fresh
        ahead of use: docs/listener.md, "Standby listener")."""
        return await self._auth.admin(force=True)

    async def _admin_request(
        self,
        method: str,
        relative: str,
        *,
        body: Any = None,
        expected: Collection[int] = (200,),
        overrides: Mapping[int, type[ActionsError]] | None = None,
        bearer: str | None = None,
    ) -> Response:
        """A request to the Actions service; a 401 refreshes the admin token and repeats the request once.

        ``bearer`` replaces the admin token (acquire-jobs is authorised by the queue token); then a 401 is
        returned to the caller as :class:`Unauthorized` for its own refresh rule.
        """
        payload = None if body is None else orjson.dumps(body)
        for attempt in (1, 2):
            admin = await self._auth.admin(force=attempt == 2)
            headers = {
                "Authorization": f"Bearer {bearer or admin.token}",
                "Content-Type": JSON,
                "User-Agent": self._user_agent,
            }
            try:
                return await self._transport.request(
                    method,
                    build_service_url(admin.url, relative),
                    headers=headers,
                    body=payload,
                    expected=expected,
                    overrides=overrides,
                )
            except Unauthorized:
                if attempt == 2 or bearer is not None:
                    raise
        raise AssertionError("unreachable")

    # ---- runner scale sets ---------------------------------------------------------------------------------

    async def get_runner_scale_set(self, runner_group_id: int, name: str) -> RunnerScaleSet | None:
        """The scale set called ``name`` in the runner group, or ``None`` when there is none."""
        query = encode_query([("runnerGroupId", str(runner_group_id)), ("name", name)])
        response = await self._admin_request("GET", f"_apis/runtime/runnerscalesets?{query}")
        items = _list(response).value
        if not items:
            return None
        if len(items) > 1:
            raise _unexpected(response, f'multiple runner scale sets found with name "{name}"')
        return _validate(response, RunnerScaleSet, items[0])

    async def get_runner_scale_set_by_id(self, scale_set_id: int) -> RunnerScaleSet:
        """The scale set with this ID; :class:`NotFound` when it does not exist."""
        response = await self._admin_request("GET", f"_apis/runtime/runnerscalesets/{scale_set_id}")
        return _model(response, RunnerScaleSet)

    async def create_runner_scale_set(
        self,
        *,
        name: str,
        runner_group_id: int,
        labels: Sequence[str] = (),
        disable_update: bool = True,
    ) -> RunnerScaleSet:
        """Create a scale set. Without ``labels`` its only label is its name (type ``System``)."""
        if not name:
            raise ValueError("a runner scale set needs a name")
        scale_set = RunnerScaleSet(
            name=name,
            runner_group_id=runner_group_id,
            labels=[Label(name=label) for label in (labels or [name])],
            runner_setting=RunnerSetting(disable_update=disable_update),
        )
        response = await self._admin_request("POST", "_apis/runtime/runnerscalesets", body=scale_set.request_body())
        return _model(response, RunnerScaleSet)

    async def update_runner_scale_set(
        self,
        scale_set_id: int,
        *,
        name: str | None = None,
        runner_group_id: int | None = None,
        labels: Sequence[str] | None = None,
    ) -> RunnerScaleSet:
        """Change a scale set's name, runner group and/or labels (only the given fields are sent)."""
        patch = RunnerScaleSet(
            name=name or "",
            runner_group_id=runner_group_id or 0,
            labels=[Label(name=label) for label in labels] if labels else [],
        )
        response = await self._admin_request(
            "PATCH", f"_apis/runtime/runnerscalesets/{scale_set_id}", body=patch.request_body()
        )
        return _model(response, RunnerScaleSet)

    async def delete_runner_scale_set(self, scale_set_id: int) -> None:
        """Delete a scale set; :class:`NotFound` when it is already gone (callers may treat that as done)."""
        await self._admin_request("DELETE", f"_apis/runtime/runnerscalesets/{scale_set_id}", expected=(204, 200))

    # ---- runner groups ---------------------------------------------------------------------------------------

    async def get_runner_group_by_name(self, name: str) -> RunnerGroup:
        """The runner group called ``name``; :class:`NotFound` when there is none."""
        query = encode_query([("groupName", name)])
        response = await self._admin_request("GET", f"_apis/runtime/runnergroups/?{query}")
        items = _list(response).value
        if not items:
            raise _not_found(response, f'no runner group found with name "{name}"')
        if len(items) > 1:
            raise _unexpected(response, f'multiple runner group found with name "{name}"')
        return _validate(response, RunnerGroup, items[0])

    # ---- runners ---------------------------------------------------------------------------------------------

    async def generate_jit_runner_config(self, scale_set_id: int, *, name: str, work_folder: str = "") -> JitConfig:
        """Register a runner called ``name`` and return its JIT config; :class:`RunnerExists` on a name clash."""
        response = await self._admin_request(
            "POST",
            f"_apis/runtime/runnerscalesets/{scale_set_id}/generatejitconfig",
            body={"name": name, "workFolder": work_folder},
        )
        config = _model(response, JitConfig)
        self._transport.redact.add(
            config.encoded_jit_config,
            expires_at=self._clock.now() + JIT_CONFIG_RETENTION,
            tag=_jit_tag(config.runner.id),
        )
        return config

    async def get_runner(self, runner_id: int) -> RunnerReference:
        """The runner with this ID; :class:`NotFound` when it does not exist."""
        response = await self._admin_request("GET", f"_apis/distributedtask/pools/0/agents/{runner_id}")
        return _model(response, RunnerReference)

    async def get_runner_by_name(self, name: str) -> RunnerReference | None:
        """The runner called ``name``, or ``None``."""
        query = encode_query([("agentName", name)])
        response = await self._admin_request("GET", f"_apis/distributedtask/pools/0/agents?{query}")
        items = _list(response).value
        if not items:
            return None
        if len(items) > 1:
            raise _unexpected(response, f'multiple runners found with name "{name}"')
        return _validate(response, RunnerReference, items[0])

    async def remove_runner(self, runner_id: int) -> None:
        """Unregister a runner. :class:`JobStillRunning` while it runs a job; :class:`RunnerNotFound` if gone."""
        try:
            await self._admin_request(
                "DELETE", f"_apis/distributedtask/pools/0/agents/{runner_id}", expected=(204, 200)
            )
        except NotFound:
            self._transport.redact.forget(_jit_tag(runner_id))
            raise
        # The runner's JIT config died with the registration: no need to mask it any longer.
        self._transport.redact.forget(_jit_tag(runner_id))

    # ---- message sessions ------------------------------------------------------------------------------------

    async def create_message_session(self, scale_set_id: int, owner: str) -> MessageSession:
        """Open the scale set's message session; :class:`SessionConflict` while another session holds it."""
        response = await self._admin_request(
            "POST",
            f"_apis/runtime/runnerscalesets/{scale_set_id}/sessions",
            body={"sessionId": NIL_UUID, "ownerName": owner},
            overrides={409: SessionConflict},
        )
        return self._session(response, scale_set_id)

    async def refresh_message_session(self, scale_set_id: int, session_id: str) -> MessageSession:
        """A fresh queue URL, queue token and statistics for an existing session (``ValueError``: the ID is no
        UUID)."""
        response = await self._admin_request("PATCH", _session_path(scale_set_id, session_id))
        return self._session(response, scale_set_id)

    async def delete_message_session(self, scale_set_id: int, session_id: str) -> None:
        """Close a session so that a new listener can open one at once (``ValueError``: the ID is no UUID)."""
        await self._admin_request("DELETE", _session_path(scale_set_id, session_id), expected=(204, 200))

    def _session(self, response: Response, scale_set_id: int) -> MessageSession:
        """The session in a create or refresh answer. An answer that is no usable session (not JSON, fields of
        the wrong type, no session ID, queue URL or queue token) is a :class:`TransientError`, never a
        :class:`FatalError`: the service accepted the request, and a caller that tries again later may get a
        good answer (a proxy's page in place of the service's, a truncated body), where a FatalError would end
        the listener."""
        try:
            session = _model(response, MessageSession)
        except FatalError as exc:
            raise _no_usable_session(response, exc.detail) from None
        missing = [
            name
            for name, value in (
                ("sessionId", session.session_id if session.session_id != NIL_UUID else ""),
                ("messageQueueUrl", session.message_queue_url),
                ("messageQueueAccessToken", session.message_queue_access_token),
            )
            if not value
        ]
        if missing:
            raise _no_usable_session(response, f"the answer has no {', '.join(missing)}")
        session._scale_set_id = scale_set_id
        token = session.message_queue_access_token
        self._transport.redact.add(token, expires_at=jwt_expiry(token))
        return session

    async def _refresh_in_place(self, session: MessageSession) -> None:
        fresh = await self.refresh_message_session(session.scale_set_id, session.session_id)
        session.replace_with(fresh)

    async def get_message(self, session: MessageSession, last_message_id: int, max_capacity: int) -> Message | None:
        """Long-poll the session's queue: the next message after ``last_message_id``, or ``None`` (202).

        ``max_capacity`` (the scale set's maxRunners) goes in ``X-ScaleSetMaxCapacity``. On 401 the session
        is refreshed in place and the poll repeated once; a second 401 raises :class:`MessageQueueTokenExpired`.
        """
        if max_capacity < 0:
            raise ValueError("max_capacity must not be negative")
        for attempt in (1, 2):
            url = _with_query(
                session.message_queue_url, {"lastMessageId": str(last_message_id)} if last_message_id > 0 else {}
            )
            headers = {
                "Accept": f"application/json; api-version={API_VERSION}",
                "Authorization": f"Bearer {session.message_queue_access_token}",
                "X-ScaleSetMaxCapacity": str(max_capacity),
                "User-Agent": self._user_agent,
            }
            try:
                response = await self._transport.request(
                    "GET",
                    url,
                    headers=headers,
                    expected=(200, 202),
                    time_limit=self.long_poll_timeout,
                    overrides=_SESSION_BOUND,
                )
            except MessageQueueTokenExpired:
                if attempt == 2:
                    raise
                await self._refresh_in_place(session)
                continue
            if response.status == 202 or not response.body.strip():
                return None
            return _queue_message(response)
        raise AssertionError("unreachable")

    async def delete_message(self, session: MessageSession, message_id: int) -> None:
        """Acknowledge a message so the queue does not deliver it again (401 → refresh session, once)."""
        for attempt in (1, 2):
            parts = urlsplit(session.message_queue_url)
            url = urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/{message_id}"))
            headers = {
                "Authorization": f"Bearer {session.message_queue_access_token}",
                "Content-Type": JSON,
                "User-Agent": self._user_agent,
            }
            try:
                await self._transport.request(
                    "DELETE", url, headers=headers, expected=(204, 200), overrides=_SESSION_BOUND
                )
                return
            except MessageQueueTokenExpired:
                if attempt == 2:
                    raise
                await self._refresh_in_place(session)

    async def acquire_jobs(self, session: MessageSession, scale_set_id: int, request_ids: Sequence[int]) -> list[int]:
        """Claim jobs for the scale set; returns the runner request IDs actually acquired."""
        if not request_ids:
            return []
        for attempt in (1, 2):
            try:
                response = await self._admin_request(
                    "POST",
                    f"_apis/runtime/runnerscalesets/{scale_set_id}/acquirejobs",
                    body=list(request_ids),
                    bearer=session.message_queue_access_token,
                    overrides=_SESSION_BOUND,
                )
                acquired = _list(response).value
                # bool is an int in Python, never in the service's JSON.
                if not all(isinstance(value, int) and not isinstance(value, bool) for value in acquired):
                    raise _unexpected(response, "the acquired jobs are not a list of runner request IDs")
                return list(acquired)
            except MessageQueueTokenExpired:
                if attempt == 2:
                    raise
                await self._refresh_in_place(session)
        raise AssertionError("unreachable")

    async def get_acquirable_jobs(self, scale_set_id: int) -> list[AcquirableJob]:
        """Jobs waiting for the scale set (not needed by the message loop; a diagnostic and fallback)."""
        response = await self._admin_request("GET", f"_apis/runtime/runnerscalesets/{scale_set_id}/acquirablejobs")
        return [_validate(response, AcquirableJob, item) for item in _list(response).value]


def _session_path(scale_set_id: int, session_id: str) -> str:
    """The path of a message session. The ID may come from an annotation a team can write (a predecessor's
    session, docs/listener.md): anything but a UUID is refused before a request is made, so no text reaches a
    request path sent with the admin token."""
    try:
        canonical = str(uuid.UUID(session_id))
    except ValueError:
        canonical = ""
    # uuid.UUID also reads braces, a "urn:uuid:" prefix and misplaced hyphens: only the plain form is taken.
    if canonical != session_id.lower():
        raise ValueError("a message session ID is a UUID")
    return f"_apis/runtime/runnerscalesets/{scale_set_id}/sessions/{canonical}"


def _jit_tag(runner_id: int) -> tuple[str, int]:
    return ("jit-config", runner_id)


def _with_query(url: str, extra: Mapping[str, str]) -> str:
    if not extra:
        return url
    parts = urlsplit(url)
    pairs = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in extra]
    return urlunsplit(parts._replace(query=encode_query([*pairs, *extra.items()])))


def _queue_message(response: Response) -> Message:
    """The message in a queue answer. A message whose ID can be read but whose content cannot is
    :class:`UnreadableMessage` (acknowledge and skip it); an answer without a readable message ID is a
    :class:`TransientError` (nothing to acknowledge: poll again later). Never any other exception."""
    common: dict[str, Any] = {
        "method": response.method,
        "url": response.url,
        "status": response.status,
        "reason": response.reason,
    }
    try:
        payload = response.json()
    except orjson.JSONDecodeError:
        raise TransientError(**common, detail="the queue answered with a body that is not JSON") from None
    try:
        return parse_message(payload)
    except MessageFormatError as exc:
        if exc.message_id is None:
            raise TransientError(**common, detail=str(exc)) from None
        raise UnreadableMessage(message_id=exc.message_id, skip_reason=exc.reason, **common, detail=str(exc)) from None


def _json(response: Response) -> Any:
    try:
        return response.json()
    except orjson.JSONDecodeError:
        raise _unexpected(response, "response body is not JSON") from None


def _model(response: Response, model: type[_M]) -> _M:
    """The response body as ``model``; a body of the wrong shape is a :class:`FatalError`, not a traceback."""
    return _validate(response, model, _json(response))


def _validate(response: Response, model: type[_M], data: Any) -> _M:
    try:
        return from_service(model, data)
    except msgspec.ValidationError as exc:
        raise _unexpected(response, f"unexpected {model.__name__} in response: {exc}") from None


def _list(response: Response) -> ListResponse:
    return _validate(response, ListResponse, _json(response) or {})


def _no_usable_session(response: Response, detail: str) -> TransientError:
    return TransientError(
        method=response.method,
        url=response.url,
        status=response.status,
        reason=response.reason,
        detail=f"no usable message session in the answer: {detail}",
    )


def _unexpected(response: Response, detail: str) -> FatalError:
    return FatalError(
        method=response.method, url=response.url, status=response.status, reason=response.reason, detail=detail
    )


def _not_found(response: Response, detail: str) -> NotFound:
    return NotFound(
        method=response.method, url=response.url, status=response.status, reason=response.reason, detail=detail
    )
