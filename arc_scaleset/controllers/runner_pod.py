"""The runner pod of an EphemeralRunner, as a pure builder shared by two controllers.

The EphemeralRunner controller creates this pod for each runner; the EphemeralRunnerSet controller sends
the same pod to the API server as a dry run before it creates the first runner of a runner spec
(:mod:`arc_scaleset.controllers.ephemeralrunnerset.template_check`), so a template the API server rejects
is found before any runner is registered on GitHub. One builder for both keeps the dry run honest: it
validates exactly what the runner controller would create.

Label and annotation precedence follows ARC: user metadata is the *base* and the controller's keys the
*overwrite*, so a user can add keys but never change the keys the controller relies on.
"""

from __future__ import annotations

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
from arc_scaleset.api.naming import fnv32a, runner_jit_secret_name, safe_encode
from arc_scaleset.api.views import EphemeralRunnerView
from arc_scaleset.kube.ownerrefs import controller_ref

JIT_TOKEN_KEY: Final = "jitToken"
"""The key of the JIT config in the runner's Secret (the pod reads it into ``JIT_CONFIG_ENV``)."""

JIT_CONFIG_ENV: Final = "ACTIONS_RUNNER_INPUT_JITCONFIG"
USER_AGENT_ENV: Final = "GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT"
DEPRECATED_EXIT_CODE_ENV: Final = "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE"
PROXY_ENV_KEYS: Final = ("http_proxy", "https_proxy", "no_proxy")


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
