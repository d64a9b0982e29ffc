"""The Actions-service side of the sim, under ``/tenant/{tenant}/``: scale sets, runner groups, runners,
message sessions, the message queue and job acquisition.

Admin endpoints require an ``api-version`` query parameter and the tenant's admin token. The message queue
(GET/DELETE on the session's ``messageQueueUrl``) and ``acquirejobs`` require the session's queue token.
Errors are raised as :class:`~arc_scaleset_lab.sim.errors.ActionsError` and answered by the protocol middleware.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from arc_scaleset.clock import Clock
from arc_scaleset_lab.sim import errors
from arc_scaleset_lab.sim.actions_wire import scale_set_json, session_json
from arc_scaleset_lab.sim.address import SimAddress
from arc_scaleset_lab.sim.auth import Credentials
from arc_scaleset_lab.sim.http import Dialect, credential, json_response, no_content, protocol_route, read_json
from arc_scaleset_lab.sim.notify import ChangeNotifier
from arc_scaleset_lab.sim.state import JobState, ScaleSet, Session, SimState, job_message

_RUNTIME = "/tenant/{tenant}/_apis/runtime"
_SCALE_SETS = _RUNTIME + "/runnerscalesets"
_SCALE_SET = _SCALE_SETS + "/{scale_set_id}"
_AGENTS = "/tenant/{tenant}/_apis/distributedtask/pools/{pool}/agents"


class ActionsRoutes:
    """One method per Actions-service endpoint; :meth:`register` adds them to an application.

    ``get_message`` holds a poll for up to ``long_poll_seconds`` of ``clock``, waking on ``changes``.
    """

    def __init__(
        self,
        *,
        state: SimState,
        credentials: Credentials,
        address: SimAddress,
        changes: ChangeNotifier,
        clock: Clock,
        long_poll_seconds: float,
    ) -> None:
        self._state = state
        self._credentials = credentials
        self._address = address
        self._changes = changes
        self._clock = clock
        self._long_poll_seconds = long_poll_seconds

    def register(self, app: web.Application) -> None:
        # add_route, not add_get: these GET routes have no implicit HEAD twin.
        for method, path, handler in (
            ("GET", _SCALE_SETS, self.get_scale_sets),
            ("POST", _SCALE_SETS, self.create_scale_set),
            ("GET", _SCALE_SET, self.get_scale_set),
            ("PATCH", _SCALE_SET, self.update_scale_set),
            ("DELETE", _SCALE_SET, self.delete_scale_set),
            ("GET", _RUNTIME + "/runnergroups/", self.get_runner_groups),
            ("GET", _RUNTIME + "/runnergroups", self.get_runner_groups),
            ("POST", _SCALE_SET + "/generatejitconfig", self.generate_jit_config),
            ("POST", _SCALE_SET + "/sessions", self.create_session),
            ("PATCH", _SCALE_SET + "/sessions/{session_id}", self.refresh_session),
            ("DELETE", _SCALE_SET + "/sessions/{session_id}", self.delete_session),
            ("GET", _SCALE_SET + "/messages", self.get_message),
            ("DELETE", _SCALE_SET + "/messages/{message_id}", self.delete_message),
            ("POST", _SCALE_SET + "/acquirejobs", self.acquire_jobs),
            ("GET", _SCALE_SET + "/acquirablejobs", self.acquirable_jobs),
            ("GET", _AGENTS, self.get_runners),
            ("GET", _AGENTS + "/{runner_id}", self.get_runner),
            ("DELETE", _AGENTS + "/{runner_id}", self.remove_runner),
        ):
            app.router.add_route(method, path, handler)

    # ------------------------------------------------------------ scale sets and runner groups

    @protocol_route("get_scale_sets", Dialect.ACTIONS)
    async def get_scale_sets(self, request: web.Request) -> web.Response:
        tenant_id = self._authorize_admin(request)
        group = request.query.get("runnerGroupId")
        found = self._state.find_scale_sets(
            tenant_id,
            name=request.query.get("name"),
            runner_group_id=_int(group, "runnerGroupId") if group else None,
        )
        return json_response({"count": len(found), "value": [self._scale_set_json(s) for s in found]})

    @protocol_route("get_scale_set", Dialect.ACTIONS)
    async def get_scale_set(self, request: web.Request) -> web.Response:
        tenant_id = self._authorize_admin(request)
        return json_response(self._scale_set_json(self._state.scale_set(tenant_id, _scale_set_id(request))))

    @protocol_route("create_scale_set", Dialect.ACTIONS)
    async def create_scale_set(self, request: web.Request) -> web.Response:
        tenant_id = self._authorize_admin(request)
        body = await _scale_set_body(request)
        scale_set = self._state.create_scale_set(
            tenant_id,
            name=str(body.get("name") or ""),
            runner_group_id=_int(str(body.get("runnerGroupId") or 0), "runnerGroupId"),
            labels=_labels(body),
            disable_update=bool(_disable_update(body)),
        )
        return json_response(self._scale_set_json(scale_set))

    @protocol_route("update_scale_set", Dialect.ACTIONS)
    async def update_scale_set(self, request: web.Request) -> web.Response:
        tenant_id = self._authorize_admin(request)
        body = await _scale_set_body(request)
        # Zero values mean "unchanged", as Go's omitempty sends them.
        scale_set = self._state.update_scale_set(
            tenant_id,
            _scale_set_id(request),
            name=str(body.get("name") or "") or None,
            runner_group_id=_int(str(body.get("runnerGroupId") or 0), "runnerGroupId") or None,
            labels=_labels(body) or None,
            disable_update=_disable_update(body),
        )
        return json_response(self._scale_set_json(scale_set))

    @protocol_route("delete_scale_set", Dialect.ACTIONS)
    async def delete_scale_set(self, request: web.Request) -> web.Response:
        tenant_id = self._authorize_admin(request)
        self._state.delete_scale_set(tenant_id, _scale_set_id(request))
        return no_content()

    @protocol_route("get_runner_groups", Dialect.ACTIONS)
    async def get_runner_groups(self, request: web.Request) -> web.Response:
        self._authorize_admin(request)
        name = request.query.get("groupName")
        groups = self._state.runner_groups_named(name) if name else list(self._state.runner_groups.values())
        value = [g.to_json(self._state.runner_group_size(g.id)) for g in groups]
        return json_response({"count": len(value), "value": value})

    # ------------------------------------------------------------ runners

    @protocol_route("generate_jit_config", Dialect.ACTIONS)
    async def generate_jit_config(self, request: web.Request) -> web.Response:
        tenant_id = self._authorize_admin(request)
        body = await _body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("A JIT config request {name, workFolder} is required.")
        runner, encoded = self._state.generate_jit_config(
            tenant_id,
            _scale_set_id(request),
            name=str(body.get("name") or ""),
            work_folder=str(body.get("workFolder") or ""),
            service_url=self._address.tenant_url(tenant_id),
        )
        return json_response(
            {
                "runner": {"id": runner.id, "name": runner.name, "runnerScaleSetId": runner.scale_set_id},
                "encodedJITConfig": encoded,
            }
        )

    @protocol_route("get_runner", Dialect.ACTIONS)
    async def get_runner(self, request: web.Request) -> web.Response:
        tenant_id = self._authorize_admin(request)
        return json_response(self._state.runner(tenant_id, _runner_id(request)).to_json())

    @protocol_route("get_runners", Dialect.ACTIONS)
    async def get_runners(self, request: web.Request) -> web.Response:
        tenant_id = self._authorize_admin(request)
        name = request.query.get("agentName")
        found = (
            self._state.runners_named(tenant_id, name)
            if name
            else [r for r in self._state.runners.values() if r.tenant_id == tenant_id]
        )
        return json_response({"count": len(found), "value": [r.to_json() for r in found]})

    @protocol_route("remove_runner", Dialect.ACTIONS)
    async def remove_runner(self, request: web.Request) -> web.Response:
        tenant_id = self._authorize_admin(request)
        self._state.remove_runner(tenant_id, _runner_id(request))
        return no_content()

    # ------------------------------------------------------------ sessions

    @protocol_route("create_session", Dialect.ACTIONS)
    async def create_session(self, request: web.Request) -> web.Response:
        tenant_id = self._authorize_admin(request)
        body = await _body(request)
        owner = body.get("ownerName") if isinstance(body, dict) else None
        if not isinstance(owner, str) or not owner:
            raise errors.bad_request("ownerName is required.")
        session = self._state.create_session(tenant_id, _scale_set_id(request), owner=owner)
        return json_response(session_json(self._state, self._address, session, tenant_id))

    @protocol_route("refresh_session", Dialect.ACTIONS)
    async def refresh_session(self, request: web.Request) -> web.Response:
        tenant_id = self._authorize_admin(request)
        session = self._state.refresh_session(tenant_id, _scale_set_id(request), request.match_info["session_id"])
        return json_response(session_json(self._state, self._address, session, tenant_id))

    @protocol_route("delete_session", Dialect.ACTIONS)
    async def delete_session(self, request: web.Request) -> web.Response:
        tenant_id = self._authorize_admin(request)
        self._state.delete_session(tenant_id, _scale_set_id(request), request.match_info["session_id"])
        return no_content()

    # ------------------------------------------------------------ message queue

    @protocol_route("get_message", Dialect.ACTIONS)
    async def get_message(self, request: web.Request) -> web.Response:
        """The oldest unacked message, or a long poll that ends with 202 when none comes in time."""
        session = self._authorize_queue(request)
        accept = request.headers.get("Accept", "")
        if "api-version=" not in accept and "api-version" not in request.query:
            raise errors.bad_request("The Accept header must carry api-version (application/json; api-version=...).")
        capacity = request.headers.get("X-ScaleSetMaxCapacity")
        if capacity is not None:
            self._state.advertise_capacity(session, _int(capacity, "X-ScaleSetMaxCapacity"))
        last = request.query.get("lastMessageId")
        last_message_id = _int(last, "lastMessageId") if last else 0
        scale_set_id = session.scale_set_id
        deadline = self._clock.monotonic() + self._long_poll_seconds
        # A poll in flight keeps the session alive: it is not "idle" while a listener waits on it.
        session.polls_in_flight += 1
        try:
            while True:
                # The session may be evicted or replaced while the poll is held.
                if self._state.sessions.get(scale_set_id) is not session:
                    raise errors.session_not_found(session.id)
                message = self._state.next_message(scale_set_id, last_message_id=last_message_id)
                if message is not None:
                    return json_response(message.to_json())
                remaining = deadline - self._clock.monotonic()
                if remaining <= 0:
                    return web.Response(status=202)
                await self._changes.wait(remaining, clock=self._clock)
        finally:
            session.polls_in_flight -= 1
            session.last_seen = self._clock.now()

    @protocol_route("delete_message", Dialect.ACTIONS)
    async def delete_message(self, request: web.Request) -> web.Response:
        session = self._authorize_queue(request)
        self._state.ack_message(session.scale_set_id, _int(request.match_info["message_id"], "message id"))
        return no_content()

    # ------------------------------------------------------------ jobs

    @protocol_route("acquire_jobs", Dialect.ACTIONS)
    async def acquire_jobs(self, request: web.Request) -> web.Response:
        self._tenant(request)
        if not request.query.get("api-version"):
            raise errors.bad_request("The api-version query parameter is required.")
        # Authorised by the queue token alone: the request carries no sessionId.
        session = self._state.authorize_queue(_scale_set_id(request), None, credential(request, "Bearer"))
        body = await _body(request)
        if not isinstance(body, list) or not all(isinstance(i, int) for i in body):
            raise errors.bad_request("The body must be a JSON array of runner request ids.")
        acquired = self._state.acquire_jobs(session.scale_set_id, body)
        return json_response({"count": len(acquired), "value": acquired})

    @protocol_route("acquirable_jobs", Dialect.ACTIONS)
    async def acquirable_jobs(self, request: web.Request) -> web.Response:
        tenant_id = self._authorize_admin(request)
        jobs = self._state.acquirable_jobs(tenant_id, _scale_set_id(request))
        value = [job_message("JobAvailable", j) for j in jobs if j.state == JobState.AVAILABLE]
        return json_response({"count": len(value), "value": value})

    # ------------------------------------------------------------ checks

    def _tenant(self, request: web.Request) -> int:
        """The request's tenant id; 404 when no such tenant exists."""
        tenant_id = _int(request.match_info["tenant"], "tenant")
        self._state.tenant(tenant_id)
        return tenant_id

    def _authorize_admin(self, request: web.Request) -> int:
        """The tenant of an admin request, after the api-version (400) and admin-token (401) checks."""
        tenant_id = self._tenant(request)
        if not request.query.get("api-version"):
            raise errors.ActionsError(
                400,
                "Microsoft.VisualStudio.Services.WebApi.VssVersionNotSpecifiedException",
                "The api-version query parameter is required.",
            )
        self._credentials.check_admin_token(credential(request, "Bearer"), tenant_id)
        return tenant_id

    def _authorize_queue(self, request: web.Request) -> Session:
        """The session of a message-queue request: 404 when it is gone, 401 for a bad or expired queue token."""
        self._tenant(request)
        return self._state.authorize_queue(
            _scale_set_id(request), request.query.get("sessionId"), credential(request, "Bearer")
        )

    def _scale_set_json(self, scale_set: ScaleSet) -> dict[str, Any]:
        return scale_set_json(self._state, self._address, scale_set)


