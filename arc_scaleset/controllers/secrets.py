"""Reading Secret and ConfigMap data by GET, never from the manager's informer cache.

The manager does not cache Secrets: it would need list/watch on every Secret of every namespace. The readers
here take any :class:`ObjectGetter`: the client itself, or
:class:`~arc_scaleset.controllers.referenced_data.ReferencedData`, which fetches a watched object's data once
per change.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Protocol

from arc_scaleset.controllers.errors import InvalidSecret, SecretNotFound
from arc_scaleset.kube.errors import Forbidden, NotFound
from arc_scaleset.kube.resources import CONFIG_MAPS, SECRETS, Resource


class ObjectGetter(Protocol):
    """What reads one object by name (:meth:`arc_scaleset.kube.client.KubeClient.get` is one)."""

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """The object; :class:`~arc_scaleset.kube.errors.NotFound` when it does not exist."""
        ...


async def read_secret_data(kube: ObjectGetter, namespace: str, name: str, *, purpose: str) -> dict[str, str]:
    """The decoded ``data`` of Secret ``namespace/name`` (values as UTF-8 text).

    ``purpose`` names the field that refers to the Secret, for the error message. Raises
    :class:`SecretNotFound` (missing, or the controller may not read it) and :class:`InvalidSecret` (a value
    that is not base64 UTF-8 text); other API errors propagate.
    """
    if not name:
        raise SecretNotFound(f"{purpose} is empty: set it to the name of a Secret in namespace {namespace}")
    try:
        secret = await kube.get(SECRETS, name, namespace=namespace)
    except NotFound:
        raise SecretNotFound(
            f"Secret {namespace}/{name} (named by {purpose}) does not exist: create it, or fix {purpose}"
        ) from None
    except Forbidden:
        raise SecretNotFound(
            f"the controller may not read Secret {namespace}/{name} (named by {purpose}): grant it get on secrets"
        ) from None
    decoded: dict[str, str] = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            decoded[key] = base64.b64decode(value or "", validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise InvalidSecret(f"key {key!r} of Secret {namespace}/{name} is not UTF-8 text") from None
    return decoded


async def read_config_map_value(kube: ObjectGetter, namespace: str, name: str, key: str) -> str | None:
    """The value of ``key`` in ConfigMap ``namespace/name``; ``None`` when the ConfigMap or the key is missing.

    Other API errors (including Forbidden) propagate.
    """
    try:
        config_map = await kube.get(CONFIG_MAPS, name, namespace=namespace)
    except NotFound:
        return None
    value = (config_map.get("data") or {}).get(key)
    return None if value is None else str(value)
