"""The ``actions.github.com/v1alpha1`` API: the four kinds as pydantic models, their keys and child names,
and the CRDs generated from them.

Modules: :mod:`~arc_scaleset.api.common` (value types, metadata, base classes), one module per kind,
:mod:`~arc_scaleset.api.keys` (labels, annotations, finalizers, phases), :mod:`~arc_scaleset.api.naming`
(child object names), :mod:`~arc_scaleset.api.labels` (label/annotation derivation),
:mod:`~arc_scaleset.api.versions` (the version gate), :mod:`~arc_scaleset.api.crds` (CRD generation),
:mod:`~arc_scaleset.api.listener_config` (the listener's ``config.json``, written by the controller and read by
the listener), :mod:`~arc_scaleset.api.semantic` (semantic equality with the field rules of ARC's types),
:mod:`~arc_scaleset.api.views` (zero-copy views of the four kinds over cached objects).
"""

from arc_scaleset.api.autoscalinglistener import (
    AUTOSCALING_LISTENERS,
    AutoscalingListener,
    AutoscalingListenerSpec,
    AutoscalingListenerStatus,
)
from arc_scaleset.api.autoscalingrunnerset import (
    AUTOSCALING_RUNNER_SETS,
    MAX_RUNNERS_UNBOUNDED,
    AutoscalingRunnerSet,
    AutoscalingRunnerSetSpec,
    AutoscalingRunnerSetStatus,
)
from arc_scaleset.api.common import (
    API_VERSION,
    GROUP,
    VERSION,
    AzureKeyVaultConfig,
    ConfigMapKeySelector,
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    KubeObject,
    LocalObjectReference,
    MetricsConfig,
    ObjectMeta,
    OwnerReference,
    ProxyConfig,
    ProxyServerConfig,
    ResourceMeta,
    TLSCertificateSource,
    TLSConfig,
    VaultConfig,
)
from arc_scaleset.api.ephemeralrunner import (
    EPHEMERAL_RUNNERS,
    EphemeralRunner,
    EphemeralRunnerSpec,
    EphemeralRunnerStatus,
)
from arc_scaleset.api.ephemeralrunnerset import (
    EPHEMERAL_RUNNER_SETS,
    EphemeralRunnerSet,
    EphemeralRunnerSetSpec,
    EphemeralRunnerSetStatus,
)

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
