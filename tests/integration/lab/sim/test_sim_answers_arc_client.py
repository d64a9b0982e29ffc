"""The sim answers ARC's own client (v0.27.6, github/actions/client.go) as GitHub does (issue 20).

Each test writes, over a raw TCP connection, the bytes Go's net/http sends for ARC's request: method, path
(doubled slash included), headers in Go's order, body. Where the sim was stricter than GitHub, ARC's listener
never acquired a job, its registration-token call was refused, and its runner finalizers retried forever.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.parse
from dataclasses import dataclass

import aiohttp
import jwt
import pytest

from arc_scaleset_lab.sim import JobState, SimulatedGitHub
from tests.integration.lab.sim.conftest import PAT, Tenant, register

CONTROLLER_AGENT = "actions-runner-controller/NA CommitSHA/NA ScaleSetID/NA"


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    def json(self) -> object:
        return json.loads(self.body)


async def send_as_go(
    url: str,
    method: str,
    *,
    headers: dict[str, str],
    body: bytes | None = None,
    chunked: bool = False,
    user_agent: str = CONTROLLER_AGENT,
) -> Answer:
    """Send ``method url`` as Go's net/http writes it (captured from ARC's client): the path exactly as given,
    Host, User-Agent, then Content-Length or ``Transfer-Encoding: chunked``, the request's headers sorted, and
    the transport's Accept-Encoding."""
    parts = urllib.parse.urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {parts.netloc}", f"User-Agent: {user_agent}"]
    payload = body or b""
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        payload = (f"{len(payload):x}\r\n".encode() + payload + b"\r\n" if payload else b"") + b"0\r\n\r\n"
    elif body is not None:
        lines.append(f"Content-Length: {len(body)}")
    lines += [f"{name}: {value}" for name, value in sorted(headers.items())]
    lines += ["Accept-Encoding: gzip", "", ""]
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        writer.write("\r\n".join(lines).encode() + payload)
        await writer.drain()
        status_line, _, head = (await reader.readuntil(b"\r\n\r\n")).decode().partition("\r\n")
        fields = dict(line.split(": ", 1) for line in head.strip().split("\r\n") if line)
        length = int(fields.get("Content-Length", "0"))
        return Answer(int(status_line.split()[1]), await reader.readexactly(length))
    finally:
        writer.close()
        await writer.wait_closed()


def arc_registration_token_headers(token: str) -> dict[str, str]:
    """ARC's getRunnerRegistrationToken with a PAT: HTTP Basic, user name "github"; its empty body goes chunked."""
    basic = base64.b64encode(f"github:{token}".encode()).decode()
    return {"Authorization": f"Basic {basic}", "Content-Type": "application/vnd.github.v3+json"}


def arc_admin_headers(tenant: Tenant) -> dict[str, str]:
    """ARC's NewActionsServiceRequest: the admin token as Bearer, a JSON content type, no body."""
    return {"Authorization": f"Bearer {tenant.token}", "Content-Type": "application/json"}


# ---------------------------------------------------------------- a PAT sent with HTTP Basic authentication


async def test_a_pat_sent_with_basic_authentication_is_accepted_as_github_does(
    sim: SimulatedGitHub, http: aiohttp.ClientSession
) -> None:
    answer = await send_as_go(
        f"{sim.api_url}/orgs/org/actions/runners/registration-token",
        "POST",
        headers=arc_registration_token_headers(PAT),
        chunked=True,
    )
    assert answer.status == 201
    registration = answer.json()
    assert isinstance(registration, dict)
    # ARC's next step redeems it for the tenant's URL and admin token.
    async with http.post(
        f"{sim.api_url}/actions/runner-registration",
        data=json.dumps({"url": sim.config_url("org"), "runner_event": "register"}) + "\n",
        headers={"Authorization": f"RemoteAuth {registration['token']}", "Content-Type": "application/json"},
    ) as response:
        assert response.status == 200
        assert (await response.json())["url"].startswith(f"{sim.url}/tenant/")


async def test_an_installation_token_sent_with_basic_authentication_is_accepted_too(sim: SimulatedGitHub) -> None:
    app = sim.credentials.add_app(app_id=5, installation_ids=[6])
    assert app.private_key_pem is not None
    token, _ = sim.credentials.issue_installation_token(app_jwt(app.private_key_pem, app_id=5), 6)
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    answer = await send_as_go(
        f"{sim.api_url}/repos/org/repo/actions/runners/registration-token",
        "POST",
        headers={"Authorization": f"Basic {basic}"},
        chunked=True,
    )
    assert answer.status == 201


