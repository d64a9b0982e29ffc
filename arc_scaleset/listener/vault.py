"""The listener's credentials from Azure Key Vault, read once at start (``vault_type`` in ``config.json``).

Only for a ``config.json`` ARC's controller wrote (a takeover, or ARC's controller beside this listener): this
project's controller reads the vault itself, under its allow list, and writes the credentials into the config
as it does a Kubernetes Secret's, so no listener pod needs the vault's client certificate (docs/github.md).

As ARC's listener: the secret ``vault_lookup_key`` names holds a JSON object with the GitHub credentials (the
keys of a GitHub config Secret), read with the client certificate at ``azure_key_vault.certificate_path``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from arc_scaleset.api.credentials import CredentialsError, app_config_from_json
from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.github.keyvault import KeyVaultClient, KeyVaultError, KeyVaultSettings


class VaultCredentialsError(Exception):
    """The credentials could not be read from the vault; the message names the vault and the secret, never a
    value."""


async def with_vault_credentials(config: ListenerConfig, *, environ: Mapping[str, str] = os.environ) -> ListenerConfig:
    """``config`` with the credentials read from its vault (``config`` itself when it names no vault).

    :class:`VaultCredentialsError` when the vault settings are unusable, the vault cannot be reached or refuses
    the client, the secret does not exist, or its value breaks the credential rule.
    """
    vault = config.azure_key_vault
    if not config.vault_type or vault is None:
        return config
    settings = KeyVaultSettings(
        url=vault.url, tenant_id=vault.tenant_id, client_id=vault.client_id, certificate_path=vault.certificate_path
    )
    name = config.vault_lookup_key
    try:
        async with KeyVaultClient(settings, environ=environ) as client:
            text = await client.get_secret(name)
    except KeyVaultError as exc:
        raise VaultCredentialsError(f"cannot read the GitHub credentials from the vault: {exc.message}") from None
    try:
        credentials = app_config_from_json(text)
    except CredentialsError as exc:
        raise VaultCredentialsError(f"vault secret {name!r} ({vault.url}) cannot be used: {exc}") from None
    return config.with_credentials(credentials)
