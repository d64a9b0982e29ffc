"""Config URL parsing: scopes, hosted vs GHES, API base URLs, and bad input named precisely."""

from __future__ import annotations

import pytest

from arc_scaleset.github.config_url import GitHubScope, InvalidConfigURL, parse_config_url

ORG, ENT, REPO = GitHubScope.ORGANIZATION, GitHubScope.ENTERPRISE, GitHubScope.REPOSITORY


@pytest.mark.parametrize(
    ("url", "scope", "enterprise", "org", "repo", "hosted", "api"),
    [
        ("https://github.com/org", ORG, "", "org", "", True, "https://api.github.com"),
        ("https://github.com/org/", ORG, "", "org", "", True, "https://api.github.com"),
        ("https://www.github.com/org", ORG, "", "org", "", True, "https://api.github.com"),
        ("https://github.com/org/repo", REPO, "", "org", "repo", True, "https://api.github.com"),
        ("https://github.com/enterprises/ent", ENT, "ent", "", "", True, "https://api.github.com"),
        ("https://github.com/Enterprises/ent/", ENT, "ent", "", "", True, "https://api.github.com"),
        ("http://github.localhost/org", ORG, "", "org", "", True, "http://api.github.localhost"),
        ("https://acme.ghe.com/org", ORG, "", "org", "", True, "https://api.acme.ghe.com"),
        ("https://acme.ghe.com/org/repo", REPO, "", "org", "repo", True, "https://api.acme.ghe.com"),
        ("https://ghes.com/org", ORG, "", "org", "", False, "https://ghes.com/api/v3"),
        ("https://ghes.example.com/enterprises/e", ENT, "e", "", "", False, "https://ghes.example.com/api/v3"),
        ("http://127.0.0.1:8080/org/repo", REPO, "", "org", "repo", False, "http://127.0.0.1:8080/api/v3"),
        ("https://GitHub.com/org", ORG, "", "org", "", True, "https://api.GitHub.com"),
        # The .ghe.com suffix test is case-sensitive, as in the reference implementation.
        ("https://acme.GHE.com/org", ORG, "", "org", "", False, "https://acme.GHE.com/api/v3"),
    ],
)
def test_config_url_parses_scope_host_and_api_base(
    url: str, scope: GitHubScope, enterprise: str, org: str, repo: str, hosted: bool, api: str
) -> None:
    config = parse_config_url(url)
    assert (config.scope, config.enterprise, config.organization, config.repository) == (scope, enterprise, org, repo)
    assert config.is_hosted is hosted
    assert config.api_base_url == api
    assert config.url == url.strip("/")


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("https://github.com/org", "/orgs/org/actions/runners/registration-token"),
        ("https://github.com/org/repo", "/repos/org/repo/actions/runners/registration-token"),
        ("https://github.com/enterprises/ent", "/enterprises/ent/actions/runners/registration-token"),
    ],
)
def test_registration_token_path_follows_the_scope(url: str, path: str) -> None:
    assert parse_config_url(url).registration_token_path == path


@pytest.mark.parametrize("value", ["", "1", "true"])
def test_force_ghes_env_makes_any_host_ghes_even_when_empty(value: str) -> None:
    config = parse_config_url("https://github.com/org", environ={"GITHUB_ACTIONS_FORCE_GHES": value})
    assert not config.is_hosted
    assert config.api_base_url == "https://github.com/api/v3"


def test_force_ghes_is_not_read_from_the_process_environment_implicitly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS_FORCE_GHES", "1")
    assert parse_config_url("https://github.com/org").is_hosted


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("", "the URL is empty"),
        ("   ", "the URL is empty"),
        ("/", "the URL is empty"),
        ("github.com/org", "scheme"),
        ("ftp://github.com/org", "scheme"),
        ("https:///org", "no host"),
        ("https://github.com/", "should point to an enterprise, org, or repository"),
        ("https://github.com", "should point to an enterprise, org, or repository"),
        ("https://github.com/a/b/c", "should point to an enterprise, org, or repository"),
        ("https://github.com/a//b", "should point to an enterprise, org, or repository"),
        ("https://github.com:notaport/org", "cannot be parsed"),
        ("https://github.com/org?x=1", "query"),
    ],
)
def test_invalid_config_url_names_the_problem(url: str, problem: str) -> None:
    with pytest.raises(InvalidConfigURL) as caught:
        parse_config_url(url)
    assert problem in str(caught.value)
    assert str(caught.value).startswith(f"invalid config URL {url!r}")


def test_invalid_config_url_message_matches_the_documented_form() -> None:
    with pytest.raises(InvalidConfigURL) as caught:
        parse_config_url("https://github.com/")
    assert str(caught.value) == (
        "invalid config URL 'https://github.com/': should point to an enterprise, org, or repository"
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://github.com/org",
        "http://www.github.com/org/repo",
        "http://github.com/enterprises/ent",
        "http://api.github.com/org",
        "http://acme.ghe.com/org",
        "http://api.acme.ghe.com/org",
        "HTTP://GitHub.COM./org",
        "http://acme.GHE.com/org",
    ],
)
def test_plain_http_to_a_github_hosted_host_is_refused_with_a_reason(url: str) -> None:
    with pytest.raises(InvalidConfigURL) as caught:
        parse_config_url(url)
    message = str(caught.value)
    assert "https only" in message
    assert "cleartext" in message
    assert "use https://" in message


def test_plain_http_to_github_com_is_refused_even_when_forced_to_ghes() -> None:
    with pytest.raises(InvalidConfigURL, match="https only"):
        parse_config_url("http://github.com/org", environ={"GITHUB_ACTIONS_FORCE_GHES": "1"})


@pytest.mark.parametrize(
    "url", ["http://ghes.example.com/org", "http://github.example.com/org", "http://notgithub.com/org"]
)
def test_plain_http_to_an_enterprise_server_host_is_allowed(url: str) -> None:
    config = parse_config_url(url)
    assert not config.is_hosted
    assert config.api_base_url.startswith("http://")