@pytest.mark.parametrize("password", ["ghp_not_a_known_token", ""])
async def test_basic_authentication_with_an_unknown_token_is_bad_credentials(
    sim: SimulatedGitHub, password: str
) -> None:
    basic = base64.b64encode(f"github:{password}".encode()).decode()
    answer = await send_as_go(
        f"{sim.api_url}/orgs/org/actions/runners/registration-token",
        "POST",
        headers={"Authorization": f"Basic {basic}"},
        chunked=True,
    )
    assert (answer.status, answer.json()) == (
        401,
        {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"},
    )


def app_jwt(private_key_pem: str, *, app_id: int) -> str:
    now = int(time.time())
    return jwt.encode({"iat": now - 60, "exp": now + 480, "iss": str(app_id)}, private_key_pem, algorithm="RS256")


# ---------------------------------------------------------------- a doubled slash in the path


async def test_acquiring_jobs_on_arcs_doubled_slash_path_acquires_them_as_github_does(
    sim: SimulatedGitHub, tenant: Tenant
) -> None:
    scale_set = await tenant.create_scale_set()
    status, session = await tenant.create_session(scale_set["id"])
    assert status == 200
    job = sim.state.enqueue_job("arc-runners", duration=600)
    assert tenant.url.endswith("/")
    # ARC's AcquireJobs: Sprintf("%s/%s/%d/acquirejobs?api-version=6.0-preview", tenant URL, ...).
    url = f"{tenant.url}/_apis/runtime/runnerscalesets/{scale_set['id']}/acquirejobs?api-version=6.0-preview"
    assert "//_apis/" in url

    answer = await send_as_go(
        url,
        "POST",
        headers={"Authorization": f"Bearer {session['messageQueueAccessToken']}", "Content-Type": "application/json"},
        body=json.dumps([job.request_id]).encode(),
        user_agent=f"actions-runner-controller/NA CommitSHA/NA ScaleSetID/{scale_set['id']}",
    )

    assert (answer.status, answer.json()) == (200, {"count": 1, "value": [job.request_id]})
    assert sim.state.jobs[job.request_id].state is JobState.ACQUIRED
    (record,) = [r for r in sim.requests if r.route == "acquire_jobs"]
    assert (record.path, record.status) == (urllib.parse.urlsplit(url).path, 200), "logged as sent"


async def test_a_doubled_slash_reaches_every_route_and_keeps_its_answers(sim: SimulatedGitHub, tenant: Tenant) -> None:
    base = tenant.url.rstrip("/")
    answer = await send_as_go(
        f"{base}//_apis/runtime/runnergroups/?groupName=Default&api-version=6.0-preview",
        "GET",
        headers=arc_admin_headers(tenant),
    )
    assert answer.status == 200
    assert (await send_as_go(f"{base}//_apis/nothing//here?api-version=6.0-preview", "GET", headers={})).status == 404
    wrong_method = await send_as_go(f"{base}//_apis/runtime/runnerscalesets/1/acquirejobs", "GET", headers={})
    assert wrong_method.status == 405


# ---------------------------------------------------------------- removing a runner that is already removed


async def test_removing_an_already_removed_runner_answers_204_as_github_does(
    sim: SimulatedGitHub, tenant: Tenant
) -> None:
    scale_set = await tenant.create_scale_set()
    status, jit = await tenant.jit(scale_set["id"], "arc-runners-abc12-runner-x7k2p")
    assert status == 200
    # ARC's RemoveRunner: url.JoinPath(tenant URL, "/_apis/distributedtask/pools/0/agents/<id>"), api-version added.
    url = f"{tenant.url}_apis/distributedtask/pools/0/agents/{jit['runner']['id']}?api-version=6.0-preview"

    # The set removes the runner on scale-down, then the runner's finalizer removes it again.
    first = await send_as_go(url, "DELETE", headers=arc_admin_headers(tenant))
    second = await send_as_go(url, "DELETE", headers=arc_admin_headers(tenant))

    assert (first.status, second.status) == (204, 204)
    assert [r.status for r in sim.requests if r.route == "remove_runner"] == [204, 204]
    # It is gone all the same: ARC's runnerRegisteredWithService reads 404 AgentNotFound as "not registered".
    gone = await send_as_go(url, "GET", headers=arc_admin_headers(tenant))
    assert gone.status == 404
    assert "AgentNotFoundException" in str(gone.json())


async def test_removing_a_runner_the_tenant_never_registered_is_not_found(tenant: Tenant) -> None:
    url = f"{tenant.url}_apis/distributedtask/pools/0/agents/987654?api-version=6.0-preview"
    answer = await send_as_go(url, "DELETE", headers=arc_admin_headers(tenant))
    assert answer.status == 404
    assert "AgentNotFoundException" in str(answer.json())


async def test_a_runner_removed_with_its_scale_set_can_be_removed_again(sim: SimulatedGitHub, tenant: Tenant) -> None:
    scale_set = await tenant.create_scale_set()
    _, jit = await tenant.jit(scale_set["id"], "runner-of-a-deleted-set")
    status, _ = await tenant.call("DELETE", f"_apis/runtime/runnerscalesets/{scale_set['id']}")
    assert status == 204
    url = f"{tenant.url}_apis/distributedtask/pools/0/agents/{jit['runner']['id']}?api-version=6.0-preview"
    assert (await send_as_go(url, "DELETE", headers=arc_admin_headers(tenant))).status == 204


async def test_another_tenant_cannot_remove_a_removed_runner_it_never_had(
    sim: SimulatedGitHub, tenant: Tenant, http: aiohttp.ClientSession
) -> None:
    scale_set = await tenant.create_scale_set()
    _, jit = await tenant.jit(scale_set["id"], "runner-of-org")
    status, _ = await tenant.call("DELETE", f"_apis/distributedtask/pools/0/agents/{jit['runner']['id']}")
    assert status == 204
    other = await register(http, sim, sim.config_url("org", "repo"), "repos/org/repo")
    url = f"{other.url}_apis/distributedtask/pools/0/agents/{jit['runner']['id']}?api-version=6.0-preview"
    assert (await send_as_go(url, "DELETE", headers=arc_admin_headers(other))).status == 404
