"""Which labels and annotations a scale set may put on its listener's objects in the controller namespace
(docs/controllers.md, "Tenancy").

The listener's pod and ServiceAccount live in the controller namespace, where what their metadata says is
trusted by others:

- **Workload identity.** A cloud's identity webhook or agent gives a pod a cloud role from its ServiceAccount's
  annotations (``eks.amazonaws.com/role-arn``, ``iam.gke.io/gcp-service-account``,
  ``azure.workload.identity/client-id``), or from the pod's own labels and annotations
  (``azure.workload.identity/use``, aad-pod-identity's ``aadpodidbinding``, kube2iam's
  ``iam.amazonaws.com/role``). Such keys (:data:`IDENTITY_KEY_PREFIXES`, :data:`IDENTITY_KEYS`) are refused on
  the listener ServiceAccount (``listenerServiceAccountMetadata``) and on the listener pod (the scale set's
  labels, copied to its listener, and ``listenerTemplate.metadata``): the role is the controller namespace's
  to give, not the tenant's to pick.
- **The controller's selector.** A listener pod carrying one of the controller pod's own selector labels with
  the same value (``app.kubernetes.io/name: gha-rs-controller``, ...; the chart passes them with
  ``--controller-selector-label``) would be picked by the NetworkPolicies and Services meant for the
  controller: refused.

A key the admin lists with ``--allow-listener-metadata-key`` (exactly, or a prefix ending in ``/``) is
allowed. Refusing rather than dropping the key: a listener that silently ran without the role its team asked
for would fail later and elsewhere, while a refusal says at once what to fix and what would allow it; and
nothing is written before the check (so the ServiceAccount never carries the key). Pure.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from arc_scaleset.api.common import ResourceMeta
from arc_scaleset.controllers.autoscalinglistener.violation import ROOT, Violation
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.kube.views import mapping

ALLOW_KEY_FLAG: Final = "--allow-listener-metadata-key"
SELECTOR_LABEL_FLAG: Final = "--controller-selector-label"
SERVICE_ACCOUNT_FIELD: Final = "listenerServiceAccountMetadata"
IDENTITY_KEY_PREFIXES: Final = (
    "eks.amazonaws.com/",  # IRSA: role-arn, audience, token-expiration, sts-regional-endpoints
    "iam.gke.io/",  # GKE workload identity: gcp-service-account
    "azure.workload.identity/",  # client-id, tenant-id, use, service-account-token-expiration, ...
    "iam.amazonaws.com/",  # kube2iam and kiam: role
)
IDENTITY_KEYS: Final = frozenset({"aadpodidbinding"})  # aad-pod-identity's pod label


@dataclass(frozen=True)
class MetadataRules:
    """The controller's selector labels, and the keys the admin allows anyway."""

    controller_labels: Mapping[str, str] = field(default_factory=dict)
    allowed_keys: tuple[str, ...] = ()

    def allows(self, key: str) -> bool:
        return any(
            key == allowed or (allowed.endswith("/") and key.startswith(allowed)) for allowed in self.allowed_keys
        )


def metadata_rules(settings: ControllerSettings) -> MetadataRules:
    """The rules the controller's flags set."""
    return MetadataRules(
        controller_labels=settings.controller_selector_labels, allowed_keys=settings.allowed_listener_metadata_keys
    )


def is_identity_key(key: str) -> bool:
    return key in IDENTITY_KEYS or key.startswith(IDENTITY_KEY_PREFIXES)


def listener_metadata_violations(
    *,
    service_account: ResourceMeta | None,
    pod: Mapping[str, Any],
    template: Mapping[str, Any] | None,
    rules: MetadataRules,
) -> list[Violation]:
    """The refused keys of ``listenerServiceAccountMetadata`` (``service_account``) and of the merged listener
    ``pod`` built with ``template``."""
    return service_account_violations(service_account, rules=rules) + pod_metadata_violations(
        pod, template, rules=rules
    )


def service_account_violations(metadata: ResourceMeta | None, *, rules: MetadataRules) -> list[Violation]:
    """The identity keys among the labels and annotations ``listenerServiceAccountMetadata`` asks for."""
    if metadata is None:
        return []
    found: list[Violation] = []
    for kind, values in (("labels", metadata.labels), ("annotations", metadata.annotations)):
        found += _identity_violations(values or {}, rules, where=functools.partial(_field, SERVICE_ACCOUNT_FIELD, kind))
    return found


def pod_metadata_violations(
    pod: Mapping[str, Any], template: Mapping[str, Any] | None, *, rules: MetadataRules
) -> list[Violation]:
    """The refused labels and annotations of the merged listener ``pod``, named where the user wrote them: the
    template's ``metadata``, or the scale set's labels (the listener's own, copied from its scale set)."""
    meta = mapping(pod.get("metadata"))
    template_meta = mapping(mapping(template).get("metadata"))
    found: list[Violation] = []
    for kind in ("labels", "annotations"):
        values = {str(k): str(v) for k, v in mapping(meta.get(kind)).items()}
        from_template = mapping(template_meta.get(kind))

        def where(key: str, kind: str = kind, from_template: Mapping[str, Any] = from_template) -> str:
            if key in from_template:
                return _field(f"{ROOT}.metadata", kind, key)
            return f"{_field('metadata', kind, key)} of the AutoscalingRunnerSet (copied to its listener pod)"

        found += _identity_violations(values, rules, where=where)
        if kind == "labels":
            found += [
                Violation(
                    where(key),
                    f"{key}={value} is a selector label of the controller's own pod: NetworkPolicies and Services "
                    f"meant for the controller would select the listener (allowed only by {ALLOW_KEY_FLAG}={key})",
                )
                for key, value in values.items()
                if rules.controller_labels.get(key) == value and not rules.allows(key)
            ]
    return found


def _identity_violations(
    values: Mapping[str, Any], rules: MetadataRules, *, where: Callable[[str], str]
) -> Iterator[Violation]:
    for key in values:
        if is_identity_key(key) and not rules.allows(key):
            yield Violation(
                where(key),
                "a workload-identity key would give the listener, in the controller namespace, a cloud role its "
                f"team chose; allowed only by {ALLOW_KEY_FLAG}={key}",
            )


def _field(base: str, kind: str, key: str) -> str:
    return f'{base}.{kind}["{key}"]'
