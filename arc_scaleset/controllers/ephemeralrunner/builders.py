"""Desired objects of an EphemeralRunner, as pure builders: the JIT config Secret and the runner pod it owns.

Label and annotation precedence follows ARC: user metadata is the *base* and the controller's keys the
*overwrite*, so a user can add keys but never change the keys the controller relies on.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping
from typing import Any, Final

import arc_scaleset
from arc_scaleset.api.keys import (
    EPHEMERAL_RUNNER_LABEL_VALUE,
    LABEL_EPHEMERAL_RUNNER,
    LABEL_POD_TEMPLATE_HASH,
    RUNNER_CONTAINER_NAME,
)
from arc_scaleset.api.labels import filter_and_merge_labels
from arc_scaleset.api.naming import (
    fnv32a,
    runner_jit_secret_name,
    safe_encode,
)
from arc_scaleset.api.views import EphemeralRunnerView
from arc_scaleset.kube.ownerrefs import controller_ref

JIT_TOKEN_KEY: Final = "jitToken"
RUNNER_NAME_KEY: Final = "runnerName"
RUNNER_ID_KEY: Final = "runnerId"
SCALE_SET_ID_KEY: Final = "scaleSetId"

JIT_CONFIG_ENV: Final = "ACTIONS_RUNNER_INPUT_JITCONFIG"
USER_AGENT_ENV: Final = "GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT"
DEPRECATED_EXIT_CODE_ENV: Final = "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE"
PROXY_ENV_KEYS: Final = ("http_proxy", "https_proxy", "no_proxy")


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
    labels = filter_and_merge_labels(secret_meta.get("labels"), None)
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


# -- the runner pod --------------------------------------------------------------------------------------


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def runner_env(er: Mapping[str, Any], *, version: str = arc_scaleset.__version__) -> list[dict[str, Any]]:
    """The variables appended to the ``runner`` container, as ARC appends them: JIT config, user agent, the
    deprecated-version exit code, and the proxy variables from ``spec.proxySecretRef`` for configured parts."""
    view = EphemeralRunnerView(er)
    name = view.name
    env = [
        _secret_env(JIT_CONFIG_ENV, runner_jit_secret_name(name), JIT_TOKEN_KEY),
        {"name": USER_AGENT_ENV, "value": f"actions-runner-controller/{version}"},
        {"name": DEPRECATED_EXIT_CODE_ENV, "value": "1"},
    ]
    proxy = view.proxy
    proxy_secret = view.proxy_secret_ref
    if proxy_secret:
        if proxy.get("http") is not None:
            env.append(_secret_env("http_proxy", proxy_secret, "http_proxy"))
        if proxy.get("https") is not None:
            env.append(_secret_env("https_proxy", proxy_secret, "https_proxy"))
        if proxy.get("noProxy"):
            env.append(_secret_env("no_proxy", proxy_secret, "no_proxy"))
    return env


def pod_template_hash(runner_name: str, runner_id: int) -> str:
    """The informational ``pod-template-hash`` label (nothing reads it back). Computed from the runner's
    identity rather than the JIT Secret's data, so no value derived from a secret reaches metadata."""
    return safe_encode(str(fnv32a(f"{runner_name}/{runner_id}".encode())))


def desired_runner_pod(
    er: Mapping[str, Any], *, runner_id: int, version: str = arc_scaleset.__version__
) -> dict[str, Any]:
    """The runner pod of ``er``: its inlined template plus the runner's labels, annotations and env."""
    view = EphemeralRunnerView(er)
    template_meta = view.pod_metadata
    name = view.name
    labels = {
        **view.labels,
        **(template_meta.get("labels") or {}),
        LABEL_EPHEMERAL_RUNNER: EPHEMERAL_RUNNER_LABEL_VALUE,
        LABEL_POD_TEMPLATE_HASH: pod_template_hash(name, runner_id),
    }
    annotations = {**view.annotations, **(template_meta.get("annotations") or {})}
    pod_spec = copy.deepcopy(dict(view.pod_spec))
    extra_env = runner_env(er, version=version)
    containers = []
    for container in pod_spec.get("containers") or []:
        if isinstance(container, dict) and container.get("name") == RUNNER_CONTAINER_NAME:
            container = {**container, "env": [*(container.get("env") or []), *extra_env]}
        containers.append(container)
    pod_spec["containers"] = containers
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": view.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [controller_ref(er)],
        },
        "spec": pod_spec,
    }
