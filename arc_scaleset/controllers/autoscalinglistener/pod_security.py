"""What the listener pod may be, by allow list (docs/controllers.md, "The listener template policy").

Every listener pod runs in the controller namespace, outside its team's quotas and beside every other team's
listener credentials, so the pod built from a ``listenerTemplate`` (the *merged* pod: what would be created)
must be:

- **Pod Security "restricted"** (the Kubernetes Pod Security Standards profile, baseline included): no host
  namespaces, host processes, ``hostPort`` or privileged containers; capabilities ``drop: [ALL]`` and add
  nothing but ``NET_BIND_SERVICE``; ``allowPrivilegeEscalation: false``; ``runAsNonRoot: true`` (pod or every
  container) and no ``runAsUser: 0``; seccomp ``RuntimeDefault`` or ``Localhost`` (pod or every container);
  AppArmor not ``Unconfined``; SELinux types ``container_t``, ``container_init_t``, ``container_kvm_t`` or
  ``container_engine_t`` only, no SELinux user or role; ``procMount: Default``; only the safe sysctls. Unlike
  the profile, the Windows exemptions do not apply (a listener pod runs on Linux). Volumes are narrower than
  the profile's: ``configMap``, ``secret``, ``emptyDir``, ``projected`` and ``downwardAPI`` only (no
  ``persistentVolumeClaim``, ``ephemeral`` or ``csi``: storage of the controller namespace, or a driver's).
  All of it is lifted by ``--allow-privileged-listener-template``.
- **Scheduled by the cluster's rules**: ``nodeName`` (bypasses the scheduler and ``NoSchedule`` taints),
  ``tolerations`` (control-plane and dedicated nodes), ``priorityClassName`` and ``priority`` (preempt other
  pods), ``runtimeClassName`` (another runtime handler) and ``schedulerName`` are refused unless
  ``--allow-listener-template-scheduling``. ``nodeSelector``, ``affinity`` and ``topologySpreadConstraints``
  are allowed: they only narrow the nodes the scheduler may choose, and still respect taints.
- **Bounded**: every container's ``requests`` and ``limits``, one by one and summed over the pod's containers
  and init containers, at most ``--listener-template-max-resources`` (default
  :data:`~arc_scaleset.controllers.settings.DEFAULT_LISTENER_RESOURCE_BOUND`); a
  resource it does not name (GPUs, hugepages) may not be asked for at all, and neither may a device through
  dynamic resource allocation: ``resourceClaims`` names a ResourceClaim or ResourceClaimTemplate of the pod's
  namespace, the controller namespace, where other teams' listener pods and their claims are, and its devices
  are outside any bound. No flag allows it (a listener needs no device).

Each :class:`.Violation` names the field where the user wrote it: the template's containers by name (the
listener container's settings override the controller's key by key), its volumes after the controller's own.
Pure: the shell builds the merged pod (:func:`.pod.desired_listener_pod`) and passes it with the template.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from arc_scaleset.controllers.autoscalinglistener.violation import ROOT, Violation
from arc_scaleset.controllers.settings import DEFAULT_LISTENER_RESOURCE_BOUND, ControllerSettings, parse_resource_bound
from arc_scaleset.kube.quantity import InvalidQuantity, Quantity, parse_quantity
from arc_scaleset.kube.views import indexed_mappings, mapping, nested

ALLOW_PRIVILEGED_FLAG: Final = "--allow-privileged-listener-template"
ALLOW_SCHEDULING_FLAG: Final = "--allow-listener-template-scheduling"
MAX_RESOURCES_FLAG: Final = "--listener-template-max-resources"

ALLOWED_VOLUME_SOURCES: Final = frozenset({"configMap", "secret", "emptyDir", "projected", "downwardAPI"})
SCHEDULING_FIELDS: Final = (
    "nodeName",
    "tolerations",
    "priorityClassName",
    "priority",
    "runtimeClassName",
    "schedulerName",
)
SAFE_SYSCTLS: Final = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
SELINUX_TYPES: Final = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
ADDABLE_CAPABILITIES: Final = frozenset({"NET_BIND_SERVICE"})
CONFINED_PROFILES: Final = frozenset({"RuntimeDefault", "Localhost"})
APPARMOR_ANNOTATION_PREFIX: Final = "container.apparmor.security.beta.kubernetes.io/"

_At = Callable[[str], str]
"""A field path below a pod's or container's ``securityContext`` (or container) -> where the user wrote it."""
_CONTAINER_GROUPS: Final = ("containers", "initContainers", "ephemeralContainers")
_RESOURCE_GROUPS: Final = ("containers", "initContainers")  # ephemeral containers take no resources


@dataclass(frozen=True)
class PodRules:
    """What the cluster admin allows beyond the default policy (the controller's flags)."""

    allow_privileged: bool = False
    allow_scheduling: bool = False
    max_resources: Mapping[str, Quantity] = field(
        default_factory=lambda: parse_resource_bound(DEFAULT_LISTENER_RESOURCE_BOUND)
    )


def pod_rules(settings: ControllerSettings) -> PodRules:
    """The rules the controller's flags set."""
    return PodRules(
        allow_privileged=settings.allow_privileged_listener_template,
        allow_scheduling=settings.allow_listener_template_scheduling,
        max_resources=settings.listener_template_max_resources,
    )


def listener_pod_violations(
    pod: Mapping[str, Any], template: Mapping[str, Any] | None, *, rules: PodRules
) -> list[Violation]:
    """The violations of the merged listener ``pod`` built with ``template``, in field order: Pod Security,
    then scheduling, then resources (each group unless the admin allows it; resources always, against the
    bound)."""
    spec = mapping(pod.get("spec"))
    where = _Where(spec, mapping(mapping(template).get("spec")))
    found: list[Violation] = []
    if not rules.allow_privileged:
        found += _restricted_violations(pod, spec, where)
    if not rules.allow_scheduling:
        found += [
            Violation(
                where.pod(name), f"{_words(name)} is refused unless the controller runs with {ALLOW_SCHEDULING_FLAG}"
            )
            for name in SCHEDULING_FIELDS
            if spec.get(name) not in (None, "", [], 0)
        ]
    found += _resource_violations(spec, where, rules.max_resources)
    return found


# -- where the user wrote it -----------------------------------------------------------------------------


class _Where:
    """The field path, as the user wrote it, of a part of the merged pod."""

    def __init__(self, spec: Mapping[str, Any], template_spec: Mapping[str, Any]) -> None:
        self._template_containers = [c.get("name") for _, c in indexed_mappings(template_spec.get("containers"))]
        template_volumes = len(list(indexed_mappings(template_spec.get("volumes"))))
        self._own_volumes = len(list(indexed_mappings(spec.get("volumes")))) - template_volumes

    def pod(self, path: str) -> str:
        return f"{ROOT}.spec.{path}"

    def container(self, group: str, index: int, container: Mapping[str, Any], path: str) -> str:
        if group == "containers":
            name = container.get("name")
            if name not in self._template_containers:
                return f"the listener pod's spec.containers[{index}].{path}"  # the controller's own, unchanged
            index = self._template_containers.index(name)
        return f"{ROOT}.spec.{group}[{index}].{path}"

    def volume(self, index: int, path: str) -> str:
        return f"{ROOT}.spec.volumes[{index - self._own_volumes}].{path}"


# -- Pod Security "restricted" ------------------------------------------------------------------------------


def _restricted(what: str) -> str:
    return f'{what} (Pod Security "restricted"; allowed only with {ALLOW_PRIVILEGED_FLAG})'


def _restricted_violations(pod: Mapping[str, Any], spec: Mapping[str, Any], where: _Where) -> list[Violation]:
    found: list[Violation] = []
    for name in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(name) is True:
            found.append(Violation(where.pod(name), _restricted("a host namespace is refused")))
    context = mapping(spec.get("securityContext"))
    found += _context_violations(context, lambda path: where.pod(f"securityContext.{path}"))
    for i, sysctl in indexed_mappings(context.get("sysctls")):
        if sysctl.get("name") not in SAFE_SYSCTLS:
            found.append(
                Violation(
                    where.pod(f"securityContext.sysctls[{i}].name"),
                    _restricted(f"sysctl {sysctl.get('name')!r} is not a safe one"),
                )
            )
    for i, volume in indexed_mappings(spec.get("volumes")):
        for source in sorted(set(volume) - {"name"} - ALLOWED_VOLUME_SOURCES):
            found.append(
                Violation(
                    where.volume(i, source),
                    _restricted(
                        f"a {source} volume is refused (configMap, secret, emptyDir, projected and downwardAPI only)"
                    ),
                )
            )
    pod_non_root = context.get("runAsNonRoot") is True
    pod_seccomp = nested(context, "seccompProfile", "type") is not None
    for group in _CONTAINER_GROUPS:
        for i, container in indexed_mappings(spec.get(group)):
            at = functools.partial(where.container, group, i, container)
            found += _container_violations(container, at, pod_non_root=pod_non_root, pod_seccomp=pod_seccomp)
    annotations = mapping(mapping(pod.get("metadata")).get("annotations"))
    for key, value in annotations.items():
        if (
            key.startswith(APPARMOR_ANNOTATION_PREFIX)
            and value != "runtime/default"
            and not str(value).startswith("localhost/")
        ):
            found.append(
                Violation(
                    f'{ROOT}.metadata.annotations["{key}"]', _restricted(f"AppArmor profile {value!r} is refused")
                )
            )
    return found


def _container_violations(
    container: Mapping[str, Any], at: _At, *, pod_non_root: bool, pod_seccomp: bool
) -> list[Violation]:
    found: list[Violation] = []
    context = mapping(container.get("securityContext"))
    if context.get("privileged") is True:
        found.append(Violation(at("securityContext.privileged"), _restricted("a privileged container is refused")))
    if context.get("allowPrivilegeEscalation") is not False:
        found.append(Violation(at("securityContext.allowPrivilegeEscalation"), _restricted("must be false")))
    added = [cap for cap in _strings(nested(context, "capabilities", "add")) if cap not in ADDABLE_CAPABILITIES]
    if added:
        found.append(
            Violation(
                at("securityContext.capabilities.add"),
                _restricted(f"adding {', '.join(added)} is refused (NET_BIND_SERVICE only)"),
            )
        )
    if "ALL" not in _strings(nested(context, "capabilities", "drop")):
        found.append(Violation(at("securityContext.capabilities.drop"), _restricted("must include ALL")))
    if context.get("procMount") not in (None, "Default"):
        found.append(
            Violation(
                at("securityContext.procMount"), _restricted(f"procMount {context.get('procMount')!r} is refused")
            )
        )
    if context.get("runAsNonRoot") is None and not pod_non_root:  # false: _context_violations
        found.append(Violation(at("securityContext.runAsNonRoot"), _restricted("must be true (here or for the pod)")))
    if nested(context, "seccompProfile", "type") is None and not pod_seccomp:
        found.append(
            Violation(
                at("securityContext.seccompProfile.type"),
                _restricted("must be RuntimeDefault or Localhost (here or for the pod)"),
            )
        )
    for i, port in indexed_mappings(container.get("ports")):
        if port.get("hostPort") not in (None, 0):
            found.append(Violation(at(f"ports[{i}].hostPort"), _restricted("a host port is refused")))
    found += _context_violations(context, lambda path: at(f"securityContext.{path}"))
    return found


def _context_violations(context: Mapping[str, Any], at: _At) -> Iterator[Violation]:
    """The checks a pod's and a container's securityContext share."""
    if nested(context, "windowsOptions", "hostProcess") is True:
        yield Violation(at("windowsOptions.hostProcess"), _restricted("a host process is refused"))
    if context.get("runAsNonRoot") is False:
        yield Violation(at("runAsNonRoot"), _restricted("must not be false"))
    if context.get("runAsUser") == 0:
        yield Violation(at("runAsUser"), _restricted("user 0 (root) is refused"))
    for name in ("seccompProfile", "appArmorProfile"):
        kind = nested(context, name, "type")
        if kind is not None and kind not in CONFINED_PROFILES:
            yield Violation(at(f"{name}.type"), _restricted(f"{kind!r} is refused (RuntimeDefault or Localhost only)"))
    selinux = mapping(context.get("seLinuxOptions"))
    if selinux.get("type", "") not in SELINUX_TYPES:
        yield Violation(at("seLinuxOptions.type"), _restricted(f"SELinux type {selinux.get('type')!r} is refused"))
    for name in ("user", "role"):
        if selinux.get(name):
            yield Violation(at(f"seLinuxOptions.{name}"), _restricted(f"an SELinux {name} is refused"))


# -- resources ----------------------------------------------------------------------------------------------


def _resource_violations(spec: Mapping[str, Any], where: _Where, bound: Mapping[str, Quantity]) -> list[Violation]:
    found = _claim_violations(spec, where)
    totals: dict[tuple[str, str], Fraction] = {}
    for group in _RESOURCE_GROUPS:
        for i, container in indexed_mappings(spec.get(group)):
            path = where.container(group, i, container, "resources")
            found += _bound_violations(path, mapping(container.get("resources")), bound, totals=totals)
    for (kind, name), total in totals.items():
        if total > bound[name].value:
            found.append(
                Violation(
                    where.pod(f"containers[*].resources.{kind}.{name}"),
                    f"the pod's containers together ask for more than {bound[name]} of {name} "
                    f"(the controller's bound: {MAX_RESOURCES_FLAG})",
                )
            )
    return found


def _claim_violations(spec: Mapping[str, Any], where: _Where) -> list[Violation]:
    """Every ``resourceClaims`` entry: a claim is an object of the controller namespace (a ResourceClaim, or one
    made from a ResourceClaimTemplate there), which the reference rule of :mod:`.template_policy` does not cover,
    and a device no bound limits. (A container's ``resources.claims`` can only name these entries.)"""
    return [
        Violation(
            where.pod(f"resourceClaims[{i}]"),
            f"a resource claim ({_claim_source(claim)}) is refused: it names a claim of the controller namespace, where"
            " other teams' listener pods and their claims are, for a device no bound limits; a listener needs none",
        )
        for i, claim in indexed_mappings(spec.get("resourceClaims"))
    ]


def _claim_source(claim: Mapping[str, Any]) -> str:
    for key in ("resourceClaimName", "resourceClaimTemplateName"):
        if isinstance(claim.get(key), str):
            return f"{key} {claim[key]!r}"
    return f"name {claim.get('name')!r}"


def _bound_violations(
    path: str,
    resources: Mapping[str, Any],
    bound: Mapping[str, Quantity],
    *,
    totals: dict[tuple[str, str], Fraction],
) -> Iterator[Violation]:
    """Each of ``resources``' requests and limits against ``bound``; those within it are added to ``totals``."""
    for kind in ("requests", "limits"):
        for name, raw in mapping(resources.get(kind)).items():
            if name not in bound:
                yield Violation(
                    f"{path}.{kind}.{name}",
                    f"{name} is not a resource a listener pod may ask for (allowed by {MAX_RESOURCES_FLAG})",
                )
                continue
            try:
                value = parse_quantity(raw)
            except InvalidQuantity:
                continue  # the API server rejects it, with its own message
            if value > bound[name]:
                yield Violation(
                    f"{path}.{kind}.{name}",
                    f"{raw} is above the controller's bound of {bound[name]} (raised by {MAX_RESOURCES_FLAG})",
                )
            else:
                totals[(kind, name)] = totals.get((kind, name), Fraction(0)) + value.value


# -- walking ------------------------------------------------------------------------------------------------


def _words(name: str) -> str:
    return {
        "nodeName": "a node name",
        "tolerations": "a toleration",
        "priorityClassName": "a priority class",
        "priority": "a priority",
        "runtimeClassName": "a runtime class",
        "schedulerName": "another scheduler",
    }.get(name, name)


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []
