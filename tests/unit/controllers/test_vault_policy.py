"""The vault allow list (``--vault-allow-list``): a namespace reads only the vaults, certificates and secrets a
cluster admin allowed it, and sends what it read only to the GitHub hosts allowed it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from arc_scaleset.controllers.vault_policy import AllowList, VaultRead, parse_allow_list, vault_refusal

SOURCE = "arc-system/arc-vault-allow-list"
TEAM_A = {
    "vaultUrls": ["https://team-a.vault.azure.net/"],
    "certificatePaths": ["/etc/arc/vault/team-a.pem"],
    "secretPrefixes": ["team-a-"],
    "githubHosts": ["github.com", "ghes.corp.example:8443"],
}
ALLOW = parse_allow_list({"team-a": json.dumps(TEAM_A)}, source=SOURCE)
READ_A = VaultRead(
    namespace="team-a",
    vault_url="https://team-a.vault.azure.net/",
    certificate_path="/etc/arc/vault/team-a.pem",
    secret_name="team-a-github",
    purpose="githubConfigSecret",
    github_url="https://github.com/team-a-org",
)


def test_a_read_the_admin_allowed_for_its_namespace_is_allowed() -> None:
    assert vault_refusal(ALLOW, READ_A) is None
    # The URL as compared: case and the trailing slash do not matter.
    assert vault_refusal(ALLOW, dataclasses.replace(READ_A, vault_url="https://TEAM-A.vault.azure.net")) is None


def test_another_namespace_copying_an_allowed_vault_config_is_refused_naming_the_namespace_and_the_configmap() -> None:
    refusal = vault_refusal(ALLOW, dataclasses.replace(READ_A, namespace="team-b"))
    assert refusal is not None
    assert "namespace 'team-b'" in refusal
    assert "--vault-allow-list ConfigMap arc-system/arc-vault-allow-list has no entry for it" in refusal


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"vault_url": "https://team-b.vault.azure.net/"}, "vaultConfig.azureKeyVault.url"),
        ({"certificate_path": "/etc/arc/vault/team-b.pem"}, "vaultConfig.azureKeyVault.certificatePath"),
        ({"certificate_path": "/etc/arc/vault/../vault/team-a.pem"}, "vaultConfig.azureKeyVault.certificatePath"),
        ({"secret_name": "team-b-github"}, "vault secret 'team-b-github' (githubConfigSecret; secretPrefixes)"),
        (
            {"github_url": "https://attacker.example/team-a-org"},
            "githubConfigUrl 'https://attacker.example/team-a-org'",
        ),
    ],
)
def test_each_field_outside_the_namespaces_grant_is_refused_by_name(change: dict[str, str], field: str) -> None:
    refusal = vault_refusal(ALLOW, dataclasses.replace(READ_A, **change))
    assert refusal is not None
    assert field in refusal
    assert "a cluster admin allows it in the entry 'team-a' of --vault-allow-list ConfigMap" in refusal


@pytest.mark.parametrize(
    ("github_url", "allowed"),
    [
        ("https://github.com/org", True),
        ("https://GitHub.com:443/org", True),
        ("https://github.com:8443/org", False),  # another server on an allowed host
        ("http://github.com/org", True),
        ("https://ghes.corp.example:8443/org", True),
        ("https://ghes.corp.example/org", False),  # only the port the admin wrote
        ("https://github.com.attacker.example/org", False),
        ("https://user@attacker.example/org", False),
        ("not a url", False),
    ],
)
def test_credentials_go_only_to_a_github_host_the_admin_allowed(github_url: str, allowed: bool) -> None:
    refusal = vault_refusal(ALLOW, dataclasses.replace(READ_A, github_url=github_url))
    assert (refusal is None) is allowed, refusal


def test_the_proxy_credentials_secret_is_checked_against_the_prefixes_too() -> None:
    read = dataclasses.replace(READ_A, secret_name="shared-proxy", purpose="proxy.https.credentialSecretRef")
    refusal = vault_refusal(ALLOW, read)
    assert refusal is not None
    assert "(proxy.https.credentialSecretRef; secretPrefixes)" in refusal
    assert vault_refusal(ALLOW, dataclasses.replace(read, secret_name="team-a-proxy")) is None


@pytest.mark.parametrize(
    ("proxy_url", "allowed"),
    [
        ("http://proxy.corp.example:3128", True),
        ("proxy.corp.example:3128", True),  # no scheme: an http proxy
        ("http://PROXY.corp.example:3128/", True),
        ("http://proxy.corp.example:8080", False),  # only the port the admin wrote
        ("https://proxy.corp.example:3128", True),
        ("http://proxy.attacker.example:3128", False),
        ("http://proxy.corp.example:3128@proxy.attacker.example:3128", False),
        ("http://proxy.corp.example.attacker.example:3128", False),
    ],
)
def test_a_proxys_credentials_go_only_to_a_proxy_host_the_admin_allowed(proxy_url: str, allowed: bool) -> None:
    grant = parse_allow_list(
        {"team-a": json.dumps({**TEAM_A, "proxyHosts": ["proxy.corp.example:3128"]})}, source=SOURCE
    )
    read = dataclasses.replace(
        READ_A, secret_name="team-a-proxy", purpose="proxy.https.credentialSecretRef", proxy_url=proxy_url
    )
    refusal = vault_refusal(grant, read)
    assert (refusal is None) is allowed, refusal
    if refusal is not None:
        assert "(proxy.https.credentialSecretRef) to proxy" in refusal
        assert "its host is not in proxyHosts" in refusal


def test_an_entry_without_proxy_hosts_allows_no_proxy_credentials_and_never_echoes_the_proxy_user_info() -> None:
    read = dataclasses.replace(
        READ_A,
        secret_name="team-a-proxy",
        purpose="proxy.http.credentialSecretRef",
        proxy_url="http://someone:typed-a-password@proxy.corp.example:3128",
    )
    refusal = vault_refusal(ALLOW, read)
    assert refusal is not None
    assert "to proxy 'proxy.corp.example:3128' (its host is not in proxyHosts)" in refusal
    assert "typed-a-password" not in refusal
    # The GitHub credentials themselves are not sent to a proxy: no proxyHosts needed for them.
    assert vault_refusal(ALLOW, READ_A) is None


def test_a_missing_configmap_allows_nothing() -> None:
    refusal = vault_refusal(AllowList(source=SOURCE, unusable="does not exist"), READ_A)
    assert refusal is not None
    assert f"ConfigMap {SOURCE} does not exist, so no namespace may use a vault" in refusal


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("not json", "not a JSON object"),
        ('["team-a-"]', "not a JSON object"),
        ('{"secretPrefix": ["x"]}', "unknown keys ['secretPrefix']"),
        ('{"secretPrefixes": "team-a-"}', "secretPrefixes must be a list of non-empty strings"),
        ('{"secretPrefixes": [""]}', "secretPrefixes must be a list of non-empty strings"),
    ],
)
def test_an_entry_that_does_not_parse_allows_nothing_and_says_why(value: str, problem: str) -> None:
    allow_list = parse_allow_list({"team-a": value}, source=SOURCE)
    refusal = vault_refusal(allow_list, READ_A)
    assert refusal is not None
    assert "its entry in --vault-allow-list ConfigMap" in refusal
    assert problem in refusal


def test_an_entry_without_a_field_allows_nothing_of_it() -> None:
    allow_list = parse_allow_list({"team-a": json.dumps({**TEAM_A, "githubHosts": []})}, source=SOURCE)
    refusal = vault_refusal(allow_list, READ_A)
    assert refusal is not None
    assert "githubHosts" in refusal
