"""The ``/_sim`` admin API: drive and inspect a sim running in another process.

Not part of the protocol: no faults, no request log, no auth (the sim listens on loopback). Errors are
``{"error": "..."}`` with 400/404. See the package docstring for the routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from arc_scaleset_lab.sim import errors
from arc_scaleset_lab.sim.auth import DEFAULT_PAT_SCOPES
from arc_scaleset_lab.sim.faults import FaultRule
from arc_scaleset_lab.sim.server import json_response

if TYPE_CHECKING:
    from arc_scaleset_lab.sim.server import SimulatedGitHub


def _fail(status: int, message: str) -> web.Response:
    return json_response({"error": message}, status=status)


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise web.HTTPBadRequest(text='{"error": "body is not JSON"}', content_type="application/json") from None
    if not isinstance(data, dict):
        raise web.HTTPBadRequest(text='{"error": "body must be an object"}', content_type="application/json")
    return data


def add_routes(app: web.Application, sim: SimulatedGitHub) -> None:
    async def stats(request: web.Request) -> web.Response:
        jobs = sim.jobs()
        by_state: dict[str, int] = {}
        for job in jobs:
            by_state[job.state.value] = by_state.get(job.state.value, 0) + 1
        return json_response(
            {
                "url": sim.url,
                "jobs": by_state,
                "runners": len(sim.runners()),
                "sessions": len(sim.sessions()),
                "scaleSets": {str(s.id): sim.statistics(s.id).to_json() for s in sim.scale_sets()},
                "requests": len(sim.requests),
            }
        )

    async def list_jobs(request: web.Request) -> web.Response:
        return json_response({"jobs": [j.to_json() for j in sim.jobs()]})

    async def list_runners(request: web.Request) -> web.Response:
        return json_response({"runners": [r.to_json() for r in sim.runners()]})

    async def list_sessions(request: web.Request) -> web.Response:
        return json_response(
            {
                "sessions": [
                    {
                        "sessionId": s.id,
                        "scaleSetId": s.scale_set_id,
                        "ownerName": s.owner,
                        "maxCapacity": s.max_capacity,
                        "pollsInFlight": s.polls_in_flight,
                    }
                    for s in sim.sessions()
                ]
            }
        )

    async def list_scale_sets(request: web.Request) -> web.Response:
        return json_response(
            {
                "scaleSets": [
                    {
                        "id": s.id,
                        "name": s.name,
                        "tenantId": s.tenant_id,
                        "runnerGroupId": s.runner_group_id,
                        "labels": s.labels,
                        "statistics": sim.statistics(s.id).to_json(),
                    }
                    for s in sim.scale_sets()
                ]
            }
        )

    async def enqueue(request: web.Request) -> web.Response:
        body = await _body(request)
        labels = body.get("labels") or body.get("scaleSet")
        if not labels or not isinstance(labels, str | list):
            return _fail(400, "labels (a list) or scaleSet (a name) is required")
        count = int(body.get("count", 1))
        try:
            ids = [
                sim.enqueue_job(
                    labels,
                    repository=str(body.get("repository", "org/repo")),
                    workflow_ref=body.get("workflowRef"),
                    display_name=body.get("displayName"),
                    duration=float(body.get("duration", 1.0)),
                    event_name=str(body.get("eventName", "push")),
                    result=str(body.get("result", "succeeded")),
                )
                for _ in range(count)
            ]
        except ValueError as error:
            return _fail(400, str(error))
        return json_response({"ids": ids})

    async def runner_online(request: web.Request) -> web.Response:
        try:
            runner = sim.runner_online(request.match_info["name"])
        except errors.ActionsError as error:
            return _fail(error.status, error.message)
        return json_response(runner.to_json())

    async def runner_exit(request: web.Request) -> web.Response:
        body = await _body(request)
        try:
            sim.runner_exit(request.match_info["name"], exit_code=int(body.get("exitCode", 0)))
        except errors.ActionsError as error:
            return _fail(error.status, error.message)
        return web.Response(status=204)

    async def runner_fail(request: web.Request) -> web.Response:
        body = await _body(request)
        event = sim.fail_runner(
            request.match_info["name"],
            exit_code=int(body.get("exitCode", 1)),
            reason=str(body.get("reason", "requested")),
        )
        return json_response(event.to_json())

    async def runner_events(request: web.Request) -> web.Response:
        after = int(request.query.get("after", "0"))
        wait = min(float(request.query.get("wait", "0")), 60.0)
        events = (
            await sim.next_runner_events(after=after, wait_seconds=wait) if wait > 0 else sim.runner_events(after=after)
        )
        return json_response({"events": [e.to_json() for e in events]})

    async def add_token(request: web.Request) -> web.Response:
        body = await _body(request)
        token = body.get("token")
        if not isinstance(token, str) or not token:
            return _fail(400, "token is required")
        sim.add_token(token, scopes=frozenset(body.get("scopes") or DEFAULT_PAT_SCOPES))
        return web.Response(status=204)

    async def add_app(request: web.Request) -> web.Response:
        body = await _body(request)
        try:
            app_id, installation_id = int(body["appId"]), int(body["installationId"])
        except (KeyError, TypeError, ValueError):
            return _fail(400, "appId and installationId (integers) are required")
        app_ = sim.create_app(
            app_id=app_id,
            installation_id=installation_id,
            client_id=body.get("clientId"),
            public_key_pem=body.get("publicKeyPem"),
        )
        return json_response({"appId": app_.app_id, "clientId": app_.client_id, "privateKeyPem": app_.private_key_pem})

    async def add_runner_group(request: web.Request) -> web.Response:
        body = await _body(request)
        name = body.get("name")
        if not isinstance(name, str) or not name:
            return _fail(400, "name is required")
        return json_response({"id": sim.add_runner_group(name)})

    async def list_faults(request: web.Request) -> web.Response:
        return json_response({"faults": sim.faults.rules()})

    async def add_fault(request: web.Request) -> web.Response:
        try:
            rule_id = sim.faults.add(FaultRule.from_json(await _body(request)))
        except (TypeError, ValueError) as error:
            return _fail(400, str(error))
        return json_response({"id": rule_id})

    async def clear_faults(request: web.Request) -> web.Response:
        sim.faults.clear()
        return web.Response(status=204)

    async def remove_fault(request: web.Request) -> web.Response:
        if not sim.faults.remove(int(request.match_info["fault_id"])):
            return _fail(404, "no such fault")
        return web.Response(status=204)

    async def evict_session(request: web.Request) -> web.Response:
        evicted = sim.evict_session(int(request.match_info["scale_set_id"]))
        return json_response({"evicted": evicted})

    async def delete_scale_set(request: web.Request) -> web.Response:
        try:
            sim.delete_scale_set(int(request.match_info["scale_set_id"]))
        except errors.ActionsError as error:
            return _fail(error.status, error.message)
        return web.Response(status=204)

    async def expire_queue_tokens(request: web.Request) -> web.Response:
        sim.expire_queue_tokens()
        return web.Response(status=204)

    async def expire_admin_tokens(request: web.Request) -> web.Response:
        sim.expire_admin_tokens()
        return web.Response(status=204)

    r = app.router
    r.add_get("/_sim/stats", stats)
    r.add_get("/_sim/jobs", list_jobs)
    r.add_post("/_sim/jobs", enqueue)
    r.add_get("/_sim/runners", list_runners)
    r.add_post("/_sim/runners/{name}/online", runner_online)
    r.add_post("/_sim/runners/{name}/exit", runner_exit)
    r.add_post("/_sim/runners/{name}/fail", runner_fail)
    r.add_get("/_sim/runner-events", runner_events)
    r.add_get("/_sim/sessions", list_sessions)
    r.add_get("/_sim/scalesets", list_scale_sets)
    r.add_post("/_sim/scalesets/{scale_set_id}/evict-session", evict_session)
    r.add_delete("/_sim/scalesets/{scale_set_id}", delete_scale_set)
    r.add_post("/_sim/tokens", add_token)
    r.add_post("/_sim/apps", add_app)
    r.add_post("/_sim/runner-groups", add_runner_group)
    r.add_get("/_sim/faults", list_faults)
    r.add_post("/_sim/faults", add_fault)
    r.add_delete("/_sim/faults", clear_faults)
    r.add_delete("/_sim/faults/{fault_id}", remove_fault)
    r.add_post("/_sim/expire-queue-tokens", expire_queue_tokens)
    r.add_post("/_sim/expire-admin-tokens", expire_admin_tokens)