# ---------------------------------------------------------------- request parsing, in the Actions dialect


def _int(value: str | None, what: str) -> int:
    try:
        return int(value or "")
    except ValueError:
        raise errors.bad_request(f"{what} must be an integer, got {value!r}.") from None


def _scale_set_id(request: web.Request) -> int:
    return _int(request.match_info["scale_set_id"], "runner scale set id")


def _runner_id(request: web.Request) -> int:
    return _int(request.match_info["runner_id"], "runner id")


async def _body(request: web.Request) -> Any:
    return await read_json(request, invalid=lambda: errors.bad_request("The request body is not valid JSON."))


async def _scale_set_body(request: web.Request) -> dict[str, Any]:
    body = await _body(request)
    if not isinstance(body, dict):
        raise errors.bad_request("A runner scale set object is required.")
    return body


def _labels(body: dict[str, Any]) -> list[dict[str, str]]:
    labels = body.get("labels") or []
    if not isinstance(labels, list) or not all(isinstance(lb, dict) for lb in labels):
        raise errors.bad_request("labels must be a list of {type, name} objects.")
    return [{"type": str(lb.get("type") or ""), "name": str(lb.get("name") or "")} for lb in labels]


def _disable_update(body: dict[str, Any]) -> bool | None:
    """``RunnerSetting.disableUpdate`` when the body sets it, else None."""
    setting = body.get("RunnerSetting")
    if isinstance(setting, dict) and "disableUpdate" in setting:
        return bool(setting["disableUpdate"])
    return None
