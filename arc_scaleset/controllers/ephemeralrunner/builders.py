"""Desired objects of an EphemeralRunner, as pure builders: the JIT config Secret and the runner pod it owns.

Label and annotation precedence follows ARC: user metadata is the *base* and the controller's keys the
*overwrite*, so a user can add keys but never change the keys the controller relies on.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Final

from arc_scaleset.api.keys import LABEL_RUNNER_INSTANCE, RUNNER_CONTAINER_NAME
from arc_scaleset.api.labels import filter_and_merge_labels
from arc_scaleset.api.naming import runner_jit_secret_name
from arc_scaleset.api.views import EphemeralRunnerView

# The pod builder is shared with the EphemeralRunnerSet controller's dry run of the template; re-exported here.
from arc_scaleset.controllers.runner_pod import (
    DEPRECATED_EXIT_CODE_ENV,
    JIT_CONFIG_ENV,
    JIT_TOKEN_KEY,
    PROXY_ENV_KEYS,
    USER_AGENT_ENV,
    desired_runner_pod,
    pod_template_hash,
    runner_env,
)
from arc_scaleset.kube.ownerrefs import controller_ref

RUNNER_NAME_KEY: Final = "runnerName"
RUNNER_ID_KEY: Final = "runnerId"
SCALE_SET_ID_KEY: Final = "scaleSetId"


# -- the JIT config Secret ------------------------------------------------------------------------------


def runner_work_folder(er: Mapping[str, Any]) -> str:
    """The ``runner`` container's ``workingDir`` (the JIT config's work folder), or ``""``."""
    container = EphemeralRunnerView(er).container(RUNNER_CONTAINER_NAME)
    return str((container or {}).get("workingDir") or "")


def desired_jit_secret(
    er: Mapping[str, Any], *, encoded_jit_config: str, runner_id: int, runner_name: str, scale_set_id: int
) -> dict[str, Any]:
    """The Secret holding a runner's one-shot JIT config, named after and owned by the EphemeralRunner."""
    view = EphemeralRunnerView(er)
    secret_meta = view.config_secret_metadata
    metadata: dict[str, Any] = {
        "name": runner_jit_secret_name(view.name),
        "namespace": view.namespace,
        "ownerReferences": [controller_ref(er)],
    }
    # The runner's instance label lets a scale-down delete the Secrets of a batch of runners in one request.
    instance = view.label(LABEL_RUNNER_INSTANCE)
    labels = filter_and_merge_labels(secret_meta.get("labels"), {LABEL_RUNNER_INSTANCE: instance} if instance else None)
    if labels:
        metadata["labels"] = labels
    if secret_meta.get("annotations"):
        metadata["annotations"] = dict(secret_meta["annotations"])
    data = {
        JIT_TOKEN_KEY: encoded_jit_config,
        RUNNER_NAME_KEY: runner_name,
        RUNNER_ID_KEY: str(runner_id),
        SCALE_SET_ID_KEY: str(scale_set_id),
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "data": {key: base64.b64encode(value.encode("utf-8")).decode("ascii") for key, value in data.items()},
    }


def secret_runner_id(secret: Mapping[str, Any]) -> int | None:
    """The ``runnerId`` a JIT Secret records, or ``None`` when it is missing or not a positive integer."""
    raw = (secret.get("data") or {}).get(RUNNER_ID_KEY)
    if not isinstance(raw, str):
        return None
    try:
        value = int(base64.b64decode(raw, validate=True).decode("utf-8").strip(), 10)
    except ValueError:
        return None
    return value if value > 0 else None


__all__ = [
    "DEPRECATED_EXIT_CODE_ENV",
    "JIT_CONFIG_ENV",
    "JIT_TOKEN_KEY",
    "PROXY_ENV_KEYS",
    "RUNNER_ID_KEY",
    "RUNNER_NAME_KEY",
    "SCALE_SET_ID_KEY",
    "USER_AGENT_ENV",
    "desired_jit_secret",
    "desired_runner_pod",
    "pod_template_hash",
    "runner_env",
    "runner_work_folder",
    "secret_runner_id",
]
