"""The GitHub REST side of the sim (spec 4.3): installation tokens, registration tokens, runner registration.

Served under ``/api/v3`` (the GHES API base of a config URL on this server) and at the root.
"""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from arc_scaleset_lab.sim import errors
from arc_scaleset_lab.sim.server import json_response, named
from arc_scaleset_lab.sim.state import rfc3339

if TYPE_CHECKING:
    from arc_scaleset_lab.sim.server import SimulatedGitHub


def credential(request: web.Request, scheme: str) -> str | None:
    """The credential after ``<scheme> `` in Authorization (case-insensitive scheme), else None."""
    header = request.headers.get("Authorization", "")
    given, _, value = header.partition(" ")
    if given.lower() != scheme.lower() or not value.strip():
        return None
    return value.strip()


def add_routes(app: web.Application, sim: SimulatedGitHub) -> None:
    def bearer(request: web.Request) -> str | None:
        # GitHub takes PATs as "Bearer" or the older "token" scheme.
        return credential(request, "Bearer") or credential(request, "token")

    def registration_token(scope_path: str, request: web.Request) -> web.Response:
        token, expires = sim.credentials.issue_registration_token(bearer(request), scope_path)
        return json_response({"token": token, "expires_at": rfc3339(expires)}, status=201)

    @named("registration_token")
    async def org_registration_token(request: web.Request) -> web.Response:
        return registration_token(request.match_info["org"], request)

    @named("registration_token")
    async def enterprise_registration_token(request: web.Request) -> web.Response:
        return registration_token("enterprises/" + request.match_info["enterprise"], request)

    @named("registration_token")
    async def repo_registration_token(request: web.Request) -> web.Response:
        return registration_token(f"{request.match_info['owner']}/{request.match_info['repo']}", request)

    @named("app_access_token")
    async def app_access_token(request: web.Request) -> web.Response:
        try:
            installation_id = int(request.match_info["installation_id"])
        except ValueError:
            raise errors.GitHubError(404, "Not Found") from None
        token, expires = sim.credentials.issue_installation_token(credential(request, "Bearer"), installation_id)
        return json_response(
            {
                "token": token,
                "expires_at": rfc3339(expires),
                "permissions": {"organization_self_hosted_runners": "write"},
            },
            status=201,
        )

    @named("runner_registration")
    async def runner_registration(request: web.Request) -> web.Response:
        scope_path = sim.credentials.redeem_registration_token(credential(request, "RemoteAuth"))
        body = await _json_body(request)
        config_url = body.get("url") if isinstance(body, dict) else None
        if not isinstance(config_url, str) or not config_url:
            raise errors.GitHubError(400, "The url field is required")
        requested = urllib.parse.urlsplit(config_url).path.strip("/").lower()
        if requested != scope_path:
            # The registration token was issued for another org/repo/enterprise.
            raise errors.GitHubError(404, "Not Found")
        tenant = sim.state.tenant_for_scope(scope_path)
        token, _ = sim.credentials.issue_admin_token(tenant.id)
        return json_response({"url": sim.tenant_url(tenant.id), "token": token, "token_schema": "OAuthAccessToken"})

    for prefix in ("/api/v3", ""):
        app.router.add_post(prefix + "/orgs/{org}/actions/runners/registration-token", org_registration_token)
        app.router.add_post(
            prefix + "/enterprises/{enterprise}/actions/runners/registration-token", enterprise_registration_token
        )
        app.router.add_post(
            prefix + "/repos/{owner}/{repo}/actions/runners/registration-token", repo_registration_token
        )
        app.router.add_post(prefix + "/app/installations/{installation_id}/access_tokens", app_access_token)
        app.router.add_post(prefix + "/actions/runner-registration", runner_registration)


async def _json_body(request: web.Request) -> Any:
    raw = await request.read()
    # A UTF-8 BOM is tolerated, as the real services tolerate it.
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    if not raw.strip():
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise errors.GitHubError(400, "Problems parsing JSON") from None
