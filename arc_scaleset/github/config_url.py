"""The GitHub config URL (``githubConfigUrl``): which enterprise, organization or repository a scale set serves.

:func:`parse_config_url` turns the URL a user wrote into a :class:`GitHubConfig` that knows its scope, whether
the host is GitHub-hosted (github.com, ``*.ghe.com``) or GitHub Enterprise Server, and where the REST API
lives. A URL that cannot be used raises :class:`InvalidConfigURL`, whose message names the problem.

``http://`` is refused for hosts GitHub serves itself (github.com, ghe.com and their subdomains, the API
hosts included), whatever ``GITHUB_ACTIONS_FORCE_GHES`` says: the first request would carry the PAT or the
installation token in cleartext before any redirect to https could fail it (docs/github.md). A GitHub
Enterprise Server host may still be reached over http, as some run it without TLS on an internal network.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

FORCE_GHES_ENV = "GITHUB_ACTIONS_FORCE_GHES"

# Hosts served by GitHub itself. `*.ghe.com` (data residency) is matched by suffix, case-sensitively,
# as the reference implementation does.
_HOSTED_HOSTS = frozenset({"github.com", "www.github.com", "github.localhost"})
_HOSTED_SUFFIX = ".ghe.com"
# Domains GitHub serves only over https: the domain itself and every subdomain (www., api., uploads., ...).
_TLS_ONLY_DOMAINS = ("github.com", "ghe.com")


class InvalidConfigURL(ValueError):  # noqa: N818 - reads as the condition it reports
    """The config URL cannot be used; the message says why and quotes the URL (URLs carry no secrets)."""

    def __init__(self, url: str, problem: str) -> None:
        super().__init__(f"invalid config URL {url!r}: {problem}")
        self.url = url
        self.problem = problem


class GitHubScope(enum.StrEnum):
    """What a scale set is registered at."""

    ENTERPRISE = "enterprise"
    ORGANIZATION = "organization"
    REPOSITORY = "repository"


@dataclass(frozen=True, slots=True)
class GitHubConfig:
    """A parsed config URL.

    ``url`` is the URL as given, with surrounding slashes trimmed: it is what the runner-registration
    request carries. ``enterprise`` / ``organization`` / ``repository`` are set according to ``scope``
    (a repository scope sets both ``organization``, the owner, and ``repository``).
    """

    url: str
    scope: GitHubScope
    enterprise: str
    organization: str
    repository: str
    is_hosted: bool
    api_base_url: str

    @property
    def registration_token_path(self) -> str:
        """The REST path (relative to :attr:`api_base_url`) that issues a runner registration token."""
        if self.scope is GitHubScope.ENTERPRISE:
            return f"/enterprises/{self.enterprise}/actions/runners/registration-token"
        if self.scope is GitHubScope.ORGANIZATION:
            return f"/orgs/{self.organization}/actions/runners/registration-token"
        return f"/repos/{self.organization}/{self.repository}/actions/runners/registration-token"

    @property
    def registration_token_url(self) -> str:
        return self.api_base_url + self.registration_token_path


def is_hosted_host(host: str, *, environ: Mapping[str, str]) -> bool:
    """Whether ``host`` (without port) is GitHub-hosted; ``GITHUB_ACTIONS_FORCE_GHES`` (any value) says no."""
    if FORCE_GHES_ENV in environ:
        return False
    return host.lower() in _HOSTED_HOSTS or host.endswith(_HOSTED_SUFFIX)


def requires_https(host: str) -> bool:
    """Whether ``host`` belongs to GitHub's own domains, which must never be reached over plain http.

    Case-insensitive and ignoring a trailing dot, unlike :func:`is_hosted_host`: this check guards
    credentials, so ``HTTP://GitHub.COM.`` is refused too.
    """
    name = host.lower().rstrip(".")
    return any(name == domain or name.endswith("." + domain) for domain in _TLS_ONLY_DOMAINS)


def parse_config_url(url: str, *, environ: Mapping[str, str] | None = None) -> GitHubConfig:
    """Parse a config URL such as ``https://github.com/my-org`` or ``https://ghes.example.com/enterprises/e``.

    ``environ`` is consulted only for ``GITHUB_ACTIONS_FORCE_GHES``; it defaults to an empty mapping
    (not ``os.environ``) so that parsing is a pure function: callers pass ``os.environ`` explicitly.
    """
    env: Mapping[str, str] = environ if environ is not None else {}
    trimmed = url.strip().strip("/")
    if not trimmed:
        raise InvalidConfigURL(url, "the URL is empty")
    try:
        parts = urlsplit(trimmed)
        port = parts.port  # raises ValueError for a non-numeric or out-of-range port
    except ValueError as exc:
        raise InvalidConfigURL(url, f"cannot be parsed ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidConfigURL(url, "the URL needs an http:// or https:// scheme")
    host = _host_as_written(parts.netloc)
    if not host:
        raise InvalidConfigURL(url, "the URL has no host")
    if parts.query or parts.fragment:
        raise InvalidConfigURL(url, "the URL must not carry a query or fragment")
    if parts.scheme == "http" and requires_https(host):
        raise InvalidConfigURL(
            url,
            f"{host} is served by GitHub over https only; http:// would send the credentials in cleartext "
            "(use https://)",
        )

    path = parts.path.strip("/")
    segments = path.split("/") if path else []
    enterprise = organization = repository = ""
    if len(segments) == 1 and segments[0]:
        scope = GitHubScope.ORGANIZATION
        organization = segments[0]
    elif len(segments) == 2 and all(segments) and segments[0].lower() == "enterprises":
        scope = GitHubScope.ENTERPRISE
        enterprise = segments[1]
    elif len(segments) == 2 and all(segments):
        scope = GitHubScope.REPOSITORY
        organization, repository = segments
    else:
        raise InvalidConfigURL(url, "should point to an enterprise, org, or repository")

    hosted = is_hosted_host(host, environ=env)
    return GitHubConfig(
        url=trimmed,
        scope=scope,
        enterprise=enterprise,
        organization=organization,
        repository=repository,
        is_hosted=hosted,
        api_base_url=_api_base_url(parts, host=host, port=port, hosted=hosted),
    )


def _api_base_url(parts: SplitResult, *, host: str, port: int | None, hosted: bool) -> str:
    netloc_port = f":{port}" if port is not None else ""
    if hosted:
        # www.github.com is github.com; the API always sits on the api. subdomain.
        api_host = "github.com" if host.lower() == "www.github.com" else host
        return f"{parts.scheme}://api.{api_host}{netloc_port}"
    return f"{parts.scheme}://{_bracket(host)}{netloc_port}/api/v3"


def _host_as_written(netloc: str) -> str:
    # `SplitResult.hostname` lower-cases; the `.ghe.com` test is case-sensitive, so keep the case as written.
    hostport = netloc.rpartition("@")[2]
    if hostport.startswith("["):
        return hostport[1:].partition("]")[0]
    return hostport.partition(":")[0]


def _bracket(host: str) -> str:
    # urlsplit strips the brackets from IPv6 literals; a URL needs them back.
    return f"[{host}]" if ":" in host else host
