"""Building AutoscalingRunnerSet objects for the pure-core tests (plain dicts, as read from the API)."""

from __future__ import annotations

import copy
from typing import Any

from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet

RUNNER_TEMPLATE: dict[str, Any] = {
    "spec": {
        "containers": [
            {
                "name": "runner",
                "image": "ghcr.io/actions/actions-runner:latest",
                "command": ["/home/runner/run.sh"],
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
            }
        ]
    }
}


def ars_object(name: str = "arc-runners", namespace: str = "team", **spec: Any) -> dict[str, Any]:
    """An ARS as the API server returns it (uid, generation, an id annotation when ``registered``)."""
    registered = spec.pop("registered", True)
    labels = spec.pop("labels", {"app.kubernetes.io/version": "0.1.0"})
    annotations = spec.pop("annotations", None)
    body: dict[str, Any] = {
        "githubConfigUrl": "https://github.com/my-org",
        "githubConfigSecret": "gh-secret",
        "template": copy.deepcopy(RUNNER_TEMPLATE),
    }
    body.update(spec)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": "ars-uid",
        "generation": 1,
        "resourceVersion": "10",
        "labels": labels,
        "annotations": dict(annotations or {}),
    }
    if registered:
        meta["annotations"].setdefault("runner-scale-set-id", "7")
        meta["annotations"].setdefault("actions.github.com/runner-scale-set-name", name)
        meta["annotations"].setdefault("actions.github.com/runner-group-name", "Default")
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": meta,
        "spec": body,
    }


def parsed(obj: dict[str, Any]) -> AutoscalingRunnerSet:
    return AutoscalingRunnerSet.from_object(obj)
