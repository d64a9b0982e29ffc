"""AutoscalingListener objects for the pure-core tests."""

from __future__ import annotations

from typing import Any

from arc_scaleset.api.autoscalinglistener import AutoscalingListener


def listener_object(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "githubConfigUrl": "https://github.com/my-org",
        "githubConfigSecret": "gh-secret",
        "runnerScaleSetId": 7,
        "autoscalingRunnerSetNamespace": "team",
        "autoscalingRunnerSetName": "arc-runners",
        "ephemeralRunnerSetName": "arc-runners",
        "maxRunners": 10,
        "minRunners": 1,
        "image": "ghcr.io/example/arc-scaleset:0.1.0",
    }
    body.update(spec)
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingListener",
        "metadata": {
            "name": "arc-runners-abc12345-listener",
            "namespace": "arc-system",
            "uid": "al-uid",
            "labels": {
                "app.kubernetes.io/component": "runner-scale-set-listener",
                "actions.github.com/organization": "my-org",
            },
        },
        "spec": body,
    }


def parsed_listener(obj: dict[str, Any]) -> AutoscalingListener:
    return AutoscalingListener.from_object(obj)
