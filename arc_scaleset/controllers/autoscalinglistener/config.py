"""The listener's ``config.json`` (spec 3.1), in ARC's exact format, and the Secret that carries it.

:func:`listener_config_document` is pure: the AutoscalingListener, the resolved credentials, the CA PEM and
the controller settings in, the JSON object out (key order as ARC writes it). It validates what the
listener would reject, so a bad config is reported by the controller instead of a crash-looping pod.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import orjson

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.keys import LISTENER_CONFIG_SECRET_KEY
from arc_scaleset.api.labels import filter_and_merge_labels
from arc_scaleset.api.naming import listener_config_secret_name
from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.controllers.github_access import AppConfig
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.kube.ownerrefs import controller_ref


class InvalidListenerConfig(ConfigurationError):  # noqa: N818 - reads as the condition it reports
    reason = "InvalidListenerConfig"


def listener_config_document(
    listener: AutoscalingListener,
    *,
    app_config: AppConfig,
    server_root_ca: str | None,
    settings: ControllerSettings,
) -> dict[str, Any]:
    """The ``config.json`` object for ``listener``; :class:`InvalidListenerConfig` when the listener would
    refuse it."""
    spec = listener.spec
    metrics_addr = settings.listener_metrics_addr if settings.listener_metrics_enabled else ""
    metrics_endpoint = settings.listener_metrics_endpoint if settings.listener_metrics_enabled else ""
    document: dict[str, Any] = {
        "configure_url": spec.github_config_url,
        "vault_type": "",
        "vault_lookup_key": "",
        **app_config.config_fields(),
        "ephemeral_runner_set_namespace": spec.autoscaling_runner_set_namespace,
        "ephemeral_runner_set_name": spec.ephemeral_runner_set_name,
        "max_runners": spec.max_runners,
        "min_runners": spec.min_runners,
        "runner_scale_set_id": spec.runner_scale_set_id,
        "runner_scale_set_name": spec.autoscaling_runner_set_name,
        "server_root_ca": server_root_ca or "",
        "log_level": settings.listener_log_level,
        "log_format": settings.listener_log_format,
        "metrics_addr": metrics_addr,
        "metrics_endpoint": metrics_endpoint,
        "metrics": spec.metrics.to_json() if spec.metrics is not None else None,
    }
    problems = _problems(document)
    if problems:
        raise InvalidListenerConfig("the listener configuration would be rejected: " + "; ".join(problems))
    return document


def _problems(document: Mapping[str, Any]) -> list[str]:
    problems = []
    if not document["configure_url"]:
        problems.append("githubConfigUrl is empty")
    if not document["ephemeral_runner_set_namespace"] or not document["ephemeral_runner_set_name"]:
        problems.append("the EphemeralRunnerSet namespace and name are required")
    if not document["runner_scale_set_id"]:
        problems.append("runnerScaleSetId is 0 (the scale set is not registered yet)")
    if document["max_runners"] < document["min_runners"]:
        problems.append(f"maxRunners ({document['max_runners']}) is below minRunners ({document['min_runners']})")
    return problems


def encode_config(document: Mapping[str, Any]) -> str:
    """The Secret ``data`` value (base64 of the JSON bytes)."""
    return base64.b64encode(orjson.dumps(document)).decode("ascii")


def desired_config_secret(
    listener_object: Mapping[str, Any],
    listener: AutoscalingListener,
    document: Mapping[str, Any],
    *,
    excluded_prefixes: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The ``<listener>-config`` Secret in the listener's namespace, owned by the listener."""
    metadata = listener.spec.config_secret_metadata
    labels = filter_and_merge_labels(metadata.labels if metadata else None, None, excluded_prefixes)
    annotations = metadata.annotations if metadata else None
    meta: dict[str, Any] = {
        "name": listener_config_secret_name(listener.name),
        "namespace": listener.namespace,
        "ownerReferences": [controller_ref(listener_object)],
    }
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "data": {LISTENER_CONFIG_SECRET_KEY: encode_config(document)},
    }


def data_differs(live: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether any key's bytes differ between the live and desired Secret ``data``."""
    live_data = live.get("data") or {}
    desired_data = desired.get("data") or {}
    return set(live_data) != set(desired_data) or any(
        base64.b64decode(live_data[key]) != base64.b64decode(value) for key, value in desired_data.items()
    )
