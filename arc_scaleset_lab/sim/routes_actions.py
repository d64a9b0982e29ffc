"""The Actions-service side of the sim: every row of spec 4.4, under ``/tenant/{tenant}/``.

Admin endpoints require an ``api-version`` query parameter and the tenant's admin token. The message queue
(GET/DELETE on the session's ``messageQueueUrl``) and ``acquirejobs`` require the session's queue token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from arc_scaleset_lab.sim import errors
from arc_scaleset_lab.sim.routes_github import credential
from arc_scaleset_lab.sim.server import json_response, named
from arc_scaleset_lab.sim.state import JobState, ScaleSet, Session, job_message, rfc3339

if TYPE_CHECKING:
    from arc_scaleset_lab.sim.server import SimulatedGitHub

_RUNTIME = "/tenant/{tenant}/_apis/runtime"
_AGENTS = "/tenant/{tenant}/_apis/distributedtask/pools/{pool}/agents"


def _int(value: str | None, what: str) -> int:
    try:
        return int(value or "")
    except ValueError:
        raise errors.bad_request(f"{what} must be an integer, got {value!r}.") from None


async def _body(request: web.Request) -> Any:
    raw = (await request.read()).removeprefix(b"\xef\xbb\xbf")
    if not raw.strip():
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise errors.bad_request("The request body is not valid JSON.") from None


def add_routes(app: web.Application, sim: SimulatedGitHub) -> None:
    state = sim.state

    def tenant_of(request: web.Request) -> int:
        tenant_id = _int(request.match_info["tenant"], "tenant")
        state.tenant(tenant_id)
        return tenant_id

    def admin(request: web.Request) -> int:
        """The tenant of an admin request, after the api-version and admin-token checks."""
        tenant_id = tenant_of(request)
        if not request.query.get("api-version"):
            raise errors.ActionsError(
                400,
                "Microsoft.VisualStudio.Services.WebApi.VssVersionNotSpecifiedException",
                "The api-version query parameter is required.",
            )
        sim.credentials.check_admin_token(credential(request, "Bearer"), tenant_id)
        return tenant_id

    def scale_set_json(scale_set: ScaleSet) -> dict[str, Any]:
        base = sim.tenant_url(scale_set.tenant_id)
        return {
            "id": scale_set.id,
            "name": scale_set.name,
            "runnerGroupId": scale_set.runner_group_id,
            "runnerGroupName": scale_set.runner_group_name,
            "labels": [dict(label) for label in scale_set.labels],
            "RunnerSetting": {"disableUpdate": True} if scale_set.disable_update else {},
            "createdOn": rfc3339(scale_set.created_on),
            "runnerJitConfigUrl": f"{base}_apis/runtime/runnerscalesets/{scale_set.id}/generatejitconfig",
            "statistics": state.statistics(scale_set.id).to_json(),
        }

    def session_json(session: Session, tenant_id: int) -> dict[str, Any]:
        base = sim.tenant_url(tenant_id)
        return {
            "sessionId": session.id,
            "ownerName": session.owner,
            "runnerScaleSet": scale_set_json(state.scale_sets[session.scale_set_id]),
            "messageQueueUrl": (
                f"{base}_apis/runtime/runnerscalesets/{session.scale_set_id}/messages?sessionId={session.id}"
            ),
            "messageQueueAccessToken": session.queue_token,
            "statistics": state.statistics(session.scale_set_id).to_json(),
        }

    def scale_set_id_of(request: web.Request) -> int:
        return _int(request.match_info["scale_set_id"], "runner scale set id")

    # ------------------------------------------------------------ scale sets

    @named("get_scale_sets")
    async def get_scale_sets(request: web.Request) -> web.Response:
        tenant_id = admin(request)
        group = request.query.get("runnerGroupId")
        found = state.find_scale_sets(
            tenant_id,
            name=request.query.get("name"),
            runner_group_id=_int(group, "runnerGroupId") if group else None,
        )
        return json_response({"count": len(found), "value": [scale_set_json(s) for s in found]})

    @named("get_scale_set")
    async def get_scale_set(request: web.Request) -> web.Response:
        tenant_id = admin(request)
        return json_response(scale_set_json(state.scale_set(tenant_id, scale_set_id_of(request))))

    def labels_of(body: dict[str, Any]) -> list[dict[str, str]]:
        labels = body.get("labels") or []
        if not isinstance(labels, list) or not all(isinstance(lb, dict) for lb in labels):
            raise errors.bad_request("labels must be a list of {type, name} objects.")
        return [{"type": str(lb.get("type") or ""), "name": str(lb.get("name") or "")} for lb in labels]

    def disable_update_of(body: dict[str, Any]) -> bool | None:
        setting = body.get("RunnerSetting")
        if isinstance(setting, dict) and "disableUpdate" in setting:
            return bool(setting["disableUpdate"])
        return None

    @named("create_scale_set")
    async def create_scale_set(request: web.Request) -> web.Response:
        tenant_id = admin(request)
        body = await _body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("A runner scale set object is required.")
        scale_set = state.create_scale_set(
            tenant_id,
            name=str(body.get("name") or ""),
            runner_group_id=_int(str(body.get("runnerGroupId") or 0), "runnerGroupId"),
            labels=labels_of(body),
            disable_update=bool(disable_update_of(body)),
        )
        return json_response(scale_set_json(scale_set))

    @named("update_scale_set")
    async def update_scale_set(request: web.Request) -> web.Response:
        tenant_id = admin(request)
        body = await _body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("A runner scale set object is required.")
        scale_set = state.update_scale_set(
            tenant_id,
            scale_set_id_of(request),
            name=str(body.get("name") or "") or None,
            runner_group_id=_int(str(body.get("runnerGroupId") or 0), "runnerGroupId") or None,
            labels=labels_of(body) or None,
            disable_update=disable_update_of(body),
        )
        return json_response(scale_set_json(scale_set))

    @named("delete_scale_set")
    async def delete_scale_set(request: web.Request) -> web.Response:
        tenant_id = admin(request)
        state.delete_scale_set(tenant_id, scale_set_id_of(request))
        return web.Response(status=204)

    @named("get_runner_groups")
    async def get_runner_groups(request: web.Request) -> web.Response:
        admin(request)
        name = request.query.get("groupName")
        groups = state.runner_groups_named(name) if name else list(state.runner_groups.values())
        value = [g.to_json(state.runner_group_size(g.id)) for g in groups]
        return json_response({"count": len(value), "value": value})

    # ------------------------------------------------------------ runners

    @named("generate_jit_config")
    async def generate_jit_config(request: web.Request) -> web.Response:
        tenant_id = admin(request)
        body = await _body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("A JIT config request {name, workFolder} is required.")
        runner, encoded = state.generate_jit_config(
            tenant_id,
            scale_set_id_of(request),
            name=str(body.get("name") or ""),
            work_folder=str(body.get("workFolder") or ""),
            service_url=sim.tenant_url(tenant_id),
        )
        return json_response(
            {
                "runner": {"id": runner.id, "name": runner.name, "runnerScaleSetId": runner.scale_set_id},
                "encodedJITConfig": encoded,
            }
        )

    @named("get_runner")
    async def get_runner(request: web.Request) -> web.Response:
        tenant_id = admin(request)
        return json_response(state.runner(tenant_id, _int(request.match_info["runner_id"], "runner id")).to_json())

    @named("get_runners")
    async def get_runners(request: web.Request) -> web.Response:
        tenant_id = admin(request)
        name = request.query.get("agentName")
        found = (
            state.runners_named(tenant_id, name)
            if name
            else [r for r in state.runners.values() if r.tenant_id == tenant_id]
        )
        return json_response({"count": len(found), "value": [r.to_json() for r in found]})

    @named("remove_runner")
    async def remove_runner(request: web.Request) -> web.Response:
        tenant_id = admin(request)
        state.remove_runner(tenant_id, _int(request.match_info["runner_id"], "runner id"))
        return web.Response(status=204)

    # ------------------------------------------------------------ sessions

    @named("create_session")
    async def create_session(request: web.Request) -> web.Response:
        tenant_id = admin(request)
        body = await _body(request)
        owner = body.get("ownerName") if isinstance(body, dict) else None
        if not isinstance(owner, str) or not owner:
            raise errors.bad_request("ownerName is required.")
        session = state.create_session(tenant_id, scale_set_id_of(request), owner=owner)
        return json_response(session_json(session, tenant_id))

    @named("refresh_session")
    async def refresh_session(request: web.Request) -> web.Response:
        tenant_id = admin(request)
        session = state.refresh_session(tenant_id, scale_set_id_of(request), request.match_info["session_id"])
        return json_response(session_json(session, tenant_id))

    @named("delete_session")
    async def delete_session(request: web.Request) -> web.Response:
        tenant_id = admin(request)
        state.delete_session(tenant_id, scale_set_id_of(request), request.match_info["session_id"])
        return web.Response(status=204)

    # ------------------------------------------------------------ message queue

    def queue_session(request: web.Request) -> Session:
        tenant_of(request)
        return state.authorize_queue(
            scale_set_id_of(request), request.query.get("sessionId"), credential(request, "Bearer")
        )

    @named("get_message")
    async def get_message(request: web.Request) -> web.Response:
        session = queue_session(request)
        accept = request.headers.get("Accept", "")
        if "api-version=" not in accept and "api-version" not in request.query:
            raise errors.bad_request("The Accept header must carry api-version (application/json; api-version=...).")
        capacity = request.headers.get("X-ScaleSetMaxCapacity")
        if capacity is not None:
            session.max_capacity = _int(capacity, "X-ScaleSetMaxCapacity")
        last = request.query.get("lastMessageId")
        last_message_id = _int(last, "lastMessageId") if last else 0
        scale_set_id = session.scale_set_id
        deadline = sim.clock.monotonic() + sim.config.long_poll_seconds
        session.polls_in_flight += 1
        try:
            while True:
                if state.sessions.get(scale_set_id) is not session:
                    raise errors.session_not_found(session.id)
                message = state.next_message(scale_set_id, last_message_id=last_message_id)
                if message is not None:
                    return json_response(message.to_json())
                remaining = deadline - sim.clock.monotonic()
                if remaining <= 0:
                    return web.Response(status=202)
                await sim.notifier.wait(remaining, clock=sim.clock)
        finally:
            session.polls_in_flight -= 1
            session.last_seen = sim.clock.now()

    @named("delete_message")
    async def delete_message(request: web.Request) -> web.Response:
        session = queue_session(request)
        state.ack_message(session.scale_set_id, _int(request.match_info["message_id"], "message id"))
        return web.Response(status=204)

    # ------------------------------------------------------------ jobs

    @named("acquire_jobs")
    async def acquire_jobs(request: web.Request) -> web.Response:
        tenant_of(request)
        if not request.query.get("api-version"):
            raise errors.bad_request("The api-version query parameter is required.")
        session = state.authorize_queue(scale_set_id_of(request), None, credential(request, "Bearer"))
        body = await _body(request)
        if not isinstance(body, list) or not all(isinstance(i, int) for i in body):
            raise errors.bad_request("The body must be a JSON array of runner request ids.")
        acquired = state.acquire_jobs(session.scale_set_id, body)
        return json_response({"count": len(acquired), "value": acquired})

    @named("acquirable_jobs")
    async def acquirable_jobs(request: web.Request) -> web.Response:
        tenant_id = admin(request)
        jobs = state.acquirable_jobs(tenant_id, scale_set_id_of(request))
        value = [job_message("JobAvailable", j) for j in jobs if j.state == JobState.AVAILABLE]
        return json_response({"count": len(value), "value": value})

    r = app.router
    r.add_get(_RUNTIME + "/runnerscalesets", get_scale_sets, allow_head=False)
    r.add_post(_RUNTIME + "/runnerscalesets", create_scale_set)
    r.add_get(_RUNTIME + "/runnerscalesets/{scale_set_id}", get_scale_set, allow_head=False)
    r.add_patch(_RUNTIME + "/runnerscalesets/{scale_set_id}", update_scale_set)
    r.add_delete(_RUNTIME + "/runnerscalesets/{scale_set_id}", delete_scale_set)
    r.add_get(_RUNTIME + "/runnergroups/", get_runner_groups, allow_head=False)
    r.add_get(_RUNTIME + "/runnergroups", get_runner_groups, allow_head=False)
    r.add_post(_RUNTIME + "/runnerscalesets/{scale_set_id}/generatejitconfig", generate_jit_config)
    r.add_post(_RUNTIME + "/runnerscalesets/{scale_set_id}/sessions", create_session)
    r.add_patch(_RUNTIME + "/runnerscalesets/{scale_set_id}/sessions/{session_id}", refresh_session)
    r.add_delete(_RUNTIME + "/runnerscalesets/{scale_set_id}/sessions/{session_id}", delete_session)
    r.add_get(_RUNTIME + "/runnerscalesets/{scale_set_id}/messages", get_message, allow_head=False)
    r.add_delete(_RUNTIME + "/runnerscalesets/{scale_set_id}/messages/{message_id}", delete_message)
    r.add_post(_RUNTIME + "/runnerscalesets/{scale_set_id}/acquirejobs", acquire_jobs)
    r.add_get(_RUNTIME + "/runnerscalesets/{scale_set_id}/acquirablejobs", acquirable_jobs, allow_head=False)
    r.add_get(_AGENTS, get_runners, allow_head=False)
    r.add_get(_AGENTS + "/{runner_id}", get_runner, allow_head=False)
    r.add_delete(_AGENTS + "/{runner_id}", remove_runner)
