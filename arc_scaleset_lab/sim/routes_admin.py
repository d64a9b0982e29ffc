"""The ``/_sim`` admin API: drive and inspect a sim running in another process (client: ``SimAdminClient``).

Not part of the protocol: no faults, no request log, no auth (the sim listens on loopback). Errors are
``{"error": "..."}`` with 400/404. The routes are listed in the package docstring.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from aiohttp import web

from arc_scaleset_lab.sim import errors
from arc_scaleset_lab.sim.address import SimAddress
from arc_scaleset_lab.sim.auth import DEFAULT_PAT_SCOPES, Credentials
from arc_scaleset_lab.sim.faults import FaultInjector, FaultRule
from arc_scaleset_lab.sim.http import json_response, no_content, read_json
from arc_scaleset_lab.sim.middleware import RequestRecord
from arc_scaleset_lab.sim.notify import ChangeNotifier
from arc_scaleset_lab.sim.state import SimState

# A runner-events poll is held at most this long, whatever the caller asks.
_MAX_EVENTS_WAIT = 60.0


class AdminRoutes:
    """One method per admin endpoint; :meth:`register` adds them to an application.

    ``requests`` is the protocol request log (its length and the peers it came from are reported).
    """

    def __init__(
        self,
        *,
        state: SimState,
        credentials: Credentials,
        faults: FaultInjector,
        changes: ChangeNotifier,
        address: SimAddress,
        requests: Collection[RequestRecord],
    ) -> None:
        self._state = state
        self._credentials = credentials
        self._faults = faults
        self._changes = changes
        self._address = address
        self._requests = requests

    def register(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/_sim/stats", self.stats)
        r.add_get("/_sim/jobs", self.list_jobs)
        r.add_post("/_sim/jobs", self.enqueue)
        r.add_get("/_sim/runners", self.list_runners)
        r.add_post("/_sim/runners/{name}/online", self.runner_online)
        r.add_post("/_sim/runners/{name}/exit", self.runner_exit)
        r.add_post("/_sim/runners/{name}/fail", self.runner_fail)
        r.add_get("/_sim/runner-events", self.runner_events)
        r.add_get("/_sim/sessions", self.list_sessions)
        r.add_get("/_sim/scalesets", self.list_scale_sets)
        r.add_get("/_sim/requests", self.list_requests)
        r.add_post("/_sim/scalesets/{scale_set_id}/evict-session", self.evict_session)
        r.add_delete("/_sim/scalesets/{scale_set_id}", self.delete_scale_set)
        r.add_post("/_sim/tokens", self.add_token)
        r.add_post("/_sim/tokens/revoke", self.revoke_token)
        r.add_post("/_sim/apps", self.add_app)
        r.add_post("/_sim/runner-groups", self.add_runner_group)
        r.add_get("/_sim/faults", self.list_faults)
        r.add_post("/_sim/faults", self.add_fault)
        r.add_delete("/_sim/faults", self.clear_faults)
        r.add_delete("/_sim/faults/{fault_id}", self.remove_fault)
        r.add_post("/_sim/expire-queue-tokens", self.expire_queue_tokens)
        r.add_post("/_sim/expire-admin-tokens", self.expire_admin_tokens)

    # ------------------------------------------------------------ inspection

    async def stats(self, request: web.Request) -> web.Response:
        state = self._state
        by_state: dict[str, int] = {}
        for job in state.jobs.values():
            by_state[job.state.value] = by_state.get(job.state.value, 0) + 1
        return json_response(
            {
                "url": self._address.url,
                "jobs": by_state,
                "runners": len(state.runners),
                "sessions": len(state.sessions),
                "scaleSets": {str(s.id): state.statistics(s.id).to_json() for s in state.scale_sets.values()},
                "requests": len(self._requests),
                "requestPeers": _count_peers(self._requests),
            }
        )

    async def list_jobs(self, request: web.Request) -> web.Response:
        return json_response({"jobs": [j.to_json() for j in self._state.jobs.values()]})

    async def list_runners(self, request: web.Request) -> web.Response:
        return json_response({"runners": [r.to_json() for r in self._state.runners.values()]})

    async def list_sessions(self, request: web.Request) -> web.Response:
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
                    for s in self._state.sessions.values()
                ]
            }
        )

    async def list_scale_sets(self, request: web.Request) -> web.Response:
        return json_response(
            {
                "scaleSets": [
                    {
                        "id": s.id,
                        "name": s.name,
                        "tenantId": s.tenant_id,
                        "runnerGroupId": s.runner_group_id,
                        "labels": s.labels,
                        "statistics": self._state.statistics(s.id).to_json(),
                    }
                    for s in self._state.scale_sets.values()
                ]
            }
        )

    async def list_requests(self, request: web.Request) -> web.Response:
        """The protocol requests still in the log, oldest first, filtered by ``?route=`` (a route name),
        ``?scaleSetId=`` (requests about that scale set: its path names it) and ``?after=`` (arrived later than
        that ``time.monotonic()`` reading: the clock every process of this machine shares). A request is logged
        once answered, with the time it arrived (a long poll appears when it returns)."""
        query = request.query
        try:
            after = float(query.get("after", "-inf"))
            scale_set = f"/runnerscalesets/{int(query['scaleSetId'])}/" if "scaleSetId" in query else ""
        except ValueError:
            return _fail(400, "after must be a number and scaleSetId an integer")
        route = query.get("route")
        matching = [
            record
            for record in list(self._requests)
            if record.at > after and (route is None or record.route == route) and scale_set in record.path
        ]
        return json_response(
            {"requests": [{"at": r.at, "method": r.method, "route": r.route, "status": r.status} for r in matching]}
        )

    # ------------------------------------------------------------ jobs and runners

    async def enqueue(self, request: web.Request) -> web.Response:
        body = await _body(request)
        labels = body.get("labels") or body.get("scaleSet")
        if not labels or not isinstance(labels, str | list):
            return _fail(400, "labels (a list) or scaleSet (a name) is required")
        count = int(body.get("count", 1))
        try:
            ids = [
                self._state.enqueue_job(
                    labels,
                    repository=str(body.get("repository", "org/repo")),
                    workflow_ref=body.get("workflowRef"),
                    display_name=body.get("displayName"),
                    duration=float(body.get("duration", 1.0)),
                    event_name=str(body.get("eventName", "push")),
                    result=str(body.get("result", "succeeded")),
                ).request_id
                for _ in range(count)
            ]
        except ValueError as error:
            return _fail(400, str(error))
        return json_response({"ids": ids})

    async def runner_online(self, request: web.Request) -> web.Response:
        try:
            runner = self._state.runner_online(request.match_info["name"])
        except errors.ActionsError as error:
            return _fail(error.status, error.message)
        return json_response(runner.to_json())

    async def runner_exit(self, request: web.Request) -> web.Response:
        body = await _body(request)
        try:
            self._state.runner_exit(request.match_info["name"], exit_code=int(body.get("exitCode", 0)))
        except errors.ActionsError as error:
            return _fail(error.status, error.message)
        return no_content()

    async def runner_fail(self, request: web.Request) -> web.Response:
        body = await _body(request)
        event = self._state.request_runner_exit(
            request.match_info["name"],
            exit_code=int(body.get("exitCode", 1)),
            reason=str(body.get("reason", "requested")),
        )
        return json_response(event.to_json())

    async def runner_events(self, request: web.Request) -> web.Response:
        """Exit requests after ``?after=N``; with ``?wait=S``, held until there is one or S seconds pass."""
        after = int(request.query.get("after", "0"))
        wait = min(float(request.query.get("wait", "0")), _MAX_EVENTS_WAIT)
        events = (
            await self._changes.poll_until(lambda: self._state.runner_events_after(after), within=wait)
            if wait > 0
            else self._state.runner_events_after(after)
        )
        return json_response({"events": [e.to_json() for e in events]})

    # ------------------------------------------------------------ credentials and runner groups

    async def add_token(self, request: web.Request) -> web.Response:
        body = await _body(request)
        token = body.get("token")
        if not isinstance(token, str) or not token:
            return _fail(400, "token is required")
        self._credentials.add_token(token, scopes=frozenset(body.get("scopes") or DEFAULT_PAT_SCOPES))
        return no_content()

    async def revoke_token(self, request: web.Request) -> web.Response:
        """The PAT no longer authenticates (a rotated-out token revoked on GitHub); admin tokens already issued
        for it keep working until they expire (``expire-admin-tokens`` ends them)."""
        token = (await _body(request)).get("token")
        if not isinstance(token, str) or not token:
            return _fail(400, "token is required")
        self._credentials.remove_token(token)
        return no_content()

    async def add_app(self, request: web.Request) -> web.Response:
        body = await _body(request)
        try:
            app_id, installation_id = int(body["appId"]), int(body["installationId"])
        except (KeyError, TypeError, ValueError):
            return _fail(400, "appId and installationId (integers) are required")
        app = self._credentials.add_app(
            app_id=app_id,
            installation_ids=[installation_id],
            client_id=body.get("clientId"),
            public_key_pem=body.get("publicKeyPem"),
        )
        return json_response({"appId": app.app_id, "clientId": app.client_id, "privateKeyPem": app.private_key_pem})

    async def add_runner_group(self, request: web.Request) -> web.Response:
        body = await _body(request)
        name = body.get("name")
        if not isinstance(name, str) or not name:
            return _fail(400, "name is required")
        return json_response({"id": self._state.add_runner_group(name).id})

    # ------------------------------------------------------------ faults

    async def list_faults(self, request: web.Request) -> web.Response:
        return json_response({"faults": self._faults.rules()})

    async def add_fault(self, request: web.Request) -> web.Response:
        try:
            rule_id = self._faults.add(FaultRule.from_json(await _body(request)))
        except (TypeError, ValueError) as error:
            return _fail(400, str(error))
        return json_response({"id": rule_id})

    async def clear_faults(self, request: web.Request) -> web.Response:
        self._faults.clear()
        return no_content()

    async def remove_fault(self, request: web.Request) -> web.Response:
        if not self._faults.remove(int(request.match_info["fault_id"])):
            return _fail(404, "no such fault")
        return no_content()

    async def evict_session(self, request: web.Request) -> web.Response:
        evicted = self._state.evict_session(int(request.match_info["scale_set_id"]))
        return json_response({"evicted": evicted})

    async def delete_scale_set(self, request: web.Request) -> web.Response:
        try:
            # Whatever its tenant: the scale set is deleted "behind the listener's back".
            self._state.delete_scale_set(None, int(request.match_info["scale_set_id"]))
        except errors.ActionsError as error:
            return _fail(error.status, error.message)
        return no_content()

    async def expire_queue_tokens(self, request: web.Request) -> web.Response:
        self._state.expire_queue_tokens()
        return no_content()

    async def expire_admin_tokens(self, request: web.Request) -> web.Response:
        self._credentials.expire_admin_tokens()
        return no_content()


def _count_peers(requests: Collection[RequestRecord]) -> dict[str, int]:
    """Protocol requests by TCP peer address (the proxy tests prove with it that nothing bypassed the proxy)."""
    counts: dict[str, int] = {}
    for record in list(requests):
        peer = record.peer or ""
        counts[peer] = counts.get(peer, 0) + 1
    return counts


def _fail(status: int, message: str) -> web.Response:
    return json_response({"error": message}, status=status)


def _not_json() -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text='{"error": "body is not JSON"}', content_type="application/json")


async def _body(request: web.Request) -> dict[str, Any]:
    """The body as a JSON object; {} when empty; 400 when it is not JSON or not an object."""
    data = await read_json(request, invalid=_not_json, empty={})
    if not isinstance(data, dict):
        raise web.HTTPBadRequest(text='{"error": "body must be an object"}', content_type="application/json")
    return data
