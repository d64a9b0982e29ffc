"""The plain values of the ``actions.github.com/v1alpha1`` API: its group and version, the resource descriptor
of each of the four kinds, and the constants the listener's ``config.json`` shares with the kinds.

Constants only, no models: the listener (docs/listener.md) reads and writes the kinds as plain JSON, so what it
needs from the API lives here, where importing it does not build the kinds' pydantic models (about 1 MB the
listener process would carry for nothing). The kind modules and :mod:`arc_scaleset.api.common` re-export these
names, so either import path gives the same object.
"""

from __future__ import annotations

from typing import Final

from arc_scaleset.kube.resources import Resource

__all__ = [
    "API_VERSION",
    "AUTOSCALING_LISTENERS",
    "AUTOSCALING_RUNNER_SETS",
    "AZURE_KEY_VAULT",
    "EPHEMERAL_RUNNERS",
    "EPHEMERAL_RUNNER_SETS",
    "GROUP",
    "MAX_RUNNERS_UNBOUNDED",
    "VERSION",
]

GROUP: Final = "actions.github.com"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

AUTOSCALING_RUNNER_SETS: Final = Resource(
    GROUP, VERSION, "autoscalingrunnersets", "AutoscalingRunnerSet", namespaced=True
)
AUTOSCALING_LISTENERS: Final = Resource(GROUP, VERSION, "autoscalinglisteners", "AutoscalingListener", namespaced=True)
EPHEMERAL_RUNNER_SETS: Final = Resource(GROUP, VERSION, "ephemeralrunnersets", "EphemeralRunnerSet", namespaced=True)
EPHEMERAL_RUNNERS: Final = Resource(GROUP, VERSION, "ephemeralrunners", "EphemeralRunner", namespaced=True)

MAX_RUNNERS_UNBOUNDED: Final = 2_147_483_647
"""The effective ``maxRunners`` when none is set (Go's MaxInt32)."""

AZURE_KEY_VAULT: Final = "azure_key_vault"
"""The one vault type ARC knows (``vaultConfig.type``, and ``vault_type`` in the listener's config.json)."""
