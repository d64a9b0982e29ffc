"""The Azure Key Vault client's settings: ARC's checks, every problem named, and the SDK only imported on use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from arc_scaleset.github import keyvault
from arc_scaleset.github.keyvault import (
    InvalidKeyVaultConfig,
    KeyVaultClient,
    KeyVaultSecrets,
    KeyVaultSettings,
    validate_settings,
)


def settings(tmp_path: Path, **overrides: str) -> KeyVaultSettings:
    certificate = tmp_path / "vault.pem"
    certificate.write_text("not read by validation\n")
    fields = {
        "url": "https://my-vault.vault.azure.net/",
        "tenant_id": "tenant",
        "client_id": "client",
        "certificate_path": str(certificate),
    }
    fields.update(overrides)
    return KeyVaultSettings(**fields)


def test_complete_settings_with_an_existing_certificate_file_are_accepted(tmp_path: Path) -> None:
    validate_settings(settings(tmp_path))


def test_every_missing_field_is_named_at_once(tmp_path: Path) -> None:
    with pytest.raises(InvalidKeyVaultConfig) as caught:
        validate_settings(settings(tmp_path, tenant_id="", client_id="", certificate_path=""))
    assert caught.value.message == (
        "vaultConfig.azureKeyVault: tenantId is not set; clientId is not set; certificatePath is not set"
    )


@pytest.mark.parametrize("url", ["my-vault.vault.azure.net", "http://my-vault.vault.azure.net/", "https://"])
def test_a_vault_url_that_is_not_https_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(InvalidKeyVaultConfig, match="is not an https URL"):
        validate_settings(settings(tmp_path, url=url))


def test_a_certificate_path_with_no_file_says_to_mount_it(tmp_path: Path) -> None:
    with pytest.raises(InvalidKeyVaultConfig, match="is not a file in this container"):
        validate_settings(settings(tmp_path, certificate_path=str(tmp_path / "missing.pem")))


def test_a_certificate_file_without_a_key_is_refused_naming_only_its_path(tmp_path: Path) -> None:
    with pytest.raises(InvalidKeyVaultConfig) as caught:
        KeyVaultClient(settings(tmp_path))
    assert "is not a PEM" in caught.value.message
    assert "not read by validation" not in caught.value.message


def test_the_azure_sdk_is_not_imported_until_a_vault_is_used() -> None:
    code = (
        "import sys, arc_scaleset.controllers.github_access, arc_scaleset.listener.command;"
        "print(sorted(m for m in sys.modules if m.startswith('azure')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


class _CountingClient:
    """Stands in for the SDK-backed client: counts the reads each client made."""

    built: list[_CountingClient] = []

    def __init__(self, settings: KeyVaultSettings, **_: object) -> None:
        self.reads = 0
        _CountingClient.built.append(self)

    async def get_secret(self, name: str) -> str:
        self.reads += 1
        return f"value of {name}"

    async def close(self) -> None:
        pass


async def test_the_namespace_is_part_of_every_client_and_value_cache_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyvault, "KeyVaultClient", _CountingClient)
    _CountingClient.built = []
    cache = KeyVaultSecrets(ttl=3600.0, environ={})
    shared = settings(tmp_path)
    await cache.get_secret(shared, "creds", namespace="team-a")
    await cache.get_secret(shared, "creds", namespace="team-a")
    assert [client.reads for client in _CountingClient.built] == [1]
    # Team B with team A's very settings: a client and a read of its own, nothing from team A's entries.
    await cache.get_secret(shared, "creds", namespace="team-b")
    assert [client.reads for client in _CountingClient.built] == [1, 1]
    assert {key[0] for key in cache._clients} == {"team-a", "team-b"}
    assert {key[0] for key in cache._values} == {"team-a", "team-b"}
