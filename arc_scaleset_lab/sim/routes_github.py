"""The GitHub REST side of the sim: installation tokens, registration tokens, runner registration.

Served under ``/api/v3`` (the GHES API base of a config URL on this server) and at the root, for clients
given an explicit API base. Errors are raised as :class:`~arc_scaleset_lab.sim.errors.GitHubError` and
answered by the protocol middleware.
"""

from __future__ import annotations

import urllib.parse

from aiohttp import web

from arc_scaleset_lab.sim import errors
from arc_scaleset_lab.sim.address import SimAddress
from arc_scaleset_lab.sim.auth import Credentials
from arc_scaleset_lab.sim.http import (
    Dialect,
    credential,
    json_response,
    protocol_route,
    read_json,
    token_credential,
)
from arc_scaleset_lab.sim.state import SimState, rfc3339


class GitHubRoutes:
    """One method per GitHub REST endpoint; :meth:`register` adds them to an application."""

    def __init__(self, *, state: SimState, credentials: Credentials, address: SimAddress) -> None:
        self._state = state
        self._credentials = credentials
        self._address = address
        self._renamed = state.config.renamed_repositories

    def register(self, app: web.Application) -> None:
        for prefix in ("/api/v3", ""):
            for path, handler in (
                ("/orgs/{org}/actions/runners/registration-token", self.org_registration_token),
                ("/enterprises/{enterprise}/actions/runners/registration-token", self.enterprise_registration_token),
                ("/repos/{owner}/{repo}/actions/runners/registration-token", self.repo_registration_token),
                ("/app/installations/{installation_id}/access_tokens", self.app_access_token),
                ("/actions/runner-registration", self.runner_registration),
            ):
                app.router.add_post(prefix + path, handler)

    # ------------------------------------------------------------ registration tokens

    @protocol_route("registration_token", Dialect.GITHUB)
    async def org_registration_token(self, request: web.Request) -> web.Response:
        return self._registration_token(request.match_info["org"], request)

    @protocol_route("registration_token", Dialect.GITHUB)
    async def enterprise_registration_token(self, request: web.Request) -> web.Response:
        return self._registration_token("enterprises/" + request.match_info["enterprise"], request)

    @protocol_route("registration_token", Dialect.GITHUB)
    async def repo_registration_token(self, request: web.Request) -> web.Response:
        repository = f"{request.match_info['owner']}/{request.match_info['repo']}"
        current = self._renamed.get(repository.lower())
        if current is not None:
            # GitHub's answer for a renamed repository: the same request at its new name.
            new_path = request.path.replace(f"/repos/{repository}/", f"/repos/{current}/", 1)
            moved = json_response({"message": "Moved Permanently", "url": new_path}, status=307)
            moved.headers["Location"] = new_path
            return moved
        return self._registration_token(repository, request)

    def _registration_token(self, scope_path: str, request: web.Request) -> web.Response:
        token, expires = self._credentials.issue_registration_token(token_credential(request), scope_path)
        return json_response({"token": token, "expires_at": rfc3339(expires)}, status=201)

    # ------------------------------------------------------------ GitHub App

    @protocol_route("app_access_token", Dialect.GITHUB)
    async def app_access_token(self, request: web.Request) -> web.Response:
        try:
            installation_id = int(request.match_info["installation_id"])
        except ValueError:
            raise errors.GitHubError(404, "Not Found") from None
        token, expires = self._credentials.issue_installation_token(credential(request, "Bearer"), installation_id)
        return json_response(
            {
                "token": token,
                "expires_at": rfc3339(expires),
                "permissions": {"organization_self_hosted_runners": "write"},
            },
            status=201,
        )

    # ------------------------------------------------------------ runner registration

    @protocol_route("runner_registration", Dialect.GITHUB)
    async def runner_registration(self, request: web.Request) -> web.Response:
        """Redeem a registration token for the tenant's Actions-service URL and an admin token."""
        scope_path = self._credentials.redeem_registration_token(credential(request, "RemoteAuth"))
        body = await read_json(request, invalid=lambda: errors.GitHubError(400, "Problems parsing JSON"))
        config_url = body.get("url") if isinstance(body, dict) else None
        if not isinstance(config_url, str) or not config_url:
            raise errors.GitHubError(400, "The url field is required")
        requested = urllib.parse.urlsplit(config_url).path.strip("/").lower()
        requested = self._renamed.get(requested, requested)
        if requested != scope_path:
            # The registration token was issued for another org/repo/enterprise.
            raise errors.GitHubError(404, "Not Found")
        tenant = self._state.tenant_for_scope(scope_path)
        token, _ = self._credentials.issue_admin_token(tenant.id)
        return json_response(
            {"url": self._address.tenant_url(tenant.id), "token": token, "token_schema": "OAuthAccessToken"}
        )
