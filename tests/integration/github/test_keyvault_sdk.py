"""The vault client with the real Azure SDK against the simulated identity endpoint and Key Vault over TLS.

The sim's CA is added to the trust store aiohttp verifies with (as ``SSL_CERT_FILE`` does for a process that
starts with it), and ``AZURE_AUTHORITY_HOST`` points the SDK at the sim, as a sovereign cloud's users set it.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp.connector
import pytest

from arc_scaleset.api.credentials import AppConfig
from arc_scaleset.api.listener_config import CONFIG_PATH_ENV, ListenerConfig
from arc_scaleset.github.keyvault import (
    VERIFY_CHALLENGE_RESOURCE_ENV,
    KeyVaultClient,
    KeyVaultSecretNotFound,
    KeyVaultSecrets,
    KeyVaultSettings,
    KeyVaultUnavailable,
)
from arc_scaleset.listener.vault import with_vault_credentials
from arc_scaleset_lab.sim.azure import make_client_certificate
from arc_scaleset_lab.sim.server import SimulatedGitHub
from arc_scaleset_lab.sim.state import SimConfig

TENANT = "00000000-0000-0000-0000-0000000000aa"
CLIENT = "11111111-1111-1111-1111-1111111111bb"
SECRET_VALUE = '{"github_token": "ghp_from_the_vault_0123456789"}'
LAB_ENV = {VERIFY_CHALLENGE_RESOURCE_ENV: "false"}


@dataclass
class Vault:
    sim: SimulatedGitHub
    settings: KeyVaultSettings


@pytest.fixture
async def vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Vault]:
    async with await SimulatedGitHub.start(config=SimConfig(), tls=True) as sim:
        assert sim.ca_pem is not None
        ca_file = tmp_path / "ca.pem"
        ca_file.write_text(sim.ca_pem)
        # aiohttp verifies with a default context it made at import: trust the sim's CA there.
        aiohttp.connector._SSL_CONTEXT_VERIFIED.load_verify_locations(cafile=str(ca_file))
        monkeypatch.setenv("AZURE_AUTHORITY_HOST", sim.url)
        pem = make_client_certificate(CLIENT)
        sim.azure.register_client(TENANT, CLIENT, pem)
        certificate = tmp_path / "client.pem"
        certificate.write_text(pem)
        yield Vault(
            sim,
            KeyVaultSettings(url=sim.url + "/", tenant_id=TENANT, client_id=CLIENT, certificate_path=str(certificate)),
        )


async def test_the_latest_version_of_a_secret_is_read_with_a_client_certificate(vault: Vault) -> None:
    vault.sim.azure.set_secret("github-creds", "old")
    vault.sim.azure.set_secret("github-creds", SECRET_VALUE)
    async with KeyVaultClient(vault.settings, environ=LAB_ENV) as client:
        assert await client.get_secret("github-creds") == SECRET_VALUE
        vault.sim.azure.set_secret("github-creds", "rotated")
        assert await client.get_secret("github-creds") == "rotated"
    # One token for both reads: the SDK keeps it until it nears expiry.
    assert vault.sim.azure.token_grants == 1


async def test_a_missing_secret_is_reported_as_not_found_naming_it(vault: Vault) -> None:
    async with KeyVaultClient(vault.settings, environ=LAB_ENV) as client:
        with pytest.raises(KeyVaultSecretNotFound, match="has no secret named 'nowhere'"):
            await client.get_secret("nowhere")


async def test_a_certificate_the_tenant_does_not_know_is_refused_by_the_identity_endpoint(
    vault: Vault, tmp_path: Path
) -> None:
    vault.sim.azure.set_secret("github-creds", SECRET_VALUE)
    other = tmp_path / "other.pem"
    other.write_text(make_client_certificate(CLIENT))
    settings = KeyVaultSettings(url=vault.settings.url, tenant_id=TENANT, client_id=CLIENT, certificate_path=str(other))
    async with KeyVaultClient(settings, environ=LAB_ENV) as client:
        with pytest.raises(KeyVaultUnavailable) as caught:
            await client.get_secret("github-creds")
    assert "AADSTS700027" in caught.value.message
    assert "could not authenticate" in caught.value.message
    assert "ghp_" not in caught.value.message
    assert vault.sim.azure.secret_reads == 0


async def test_the_sdks_challenge_resource_check_stays_on_unless_turned_off(vault: Vault) -> None:
    # The sim's vault is on a loopback address, not under vault.azure.net: the check refuses it.
    vault.sim.azure.set_secret("github-creds", SECRET_VALUE)
    async with KeyVaultClient(vault.settings, environ={}) as client:
        with pytest.raises(KeyVaultUnavailable, match="does not match the requested domain"):
            await client.get_secret("github-creds")
    assert vault.sim.azure.token_grants == 0


async def test_an_unreachable_vault_is_reported_as_unavailable(vault: Vault) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = KeyVaultSettings(
        url=f"https://127.0.0.1:{port}/",
        tenant_id=TENANT,
        client_id=CLIENT,
        certificate_path=vault.settings.certificate_path,
    )
    async with KeyVaultClient(settings, environ=LAB_ENV) as client:
        with pytest.raises(
            KeyVaultUnavailable, match=re.escape("Azure Key Vault 127.0.0.1: reading secret 'x' failed")
        ):
            await client.get_secret("x")


async def test_a_throttled_vault_is_reported_as_unavailable_at_the_read_deadline_not_after_its_retry_after(
    vault: Vault,
) -> None:
    # The SDK retries a 429 up to 10 times, each after the Retry-After it names, for up to a week in all: a
    # reconcile worker or a starting listener would wait ten hours on this vault.
    vault.sim.azure.set_secret("github-app", SECRET_VALUE)
    vault.sim.azure.throttle_retry_after = 3600
    async with KeyVaultClient(vault.settings, environ=LAB_ENV, deadline=0.5) as client:
        async with asyncio.timeout(30):  # the bound under test is the client's own, far below this
            with pytest.raises(KeyVaultUnavailable, match=re.escape("did not answer within 0.5 s")):
                await client.get_secret("github-app")
    assert vault.sim.azure.secret_reads == 1


async def test_a_burst_of_reads_of_one_secret_costs_one_vault_call_until_the_values_age_out(vault: Vault) -> None:
    vault.sim.azure.set_secret("github-creds", SECRET_VALUE)
    secrets = KeyVaultSecrets(ttl=60.0, environ=LAB_ENV)
    try:
        values = await asyncio.gather(
            *(secrets.get_secret(vault.settings, "github-creds", namespace="team-a") for _ in range(50))
        )
        assert set(values) == {SECRET_VALUE}
        assert await secrets.get_secret(vault.settings, "github-creds", namespace="team-a") == SECRET_VALUE
        assert vault.sim.azure.secret_reads == 1
    finally:
        await secrets.close()
    aged = KeyVaultSecrets(ttl=0.0, environ=LAB_ENV)
    try:
        vault.sim.azure.set_secret("github-creds", "rotated")
        assert await aged.get_secret(vault.settings, "github-creds", namespace="team-a") == "rotated"
        assert await aged.get_secret(vault.settings, "github-creds", namespace="team-a") == "rotated"
        assert vault.sim.azure.secret_reads == 3
    finally:
        await aged.close()


async def test_a_value_one_namespace_read_is_never_served_to_another_from_the_cache(vault: Vault) -> None:
    vault.sim.azure.set_secret("github-creds", SECRET_VALUE)
    secrets = KeyVaultSecrets(ttl=60.0, environ=LAB_ENV)
    try:
        assert await secrets.get_secret(vault.settings, "github-creds", namespace="team-a") == SECRET_VALUE
        assert await secrets.get_secret(vault.settings, "github-creds", namespace="team-a") == SECRET_VALUE
        assert vault.sim.azure.secret_reads == 1
        # The same settings from another namespace: its own client and its own read, never team-a's value.
        assert await secrets.get_secret(vault.settings, "github-creds", namespace="team-b") == SECRET_VALUE
        assert vault.sim.azure.secret_reads == 2
        assert vault.sim.azure.token_grants == 2
    finally:
        await secrets.close()


def _listener_config(vault: Vault, lookup_key: str) -> ListenerConfig:
    return ListenerConfig.from_document(
        {
            "configure_url": vault.sim.config_url("org"),
            "vault_type": "azure_key_vault",
            "vault_lookup_key": lookup_key,
            "azure_key_vault": {
                "tenant_id": vault.settings.tenant_id,
                "client_id": vault.settings.client_id,
                "url": vault.settings.url,
                "certificate_path": vault.settings.certificate_path,
            },
            "ephemeral_runner_set_namespace": "ns",
            "ephemeral_runner_set_name": "set",
            "runner_scale_set_id": 1,
        }
    )


async def test_the_listener_takes_its_credentials_from_the_vault_secret_its_config_names(vault: Vault) -> None:
    vault.sim.azure.set_secret("github-creds", SECRET_VALUE)
    config = await with_vault_credentials(_listener_config(vault, "github-creds"), environ=LAB_ENV)
    assert config.app_config() == AppConfig(github_token="ghp_from_the_vault_0123456789")


async def test_a_listener_whose_vault_secret_is_missing_exits_saying_so(vault: Vault, tmp_path: Path) -> None:
    config_path = tmp_path / "config.json"
    config_path.write_bytes(_listener_config(vault, "nowhere").to_json())
    ca_file = tmp_path / "ca.pem"
    env = {
        **os.environ,
        **LAB_ENV,
        CONFIG_PATH_ENV: str(config_path),
        "AZURE_AUTHORITY_HOST": vault.sim.url,
        "SSL_CERT_FILE": str(ca_file),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "arc_scaleset.cli",
        "listener",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 1, output.decode()
    assert "listener cannot start: cannot read the GitHub credentials from the vault" in output.decode()
    assert "has no secret named 'nowhere'" in output.decode()


def _replace_file(path: str, text: str) -> None:
    """Replace ``path`` as a Secret volume update does (a new file moved in place), with a later mtime."""
    replacement = Path(path + ".new")
    replacement.write_text(text)
    later = time.time_ns() + 10**9
    os.utime(replacement, ns=(later, later))
    replacement.replace(path)


async def test_a_renewed_certificate_file_is_used_without_a_restart(vault: Vault) -> None:
    vault.sim.azure.set_secret("github-creds", SECRET_VALUE)
    secrets = KeyVaultSecrets(ttl=0.0, environ=LAB_ENV)
    try:
        assert await secrets.get_secret(vault.settings, "github-creds", namespace="team-a") == SECRET_VALUE
        assert await secrets.get_secret(vault.settings, "github-creds", namespace="team-a") == SECRET_VALUE
        assert vault.sim.azure.token_grants == 1  # one client, one token
        # The certificate is renewed: the tenant knows only the new one, and the mounted file is replaced.
        renewed = make_client_certificate(CLIENT)
        vault.sim.azure.register_client(TENANT, CLIENT, renewed)
        _replace_file(vault.settings.certificate_path, renewed)
        assert await secrets.get_secret(vault.settings, "github-creds", namespace="team-a") == SECRET_VALUE
        assert vault.sim.azure.token_grants == 2  # a new client, authenticated with the renewed certificate
    finally:
        await secrets.close()
