"""The listener's ``config.json`` (docs/listener.md) for one AutoscalingListener, and the Secret that carries it.

:func:`listener_config` is pure: the AutoscalingListener, the resolved credentials, the CA PEM and the
controller settings in, a :class:`~arc_scaleset.api.listener_config.ListenerConfig` out. The model holds the
format and the rules the listener reads it with, so a config the listener would refuse is reported here, by
the controller, instead of by a crash-looping pod.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.credentials import AppConfig
from arc_scaleset.api.keys import LISTENER_CONFIG_SECRET_KEY
from arc_scaleset.api.labels import filter_and_merge_labels
from arc_scaleset.api.listener_config import ListenerConfig, ListenerConfigError
from arc_scaleset.api.listener_metrics import ListenerMetricsConfig
from arc_scaleset.api.metrics_config import MetricsConfig
from arc_scaleset.api.naming import listener_config_secret_name
from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.kube.ownerrefs import controller_ref


class InvalidListenerConfig(ConfigurationError):  # noqa: N818 - reads as the condition it reports
    reason = "InvalidListenerConfig"


def listener_config(
    listener: AutoscalingListener,
    *,
    app_config: AppConfig,
    server_root_ca: str | None,
    settings: ControllerSettings,
) -> ListenerConfig:
    """The listener config for ``listener``; :class:`InvalidListenerConfig`, naming every problem, when the
    listener would refuse it.

    The credentials are always in the file, also with a vault (``vaultConfig``): the controller read them there
    (under the vault allow list, docs/github.md) and writes them as it does a Kubernetes Secret's. ARC's
    controller writes the vault's settings instead and lets the listener read the vault itself, which needs the
    vault's client certificate (its private key) mounted into the listener pod, in the controller namespace
    beside every team's listener; here no listener needs it. The listener still reads a file with vault fields,
    as ARC's controller writes it (:mod:`arc_scaleset.listener.vault`).
    """
    spec = listener.spec
    metrics_enabled = settings.listener_metrics_enabled
    try:
        return ListenerConfig(
            configure_url=spec.github_config_url,
            github_app_id=app_config.github_app_id,
            github_app_installation_id=app_config.github_app_installation_id,
            github_app_private_key=app_config.github_app_private_key,
            github_token=app_config.github_token,
            ephemeral_runner_set_namespace=spec.autoscaling_runner_set_namespace,
            ephemeral_runner_set_name=spec.ephemeral_runner_set_name,
            max_runners=spec.max_runners,
            min_runners=spec.min_runners,
            runner_scale_set_id=spec.runner_scale_set_id,
            runner_scale_set_name=spec.autoscaling_runner_set_name,
            server_root_ca=server_root_ca or "",
            log_level=settings.listener_log_level,
            log_format=settings.listener_log_format,
            metrics_addr=settings.listener_metrics_addr if metrics_enabled else "",
            metrics_endpoint=settings.listener_metrics_endpoint if metrics_enabled else "",
            metrics=metrics_for_listener(spec.metrics),
            min_runners_schedule=tuple(window.window() for window in spec.min_runners_schedule or ()),
        )
    except ListenerConfigError as exc:
        raise InvalidListenerConfig(
            "the listener configuration would be rejected: " + "; ".join(exc.problems)
        ) from None


def metrics_for_listener(metrics: MetricsConfig | None) -> ListenerMetricsConfig | None:
    """The AutoscalingListener's ``spec.metrics`` as the listener reads it: decoded from the JSON the CRD model
    writes (only the fields that were set), so the file carries what the object says, as ARC's controller copies
    it. The CRD model has already refused any value the decoding would (labels are strings, buckets numbers)."""
    return None if metrics is None else ListenerMetricsConfig.from_document(metrics.to_json())


def desired_config_secret(
    listener_object: Mapping[str, Any],
    listener: AutoscalingListener,
    config: ListenerConfig,
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
        "data": {LISTENER_CONFIG_SECRET_KEY: base64.b64encode(config.to_json()).decode("ascii")},
    }


def data_differs(live: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether any key's bytes differ between the live and desired Secret ``data``."""
    live_data = live.get("data") or {}
    desired_data = desired.get("data") or {}
    return set(live_data) != set(desired_data) or any(
        base64.b64decode(live_data[key]) != base64.b64decode(value) for key, value in desired_data.items()
    )


def uses_vault(listener: AutoscalingListener) -> bool:
    """Whether the listener's credentials live in a vault (``vaultConfig.type`` set): nothing can watch a vault,
    so the controller reads them again every ``--vault-refresh-interval`` and rewrites the config Secret when
    they changed (which recreates the listener pod, stamped with the Secret's version)."""
    vault = listener.spec.vault_config
    return vault is not None and bool(vault.type)
