"""Names of the objects the controller generates, identical to ARC's for the same inputs.

Deterministic names let a reconcile find its children without listing, and let this controller adopt the
children ARC created (an upgrade in place keeps the same listener, secrets and RBAC objects).
"""

from __future__ import annotations

from typing import Final

_FNV32_OFFSET_BASIS: Final = 0x811C9DC5
_FNV32_PRIME: Final = 0x01000193
# k8s.io/apimachinery rand.SafeEncodeString's alphabet: no vowels (no words) and no look-alike characters.
_SAFE_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"


def fnv32a(data: bytes) -> int:
    """The 32-bit FNV-1a hash of ``data``."""
    value = _FNV32_OFFSET_BASIS
    for byte in data:
        value = ((value ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return value


def safe_encode(text: str) -> str:
    """Map each character to the safe alphabet by its code point, as ``rand.SafeEncodeString`` does."""
    return "".join(_SAFE_ALPHABET[ord(char) % len(_SAFE_ALPHABET)] for char in text)


def hash8(text: str) -> str:
    """``h8``: FNV-32a of the UTF-8 text, as a decimal string, safe-encoded, first 8 characters."""
    return safe_encode(str(fnv32a(text.encode("utf-8"))))[:8]


def ephemeral_runner_set_name(autoscaling_runner_set_name: str) -> str:
    """The name this controller gives the EphemeralRunnerSet it creates for a scale set: the
    AutoscalingRunnerSet's. A set adopted from ARC keeps the name ARC's releases generated (``<ARS>-xxxxx``), so
    a scale set's sets are found by owner reference (``api/runner_sets.py``), never by this name."""
    return autoscaling_runner_set_name


def ephemeral_runner_generate_name(ephemeral_runner_set_name: str) -> str:
    """The ``generateName`` prefix of the set's EphemeralRunners (the API server appends 5 characters)."""
    return f"{ephemeral_runner_set_name}-runner-"


def runner_proxy_secret_name(ephemeral_runner_set_name: str, namespace: str) -> str:
    """The Secret with the flattened proxy settings the set's runners use (in the scale set namespace)."""
    return f"{ephemeral_runner_set_name}-{hash8(namespace)}-runner-proxy"


def autoscaling_listener_name(
    autoscaling_runner_set_name: str, *, namespace: str, runner_group: str, github_config_url: str
) -> str:
    """The AutoscalingListener of a scale set, in the controller namespace.

    The hash covers the scale set's namespace, runner group and config URL (``ns@group@url``, the spec values
    as written), so two scale sets with one name in different namespaces, or one moved to another
    group or URL, never share a listener.
    """
    return f"{autoscaling_runner_set_name}-{hash8(f'{namespace}@{runner_group}@{github_config_url}')}-listener"


def listener_pod_name(autoscaling_listener_name: str) -> str:
    return autoscaling_listener_name


def listener_service_account_name(autoscaling_listener_name: str) -> str:
    return autoscaling_listener_name


def listener_role_name(autoscaling_listener_name: str) -> str:
    """The listener's Role lives in the scale set namespace, named after the listener."""
    return autoscaling_listener_name


def listener_role_binding_name(autoscaling_listener_name: str) -> str:
    return autoscaling_listener_name


def listener_config_secret_name(autoscaling_listener_name: str) -> str:
    """The Secret holding the listener's ``config.json`` (controller namespace)."""
    return f"{autoscaling_listener_name}-config"


def listener_proxy_secret_name(autoscaling_listener_name: str) -> str:
    """The Secret with the listener's flattened proxy settings (controller namespace)."""
    return f"{autoscaling_listener_name}-proxy"


def runner_pod_name(ephemeral_runner_name: str) -> str:
    return ephemeral_runner_name


def runner_jit_secret_name(ephemeral_runner_name: str) -> str:
    """The Secret holding a runner's JIT config has the EphemeralRunner's name."""
    return ephemeral_runner_name
