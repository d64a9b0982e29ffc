"""Where the simulated GitHub is served, and the URLs that follow from it."""

from __future__ import annotations


class SimAddress:
    """The sim's base URL (``http://127.0.0.1:PORT``) and the URLs derived from it.

    The routes are built before the server binds its port (port 0 = any free port), so the URL is filled in
    once, by the server, after binding and before the first request; until then it is empty.
    """

    def __init__(self) -> None:
        self.url = ""

    @property
    def api_url(self) -> str:
        """The GitHub REST base that a GHES config URL on this server maps to."""
        return f"{self.url}/api/v3"

    def config_url(self, org: str, repo: str | None = None) -> str:
        return f"{self.url}/{org}" + (f"/{repo}" if repo else "")

    def enterprise_config_url(self, enterprise: str) -> str:
        return f"{self.url}/enterprises/{enterprise}"

    def tenant_url(self, tenant_id: int) -> str:
        """The Actions-service base of a tenant, as ``actions/runner-registration`` hands it out."""
        return f"{self.url}/tenant/{tenant_id}/"
