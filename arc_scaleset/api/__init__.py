"""The ``actions.github.com/v1alpha1`` API: the four kinds as pydantic models, their keys and child names,
and the CRDs generated from them.

Modules: :mod:`~arc_scaleset.api.common` (value types, metadata, base classes), one module per kind,
:mod:`~arc_scaleset.api.keys` (labels, annotations, finalizers, phases), :mod:`~arc_scaleset.api.naming`
(child object names), :mod:`~arc_scaleset.api.labels` (label/annotation derivation),
:mod:`~arc_scaleset.api.versions` (the version gate), :mod:`~arc_scaleset.api.crds` (CRD generation),
:mod:`~arc_scaleset.api.listener_config` (the listener's ``config.json``, written by the controller and read by
the listener; plain dataclasses, with :mod:`~arc_scaleset.api.listener_metrics` for its ``metrics`` section),
:mod:`~arc_scaleset.api.semantic` (semantic equality with the field rules of ARC's types),
:mod:`~arc_scaleset.api.views` (zero-copy views of the four kinds over cached objects).

The names below are importable from the package itself (``from arc_scaleset.api import AutoscalingRunnerSet``)
but loaded on first use: importing the package, or one light module of it (:mod:`~arc_scaleset.api.constants`,
:mod:`~arc_scaleset.api.listener_config`), does not build the kinds' pydantic models. The listener process
needs none of them, and they would cost it about 1 MB (issue 20). The constants resolve to
:mod:`~arc_scaleset.api.constants`, so ``from arc_scaleset.api import EPHEMERAL_RUNNERS`` stays light too.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # What the type checker sees; at run time module __getattr__ below imports each name when first asked for.
    from arc_scaleset.api.autoscalinglistener import (
        AutoscalingListener,
        AutoscalingListenerSpec,
        AutoscalingListenerStatus,
    )
    from arc_scaleset.api.autoscalingrunnerset import (
        AutoscalingRunnerSet,
        AutoscalingRunnerSetSpec,
        AutoscalingRunnerSetStatus,
    )
    from arc_scaleset.api.common import (
        AzureKeyVaultConfig,
        ConfigMapKeySelector,
        KubeObject,
        LocalObjectReference,
        ObjectMeta,
        OwnerReference,
        ProxyConfig,
        ProxyServerConfig,
        ResourceMeta,
        TLSCertificateSource,
        TLSConfig,
        VaultConfig,
    )
    from arc_scaleset.api.constants import (
        API_VERSION,
        AUTOSCALING_LISTENERS,
        AUTOSCALING_RUNNER_SETS,
        EPHEMERAL_RUNNER_SETS,
        EPHEMERAL_RUNNERS,
        GROUP,
        MAX_RUNNERS_UNBOUNDED,
        VERSION,
    )
    from arc_scaleset.api.ephemeralrunner import (
        EphemeralRunner,
        EphemeralRunnerSpec,
        EphemeralRunnerStatus,
    )
    from arc_scaleset.api.ephemeralrunnerset import (
        EphemeralRunnerSet,
        EphemeralRunnerSetSpec,
        EphemeralRunnerSetStatus,
    )
    from arc_scaleset.api.metrics_config import CounterMetric, GaugeMetric, HistogramMetric, MetricsConfig

__all__ = [
    "API_VERSION",
    "AUTOSCALING_LISTENERS",
    "AUTOSCALING_RUNNER_SETS",
    "EPHEMERAL_RUNNERS",
    "EPHEMERAL_RUNNER_SETS",
    "GROUP",
    "MAX_RUNNERS_UNBOUNDED",
    "VERSION",
    "AutoscalingListener",
    "AutoscalingListenerSpec",
    "AutoscalingListenerStatus",
    "AutoscalingRunnerSet",
    "AutoscalingRunnerSetSpec",
    "AutoscalingRunnerSetStatus",
    "AzureKeyVaultConfig",
    "ConfigMapKeySelector",
    "CounterMetric",
    "EphemeralRunner",
    "EphemeralRunnerSet",
    "EphemeralRunnerSetSpec",
    "EphemeralRunnerSetStatus",
    "EphemeralRunnerSpec",
    "EphemeralRunnerStatus",
    "GaugeMetric",
    "HistogramMetric",
    "KubeObject",
    "LocalObjectReference",
    "MetricsConfig",
    "ObjectMeta",
    "OwnerReference",
    "ProxyConfig",
    "ProxyServerConfig",
    "ResourceMeta",
    "TLSCertificateSource",
    "TLSConfig",
    "VaultConfig",
]

# The module that defines each exported name: the lightest one that does (the constants and the metric models
# do not pull in api.common or a kind). tests/unit/api/test_api_package.py checks that every name resolves.
_EXPORTED_BY: dict[str, tuple[str, ...]] = {
    "constants": (
        "API_VERSION", "AUTOSCALING_LISTENERS", "AUTOSCALING_RUNNER_SETS", "EPHEMERAL_RUNNERS",
        "EPHEMERAL_RUNNER_SETS", "GROUP", "MAX_RUNNERS_UNBOUNDED", "VERSION",
    ),
    "metrics_config": ("CounterMetric", "GaugeMetric", "HistogramMetric", "MetricsConfig"),
    "common": (
        "AzureKeyVaultConfig", "ConfigMapKeySelector", "KubeObject", "LocalObjectReference", "ObjectMeta",
        "OwnerReference", "ProxyConfig", "ProxyServerConfig", "ResourceMeta", "TLSCertificateSource", "TLSConfig",
        "VaultConfig",
    ),
    "autoscalinglistener": ("AutoscalingListener", "AutoscalingListenerSpec", "AutoscalingListenerStatus"),
    "autoscalingrunnerset": ("AutoscalingRunnerSet", "AutoscalingRunnerSetSpec", "AutoscalingRunnerSetStatus"),
    "ephemeralrunner": ("EphemeralRunner", "EphemeralRunnerSpec", "EphemeralRunnerStatus"),
    "ephemeralrunnerset": ("EphemeralRunnerSet", "EphemeralRunnerSetSpec", "EphemeralRunnerSetStatus"),
}  # fmt: skip
_MODULE_OF: dict[str, str] = {name: module for module, names in _EXPORTED_BY.items() for name in names}

if not TYPE_CHECKING:
    # Hidden from the type checker, which sees the imports above: a module __getattr__ would make it type every
    # misspelt attribute of the package as Any instead of reporting it.

    def __getattr__(name: str) -> Any:
        """PEP 562: import the module defining ``name`` on first access and cache the value in this package.

        A name that is not exported (nor a submodule Python is importing) raises ``AttributeError`` as usual.
        """
        module = _MODULE_OF.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
