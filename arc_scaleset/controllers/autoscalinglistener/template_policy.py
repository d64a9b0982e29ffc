"""What a scale set's ``listenerTemplate`` may do (docs/controllers.md, "The listener template policy").

The listener pod runs in the controller namespace, beside every scale set's listener config Secret, each
holding that scale set's PAT or GitHub App key. ARC merges ``listenerTemplate`` into the pod unchecked, so one
team's template could mount another team's credentials, or run on the host. Here the template is checked
before the pod is built:

- **References.** Every Secret or ConfigMap it names (``volumes`` of any kind that names one, ``env``
  ``valueFrom`` and ``envFrom`` of every container, init and ephemeral container, ``imagePullSecrets``) must
  be the scale set's own (:func:`own_references`) or labelled ``actions.github.com/listener-shareable: "true"``
  by a cluster admin (the shell looks that label up; this module stays pure).
- **The pod.** The merged listener pod must meet Pod Security "restricted" with a short list of volume types,
  keep to the cluster's scheduling and stay within a resource bound, unless the admin allows more
  (:mod:`.pod_security`). (Its labels and annotations: :mod:`.metadata_policy`.)

Each :class:`.Violation` names the field as the user wrote it (``listenerTemplate.spec.volumes[1].secret.
secretName``) and says what would allow it. Nothing here reads a value of a Secret.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from arc_scaleset.api.common import ProxyConfig, TLSConfig
from arc_scaleset.api.keys import LABEL_LISTENER_SHAREABLE
from arc_scaleset.api.listener_group import LABEL_GROUP
from arc_scaleset.api.naming import listener_config_secret_name, listener_proxy_secret_name
from arc_scaleset.controllers.autoscalinglistener.metadata_policy import MetadataRules, metadata_rules
from arc_scaleset.controllers.autoscalinglistener.pod_security import PodRules, listener_pod_violations, pod_rules
from arc_scaleset.controllers.autoscalinglistener.violation import ROOT, Violation
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.kube.views import indexed_mappings, nested

SHAREABLE_VALUE: Final = "true"

Kind = Literal["Secret", "ConfigMap"]

_CONTAINER_GROUPS: Final = ("containers", "initContainers", "ephemeralContainers")
_ENV_REFS: Final[tuple[tuple[str, Kind], ...]] = (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap"))
_ENV_FROM_REFS: Final[tuple[tuple[str, Kind], ...]] = (("secretRef", "Secret"), ("configMapRef", "ConfigMap"))
_PROJECTED_REFS: Final[tuple[tuple[str, Kind], ...]] = (("secret", "Secret"), ("configMap", "ConfigMap"))


@dataclass(frozen=True)
class Reference:
    """A Secret or ConfigMap of the controller namespace that the template names, and where."""

    kind: Kind
    name: str
    field: str
    pull_secret: bool = False
    """An ``imagePullSecrets`` entry (the kubelet reads it; the containers do not see it)."""


@dataclass(frozen=True)
class AllowedReferences:
    """The names a template may reference: ``secrets`` and ``config_maps`` anywhere, ``pull_secrets`` only as
    ``imagePullSecrets``."""

    secrets: frozenset[str] = frozenset()
    config_maps: frozenset[str] = frozenset()
    pull_secrets: frozenset[str] = frozenset()

    def permits(self, reference: Reference) -> bool:
        if reference.kind == "ConfigMap":
            return reference.name in self.config_maps
        return reference.name in self.secrets or (reference.pull_secret and reference.name in self.pull_secrets)

    def including(self, shareable: Iterable[tuple[Kind, str]]) -> AllowedReferences:
        """These names plus the ``(kind, name)`` objects found labelled shareable."""
        shared = set(shareable)
        return AllowedReferences(
            secrets=self.secrets | {name for kind, name in shared if kind == "Secret"},
            config_maps=self.config_maps | {name for kind, name in shared if kind == "ConfigMap"},
            pull_secrets=self.pull_secrets,
        )


@dataclass(frozen=True)
class ListenerPolicy:
    """What the cluster admin allows a listener pod beyond the defaults (the controller's flags)."""

    pod: PodRules = field(default_factory=PodRules)
    metadata: MetadataRules = field(default_factory=MetadataRules)

    @classmethod
    def from_settings(cls, settings: ControllerSettings) -> ListenerPolicy:
        return cls(pod=pod_rules(settings), metadata=metadata_rules(settings))


def own_references(
    *,
    listener_name: str,
    scale_set_namespace: str,
    controller_namespace: str,
    github_config_secret: str = "",
    proxy: ProxyConfig | None = None,
    tls: TLSConfig | None = None,
    pull_secrets: Iterable[str] = (),
) -> AllowedReferences:
    """What a scale set owns in the controller namespace: its listener's config and proxy Secrets, the image pull
    Secrets the controller gives every listener (``pull_secrets``) and, only when the scale set itself lives in
    the controller namespace, the Secrets and ConfigMap its spec names (credentials, proxy credentials, CA).

    A scale set elsewhere names those objects in *its* namespace: the same names in the controller namespace
    are somebody else's (its CA and proxy reach the listener through the config and proxy Secrets anyway).
    """
    secrets = {listener_config_secret_name(listener_name), listener_proxy_secret_name(listener_name)}
    config_maps: set[str] = set()
    if scale_set_namespace == controller_namespace:
        secrets.add(github_config_secret)
        if proxy is not None:
            secrets.update(server.credential_secret_ref for server in (proxy.http, proxy.https) if server)
        source = tls.certificate_from if tls is not None else None
        if source is not None and source.config_map_key_ref is not None:
            config_maps.add(source.config_map_key_ref.name)
    return AllowedReferences(
        secrets=frozenset(name for name in secrets if name),
        config_maps=frozenset(name for name in config_maps if name),
        pull_secrets=frozenset(name for name in pull_secrets if name),
    )


def references(template: Mapping[str, Any] | None) -> list[Reference]:
    """Every Secret and ConfigMap ``template`` names (empty names skipped: they reach nothing)."""
    return [ref for ref in _references(_spec(template)) if ref.name]


def check_listener_template(
    template: Mapping[str, Any] | None,
    *,
    pod: Mapping[str, Any],
    allowed: AllowedReferences,
    policy: ListenerPolicy,
) -> list[Violation]:
    """The violations of ``template`` and of ``pod``, the listener pod merged with it (:func:`.pod.
    desired_listener_pod`): references first, then the pod's security, scheduling and resources (the pod's
    labels and annotations: :func:`.metadata_policy.listener_metadata_violations`)."""
    violations = [_reference_violation(ref) for ref in references(template) if not allowed.permits(ref)]
    return violations + listener_pod_violations(pod, template, rules=policy.pod)


def refusal_message(violations: Iterable[Violation]) -> str:
    """One message naming every violation (the condition's and the Event's text)."""
    return "the listener pod is not created: " + "; ".join(str(v) for v in violations)


def is_shareable(obj: Mapping[str, Any]) -> bool:
    """Whether a cluster admin labelled this Secret or ConfigMap shareable with every listener.

    An object the controller made for scale sets is never shareable, whatever its labels: a scale set chooses the
    labels of its listener's config Secret (``listenerConfigSecretMetadata``), and labelling its credentials
    shareable must not let other teams' listeners mount them. That is an object another object controls (a
    listener's config and proxy Secrets), and a shared listener's config Secret, which holds every member's
    credentials and has no owner (it outlives any one member), so it is known by its group label.
    """
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if not isinstance(labels, Mapping) or LABEL_GROUP in labels:
        return False
    controlled = any(ref.get("controller") for ref in metadata.get("ownerReferences") or () if isinstance(ref, Mapping))
    return not controlled and labels.get(LABEL_LISTENER_SHAREABLE) == SHAREABLE_VALUE


# -- walking the template ---------------------------------------------------------------------------------


def _spec(template: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = (template or {}).get("spec") if isinstance(template, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def _name(value: object) -> str:
    return value if isinstance(value, str) else ""


def _references(spec: Mapping[str, Any]) -> Iterator[Reference]:
    base = f"{ROOT}.spec"
    for i, volume in indexed_mappings(spec.get("volumes")):
        yield from _volume_references(volume, f"{base}.volumes[{i}]")
    for group in _CONTAINER_GROUPS:
        for i, container in indexed_mappings(spec.get(group)):
            where = f"{base}.{group}[{i}]"
            for j, var in indexed_mappings(container.get("env")):
                for key, kind in _ENV_REFS:
                    ref = nested(var, "valueFrom", key)
                    if isinstance(ref, Mapping):
                        yield Reference(kind, _name(ref.get("name")), f"{where}.env[{j}].valueFrom.{key}.name")
            for j, source in indexed_mappings(container.get("envFrom")):
                for key, kind in _ENV_FROM_REFS:
                    ref = source.get(key)
                    if isinstance(ref, Mapping):
                        yield Reference(kind, _name(ref.get("name")), f"{where}.envFrom[{j}].{key}.name")
    for i, secret in indexed_mappings(spec.get("imagePullSecrets")):
        yield Reference("Secret", _name(secret.get("name")), f"{base}.imagePullSecrets[{i}].name", pull_secret=True)


def _volume_references(volume: Mapping[str, Any], where: str) -> Iterator[Reference]:
    secret = volume.get("secret")
    if isinstance(secret, Mapping):
        yield Reference("Secret", _name(secret.get("secretName")), f"{where}.secret.secretName")
    config_map = volume.get("configMap")
    if isinstance(config_map, Mapping):
        yield Reference("ConfigMap", _name(config_map.get("name")), f"{where}.configMap.name")
    for j, source in indexed_mappings(nested(volume, "projected", "sources")):
        for key, kind in _PROJECTED_REFS:
            ref = source.get(key)
            if isinstance(ref, Mapping):
                yield Reference(kind, _name(ref.get("name")), f"{where}.projected.sources[{j}].{key}.name")
    # Storage drivers that take credentials from a Secret of the pod's namespace (csi, cephfs, rbd,
    # flexVolume, iscsi, scaleIO, storageos, cinder, azureFile): as much a read of another team's Secret.
    for source_name, source in volume.items():
        if not isinstance(source, Mapping) or source_name in ("secret", "configMap", "projected"):
            continue
        for key in ("secretRef", "nodePublishSecretRef"):
            ref = source.get(key)
            if isinstance(ref, Mapping):
                yield Reference("Secret", _name(ref.get("name")), f"{where}.{source_name}.{key}.name")
        if source_name == "azureFile":
            yield Reference("Secret", _name(source.get("secretName")), f"{where}.azureFile.secretName")


def _reference_violation(ref: Reference) -> Violation:
    what = "image pull Secret" if ref.pull_secret else ref.kind
    own = (
        "one the controller gives every listener (--auto-scaler-image-pull-secrets)"
        if ref.pull_secret
        else "this scale set's"
    )
    return Violation(
        ref.field,
        f"{what} {ref.name!r} in the controller namespace is neither {own} nor labelled"
        f' {LABEL_LISTENER_SHAREABLE}: "{SHAREABLE_VALUE}" by a cluster admin',
    )
