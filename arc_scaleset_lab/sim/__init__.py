"""A simulated GitHub + Actions service that speaks the real protocol over real HTTP.

Never imported by production code. Used by contract tests of ``arc_scaleset.github``, by the e2e suite and
by ``arc-scaleset demo`` (docs/lab.md; the endpoints are those of docs/github.md). One aiohttp server on
127.0.0.1 (port 0 = any free port) serves both sides:

GitHub REST API (served under ``/api/v3/...`` - what a GHES config URL ``http://127.0.0.1:PORT/<org>`` maps
to - and also at the root, for clients given an explicit API base)::

    POST /orgs/{org}/actions/runners/registration-token   Bearer <PAT|installation token> -> 201 {token, expires_at}
                            (also "token <T>", or HTTP Basic with T as the password, as ARC v0.27.6 sends it)
    POST /enterprises/{ent}/actions/runners/registration-token     (PAT needs scope manage_runners:enterprise)
    POST /repos/{owner}/{repo}/actions/runners/registration-token  (PAT needs scope repo; org needs admin:org)
    POST /app/installations/{id}/access_tokens   Bearer <RS256 app JWT, iss = app or client id> -> 201 {token, ...}
    POST /actions/runner-registration  RemoteAuth <registration token>, {"url", "runner_event"}
                            -> 200 {"url": "http://127.0.0.1:PORT/tenant/<n>/", "token": <HS256 JWT with exp>}
    errors: 401 {"message": "Bad credentials", "documentation_url": ...}, 403 for a missing PAT scope.

Actions service, under the tenant URL (scale sets, runner groups, runners, sessions, the message queue,
acquirejobs, plus ``GET .../{id}/acquirablejobs``). Admin endpoints need ``?api-version=...`` (else 400) and
``Authorization: Bearer <admin token>`` of that tenant (else 401). The message queue
(``session.messageQueueUrl``, kept query ``?sessionId=...``) needs the session's queue token; ``acquirejobs``
takes the queue token too. Error bodies: ``{"typeName": "<dotted>.XxxException", "message": ...}`` with
typeName e.g. ``GitHub.DistributedTask.WebApi.AgentExistsException`` (clients match it with *contains*):
AgentExistsException (409, JIT name taken), AgentNotFoundException (404; but removing an already removed
runner answers 204, as GitHub does), JobStillRunningException (400, remove a busy runner),
TaskAgentSessionConflictException (409, session held), TaskAgentSessionExpiredException (404, queue call on an
evicted/unknown session), RunnerScaleSetNotFoundException (404),
RunnerScaleSetExistsException (409). Message GET long-polls up to ``long_poll_seconds`` then 202; drops
(acks) messages with id <= ``lastMessageId``; redelivers the oldest unacked message otherwise; DELETE acks (204).
Repeated slashes in a path are served as one (``/tenant/1//_apis/...``, ARC's acquirejobs URL), in place.

In-process API (tests). :class:`SimulatedGitHub` is the lifecycle, the URLs and fault injection; what it
simulates is in the parts it owns, used directly::

    from arc_scaleset_lab.sim import SimulatedGitHub, SimConfig
    async with await SimulatedGitHub.start(config=SimConfig(long_poll_seconds=0.2), clock=REAL_CLOCK,
                                           host="127.0.0.1", port=0, tls=False) as sim:
        sim.url / sim.api_url / sim.config_url("org") / sim.config_url("org", "repo")  # "http://127.0.0.1:PORT"...
        sim.address.enterprise_config_url("ent") / sim.address.tenant_url(1)
        sim.ca_pem                                # PEM of the generated CA when tls=True, else None
        sim.faults.add(FaultRule(route="get_message", status=503, count=2))   # see faults.py
        sim.requests                              # recent RequestRecord(method, path, route, status, ...)

        sim.credentials.add_token("ghp_x", scopes=DEFAULT_PAT_SCOPES)  # "admin:org", "repo", ...enterprise
        sim.credentials.add_app(app_id=123, installation_ids=[456])    # -> SimApp(private_key_pem, ...)
        sim.credentials.expire_admin_tokens()

        state = sim.state                         # SimState: the model, see state.py
        job_id = state.enqueue_job("arc-runners", repository="org/repo", duration=1.0).request_id
        state.runner_online("arc-runners-runner-x7k2p")      # the pod "runs": registered runner goes online
        state.runner_exit("name", exit_code=0)              # runner process ended (busy -> its job fails)
        state.request_runner_exit("name", exit_code=7, reason="...")  # ask the pod player to end that runner
        state.runner_events_after(0)                        # RunnerExitRequest list
        state.jobs[job_id] -> JobRecord (state, enqueued_at, acquired_at, assigned_at, started_at, finished_at,
                                         runner_name, run_count, ...)
        state.jobs / state.runners / state.scale_sets (oldest first) / state.sessions (by scale set id)
        state.statistics(scale_set_id) -> Statistics
        state.evict_session(scale_set_id); state.expire_queue_tokens(); state.delete_scale_set(None, id)

        await sim.changes.wait_until(lambda: ..., within=10)   # waits on state changes, never a sleep loop

HTTP admin API for a sim in another process (``arc-scaleset sim``; client: :class:`SimAdminClient`)::

    GET  /_sim/stats | /_sim/jobs | /_sim/runners | /_sim/sessions | /_sim/scalesets | /_sim/faults
    POST /_sim/jobs {"labels": [..] | "scaleSet": name, "repository", "workflowRef", "duration", "eventName",
                     "count"}                                       -> {"ids": [...]}
    POST /_sim/runners/{name}/online | /_sim/runners/{name}/exit {"exitCode"} | /_sim/runners/{name}/fail {"exitCode"}
    GET  /_sim/runner-events?after=N&wait=S                         -> {"events": [{seq, runnerName, exitCode, reason}]}
    POST /_sim/tokens {"token", "scopes"}; POST /_sim/apps {"appId", "installationId"} -> {"privateKeyPem", ...}
    POST /_sim/runner-groups {"name"} -> {"id"}
    POST /_sim/faults {FaultRule fields} -> {"id"}; DELETE /_sim/faults[/{id}]
    POST /_sim/scalesets/{id}/evict-session | DELETE /_sim/scalesets/{id} | POST /_sim/expire-queue-tokens
    POST /_sim/expire-admin-tokens
    GET  /_sim/requests?route=R&scaleSetId=N&after=T  -> {"requests": [{at (time.monotonic()), method, route, status}]}

Modules: ``server`` (the running server), ``routes_github`` / ``routes_actions`` / ``routes_admin`` (one class
per API, one method per endpoint), ``http`` (what the routes share), ``middleware`` (faults, error dialects,
request log), ``state`` (the model), ``auth``, ``faults``, ``notify``, ``workload``, ``admin_client``.

The pod player (``arc_scaleset_lab.node.runner_pods.PodPlayer``) plays the kubelet for runner pods on kwok
nodes: it tells the sim a pod's runner is online when the pod runs, and terminates the pod's ``runner``
container with the sim's exit code.
"""

from __future__ import annotations

from arc_scaleset_lab.sim.admin_client import SimAdminClient, SimAdminError
from arc_scaleset_lab.sim.auth import DEFAULT_PAT_SCOPES, SimApp
from arc_scaleset_lab.sim.faults import FaultInjector, FaultRule
from arc_scaleset_lab.sim.middleware import RequestRecord
from arc_scaleset_lab.sim.server import SimulatedGitHub
from arc_scaleset_lab.sim.state import (
    JobRecord,
    JobState,
    Runner,
    RunnerExitRequest,
    ScaleSet,
    Session,
    SimConfig,
    Statistics,
    decode_jit_config,
)
from arc_scaleset_lab.sim.workload import WorkloadSpec, plan, run_workload

__all__ = [
    "DEFAULT_PAT_SCOPES",
    "FaultInjector",
    "FaultRule",
    "JobRecord",
    "JobState",
    "RequestRecord",
    "Runner",
    "RunnerExitRequest",
    "ScaleSet",
    "Session",
    "SimAdminClient",
    "SimAdminError",
    "SimApp",
    "SimConfig",
    "SimulatedGitHub",
    "Statistics",
    "WorkloadSpec",
    "decode_jit_config",
    "plan",
    "run_workload",
]
