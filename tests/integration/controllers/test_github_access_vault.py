"""Where the controller reads a vault scale set's secrets (``vaultConfig``): the GitHub credentials and the GitHub
proxy's credentials from the vault, the vault's own proxy credentials from a Kubernetes Secret, and each failure
as the condition a user can act on. Against the real control plane, the simulated Azure (identity endpoint and
Key Vault over TLS) with the real SDK, and a real forward proxy (tinyproxy) for ``vaultConfig.proxy``.

The sim serves under this machine's host name, not a loopback address: loopback is never proxied.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp.connector
import pytest

from arc_scaleset.api.common import AzureKeyVaultConfig, ProxyConfig, ProxyServerConfig, VaultConfig
from arc_scaleset.api.credentials import AppConfig
from arc_scaleset.controllers.errors import InvalidSecret, InvalidVaultConfig, VaultSecretNotFound
from arc_scaleset.controllers.github_access import GitHubAccess
from arc_scaleset.controllers.vault_policy import VaultAllowListSource, VaultNotAllowed
from arc_scaleset.github import ActionsClientPool, SystemInfo
from arc_scaleset.github.keyvault import VERIFY_CHALLENGE_RESOURCE_ENV, KeyVaultSecrets
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset_lab.harness.proxy import TinyProxy
from arc_scaleset_lab.sim.azure import make_client_certificate
from arc_scaleset_lab.sim.server import SimulatedGitHub
from arc_scaleset_lab.sim.state import SimConfig

TENANT = "tenant-of-the-vault"
CLIENT = "client-of-the-controller"
LAB_ENV = {VERIFY_CHALLENGE_RESOURCE_ENV: "false"}
TOKEN = "ghp_only_in_the_vault_0123456789"
GITHUB_URL = "https://github.com/my-org"
ALLOW_LIST = "vault-allow-list"


@dataclass
class Vault:
    sim: SimulatedGitHub
    certificate_path: str

    def config(
        self, *, proxy: ProxyConfig | None = None, vault_type: str = "azure_key_vault", certificate_path: str = ""
    ) -> VaultConfig:
        return VaultConfig(
            type=vault_type,
            azure_key_vault=AzureKeyVaultConfig(
                url=self.sim.url + "/",
                tenant_id=TENANT,
                client_id=CLIENT,
                certificate_path=certificate_path or self.certificate_path,
            ),
            proxy=proxy,
        )


@pytest.fixture(scope="module")
def proxy() -> Iterator[TinyProxy]:
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-vault-proxy-"))
    with TinyProxy(workdir) as running:
        yield running
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
async def vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Vault]:
    host = socket.gethostname()
    async with await SimulatedGitHub.start(config=SimConfig(), tls=True, host=host) as sim:
        assert sim.ca_pem is not None
        ca_file = tmp_path / "ca.pem"
        ca_file.write_text(sim.ca_pem)
        # aiohttp verifies with a default context it made at import: trust the sim's CA there (as SSL_CERT_FILE
        # does for a process started with it).
        aiohttp.connector._SSL_CONTEXT_VERIFIED.load_verify_locations(cafile=str(ca_file))
        monkeypatch.setenv("AZURE_AUTHORITY_HOST", sim.url)
        pem = make_client_certificate(CLIENT)
        sim.azure.register_client(TENANT, CLIENT, pem)
        certificate = tmp_path / "client.pem"
        certificate.write_text(pem)
        yield Vault(sim, str(certificate))


@pytest.fixture
async def github(kube: KubeClient) -> AsyncIterator[GitHubAccess]:
    access = GitHubAccess(
        kube,
        pool=ActionsClientPool(system_info=SystemInfo(subsystem="vault-test")),
        environ=LAB_ENV,
        vault_secrets=KeyVaultSecrets(ttl=0.0, environ=LAB_ENV),
    )
    try:
        yield access
    finally:
        await access.vault_secrets.close()
        await access.pool.aclose()


async def test_with_a_vault_the_credentials_come_from_the_vault_secret_githubconfigsecret_names(
    vault: Vault, github: GitHubAccess, namespace: str
) -> None:
    vault.sim.azure.set_secret("scale-set-creds", json.dumps({"github_token": TOKEN}))
    # No Kubernetes Secret of that name exists in the namespace.
    config = await github.app_config(
        namespace=namespace, secret_name="scale-set-creds", vault=vault.config(), config_url=GITHUB_URL
    )
    assert config == AppConfig(github_token=TOKEN)


async def test_with_a_vault_the_controllers_github_proxy_credentials_come_from_the_vault_too(
    vault: Vault, github: GitHubAccess, namespace: str
) -> None:
    vault.sim.azure.set_secret("proxy-creds", json.dumps({"username": "proxy user", "password": "p@ss/word"}))
    proxy = ProxyConfig(
        https=ProxyServerConfig(url="http://proxy.corp.example:3128", credential_secret_ref="proxy-creds")
    )
    settings = await github.proxy_settings(
        namespace=namespace, proxy=proxy, vault=vault.config(), config_url=GITHUB_URL
    )
    assert settings is not None
    assert settings.https_proxy == "http://proxy%20user:p%40ss%2Fword@proxy.corp.example:3128"


async def test_the_vault_is_reached_through_vaultconfig_proxy_with_credentials_from_a_kubernetes_secret(
    vault: Vault, github: GitHubAccess, namespace: str, kube: KubeClient, proxy: TinyProxy
) -> None:
    vault.sim.azure.set_secret("scale-set-creds", json.dumps({"github_token": TOKEN}))
    await kube.create(
        resources.SECRETS,
        {"metadata": {"name": "vault-proxy"}, "stringData": {"username": proxy.user, "password": proxy.password}},
        namespace=namespace,
    )
    vault_proxy = ProxyConfig(https=ProxyServerConfig(url=proxy.url, credential_secret_ref="vault-proxy"))
    tunnels_before = len(proxy.tunnels())
    config = await github.app_config(
        namespace=namespace, secret_name="scale-set-creds", vault=vault.config(proxy=vault_proxy), config_url=GITHUB_URL
    )
    assert config == AppConfig(github_token=TOKEN)
    # Both the token request and the secret read went through the proxy, which checked its credentials.
    opened = proxy.tunnels()[tunnels_before:]
    assert opened, proxy.requests()
    assert {t.target for t in opened} == {urlsplit(vault.sim.url).netloc}


async def test_vault_failures_are_reported_as_conditions_naming_the_secret_never_its_value(
    vault: Vault, github: GitHubAccess, namespace: str, tmp_path: Path
) -> None:
    with pytest.raises(VaultSecretNotFound, match="has no secret named 'absent'"):
        await github.app_config(namespace=namespace, secret_name="absent", vault=vault.config(), config_url=GITHUB_URL)

    vault.sim.azure.set_secret("not-json", f"github_token={TOKEN}")
    with pytest.raises(InvalidSecret) as caught:
        await github.app_config(
            namespace=namespace, secret_name="not-json", vault=vault.config(), config_url=GITHUB_URL
        )
    assert "not valid JSON" in caught.value.message
    assert TOKEN not in caught.value.message

    with pytest.raises(InvalidVaultConfig, match="the only vault type is 'azure_key_vault'"):
        await github.app_config(
            namespace=namespace, secret_name="absent", vault=vault.config(vault_type="hashicorp"), config_url=GITHUB_URL
        )

    moved = vault.config(certificate_path=str(tmp_path / "gone.pem"))
    with pytest.raises(InvalidVaultConfig, match="is not a file in this container"):
        await github.app_config(namespace=namespace, secret_name="absent", vault=moved, config_url=GITHUB_URL)


@contextlib.asynccontextmanager
async def _restricted(
    kube: KubeClient, controller_namespace: str, grants: dict[str, Any]
) -> AsyncIterator[GitHubAccess]:
    """A GitHubAccess under a vault allow list: ConfigMap ``vault-allow-list`` in ``controller_namespace`` (as
    ``--vault-allow-list`` names it), with ``grants`` by namespace."""
    await kube.create(
        resources.CONFIG_MAPS,
        {"metadata": {"name": ALLOW_LIST}, "data": {ns: json.dumps(grant) for ns, grant in grants.items()}},
        namespace=controller_namespace,
    )
    access = GitHubAccess(
        kube,
        pool=ActionsClientPool(system_info=SystemInfo(subsystem="vault-test")),
        environ=LAB_ENV,
        vault_secrets=KeyVaultSecrets(ttl=60.0, environ=LAB_ENV),
        vault_allow_list=VaultAllowListSource(kube, namespace=controller_namespace, name=ALLOW_LIST, ttl=0.0),
    )
    try:
        yield access
    finally:
        await access.vault_secrets.close()
        await access.pool.aclose()


def _grant(vault: Vault, *, prefix: str, hosts: list[str]) -> dict[str, list[str]]:
    return {
        "vaultUrls": [vault.sim.url + "/"],
        "certificatePaths": [vault.certificate_path],
        "secretPrefixes": [prefix],
        "githubHosts": hosts,
    }


async def test_a_namespace_copying_another_namespaces_vault_config_gets_no_credentials(
    vault: Vault, kube: KubeClient, namespace: str
) -> None:
    # `namespace` is the controller namespace and also team B's; team A's namespace needs no objects here.
    vault.sim.azure.set_secret("team-a-github", json.dumps({"github_token": TOKEN}))
    grants = {"team-a": _grant(vault, prefix="team-a-", hosts=["github.com"])}
    async with _restricted(kube, namespace, grants) as github:
        team_a = await github.app_config(
            namespace="team-a", secret_name="team-a-github", vault=vault.config(), config_url=GITHUB_URL
        )
        assert team_a == AppConfig(github_token=TOKEN)
        reads, grants_issued = vault.sim.azure.secret_reads, vault.sim.azure.token_grants
        # Team B copies team A's vaultConfig and secret name: refused before anything is read (value cached
        # for team A or not), naming the namespace and where the admin allows it.
        with pytest.raises(VaultNotAllowed) as caught:
            await github.app_config(
                namespace=namespace, secret_name="team-a-github", vault=vault.config(), config_url=GITHUB_URL
            )
        assert f"namespace {namespace!r}" in caught.value.message
        assert f"--vault-allow-list ConfigMap {namespace}/{ALLOW_LIST} has no entry for it" in caught.value.message
        assert caught.value.reason == "VaultNotAllowed"
        assert (vault.sim.azure.secret_reads, vault.sim.azure.token_grants) == (reads, grants_issued)


async def test_credentials_read_from_a_vault_go_only_to_a_github_host_the_admin_allowed(
    vault: Vault, kube: KubeClient, namespace: str
) -> None:
    vault.sim.azure.set_secret("team-b-github", json.dumps({"github_token": TOKEN}))
    vault.sim.azure.set_secret("team-b-proxy", json.dumps({"username": "u", "password": "proxy-password"}))
    grant = {**_grant(vault, prefix="team-b-", hosts=["github.com"]), "proxyHosts": ["proxy.corp.example:3128"]}
    grants = {namespace: grant}
    elsewhere = "https://ghes.attacker.example/my-org"
    proxy = ProxyConfig(
        https=ProxyServerConfig(url="http://proxy.corp.example:3128", credential_secret_ref="team-b-proxy")
    )
    async with _restricted(kube, namespace, grants) as github:
        with pytest.raises(VaultNotAllowed, match="may not send credentials read from a vault to githubConfigUrl"):
            await github.app_config(
                namespace=namespace, secret_name="team-b-github", vault=vault.config(), config_url=elsewhere
            )
        # The GitHub proxy's credentials from the vault: the proxy carries the calls to that host, so the same.
        with pytest.raises(VaultNotAllowed, match="githubHosts"):
            await github.proxy_settings(namespace=namespace, proxy=proxy, vault=vault.config(), config_url=elsewhere)
        with pytest.raises(VaultNotAllowed, match="githubHosts"):
            await github.client_for(
                namespace=namespace,
                config_url=elsewhere,
                secret_name="team-b-github",
                proxy=proxy,
                vault=vault.config(),
            )
        assert vault.sim.azure.secret_reads == 0
        # To the allowed host, the same reads are served.
        assert await github.app_config(
            namespace=namespace, secret_name="team-b-github", vault=vault.config(), config_url=GITHUB_URL
        ) == AppConfig(github_token=TOKEN)
        settings = await github.proxy_settings(
            namespace=namespace, proxy=proxy, vault=vault.config(), config_url=GITHUB_URL
        )
        assert settings is not None
        assert settings.https_proxy == "http://u:proxy-password@proxy.corp.example:3128"


async def test_a_proxy_credential_read_from_a_vault_goes_only_to_a_proxy_the_admin_allowed(
    vault: Vault, kube: KubeClient, namespace: str
) -> None:
    # The controller's GitHub proxy credentials come from the vault and go to the proxy the scale set names, as
    # Proxy-Authorization: a proxy of the team's choosing would read them (they never reach a listener or a
    # runner, which get their proxy from a Kubernetes Secret).
    vault.sim.azure.set_secret("team-b-proxy", json.dumps({"username": "u", "password": "proxy-password"}))
    grant = {**_grant(vault, prefix="team-b-", hosts=["github.com"]), "proxyHosts": ["proxy.corp.example:3128"]}
    elsewhere = ProxyConfig(
        https=ProxyServerConfig(url="http://proxy.attacker.example:3128", credential_secret_ref="team-b-proxy")
    )
    async with _restricted(kube, namespace, {namespace: grant}) as github:
        with pytest.raises(VaultNotAllowed) as caught:
            await github.proxy_settings(
                namespace=namespace, proxy=elsewhere, vault=vault.config(), config_url=GITHUB_URL
            )
        assert "to proxy 'proxy.attacker.example:3128' (its host is not in proxyHosts)" in caught.value.message
        assert "proxy-password" not in caught.value.message
        assert vault.sim.azure.secret_reads == 0
        # The proxy the admin allowed gets them (written without a scheme: an http proxy).
        allowed = ProxyConfig(
            https=ProxyServerConfig(url="proxy.corp.example:3128", credential_secret_ref="team-b-proxy")
        )
        settings = await github.proxy_settings(
            namespace=namespace, proxy=allowed, vault=vault.config(), config_url=GITHUB_URL
        )
        assert settings is not None
        assert settings.https_proxy == "http://u:proxy-password@proxy.corp.example:3128"


async def test_without_the_allow_list_configmap_no_namespace_may_use_a_vault(
    vault: Vault, kube: KubeClient, namespace: str
) -> None:
    vault.sim.azure.set_secret("team-b-github", json.dumps({"github_token": TOKEN}))
    async with _restricted(kube, namespace, {}) as github:
        await kube.delete(resources.CONFIG_MAPS, ALLOW_LIST, namespace=namespace)
        with pytest.raises(VaultNotAllowed, match=f"ConfigMap {namespace}/{ALLOW_LIST} does not exist"):
            await github.app_config(
                namespace=namespace, secret_name="team-b-github", vault=vault.config(), config_url=GITHUB_URL
            )
    assert vault.sim.azure.secret_reads == 0
