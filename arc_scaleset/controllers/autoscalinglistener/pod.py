"""The listener pod: built from the AutoscalingListener, merged with ``listenerTemplate``, and compared with
the live pod by derivation, not equality (ARC #4635; docs/controllers.md).

- :func:`desired_listener_pod`: the pod the listener should run as (pure); :func:`configured_listener_pod`: the
  same with the controller's settings.
- :func:`merge_listener_template`: ARC's merge rules for a user-supplied pod template, except for the security
  contexts: the template's keys override the defaults below key by key instead of replacing them (a template
  that sets ``resources`` does not silently drop the hardening; one that must relax a setting says so). The
  template is checked by :mod:`.template_policy` before it gets here.
- The listener container runs hardened (:data:`LISTENER_SECURITY_CONTEXT`: non-root, read-only root
  filesystem, no capabilities, no privilege escalation, the runtime's default seccomp profile); its config
  Secret is mounted ``0440`` and readable through the pod's ``fsGroup``, the image's group (the listener
  writes nothing but its log to stdout, so a read-only root filesystem costs it nothing).
- The listener container has a liveness probe on the listener's ``/healthz`` (:data:`LIVENESS_PROBE`), which
  fails when no poll of the message queue succeeded for a bounded time (docs/listener.md): a hung or endlessly
  failing listener is restarted by the kubelet. It is served on the metrics port when the metrics server
  listens on every interface, else on a port of its own (:func:`dedicated_probe_port`, passed to the listener
  as ``LISTENER_PROBE_ADDR``): with listener metrics off there is still a probe. A template's listener
  container may replace the probe by setting its own (ARC's pod has none, so nothing of ARC's changes).
- :func:`recreation_reason`: why the live pod must be replaced, or ``None``. Checked in order: the config
  Secret's (and, with a proxy, the proxy Secret's) resourceVersion annotation (a missing one on the live pod
  counts: a pod from before the annotation existed is recreated once, so no config change slips through an
  upgrade unapplied); a container that lost a port (invisible to derivation);
  ``deep_derivative(desired.spec, live.spec)``, so fields the API server defaults or admission injects never
  cause churn.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.keys import ANNOTATION_LISTENER_CONFIG_RESOURCE_VERSION, LISTENER_CONTAINER_NAME
from arc_scaleset.api.listener_config import CONFIG_PATH_ENV, PROBE_ADDR_ENV
from arc_scaleset.api.naming import (
    listener_config_secret_name,
    listener_pod_name,
    listener_proxy_secret_name,
    listener_service_account_name,
)
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.kube.ownerrefs import controller_ref
from arc_scaleset.kube.semantic import deep_derivative
from arc_scaleset.kube.views import PodView

CONFIG_VOLUME: Final = "listener-config"
CONFIG_MOUNT_PATH: Final = "/etc/gha-listener"
METRICS_PORT_NAME: Final = "metrics"
PROBE_PORT_NAME: Final = "probes"
PROBE_PORT: Final = 8081
"""The listener's probe port when the metrics port cannot carry the probe (8082 if metrics use 8081)."""
LIVENESS_PROBE: Final[Mapping[str, Any]] = {
    "initialDelaySeconds": 5,
    "periodSeconds": 20,
    "timeoutSeconds": 5,
    "failureThreshold": 3,
}
"""Timing of the listener's liveness probe (``httpGet /healthz`` on the probe port). The listener's own verdict
is bounded in minutes (docs/listener.md); three failed probes a minute apart in all then restart it. A probe
that cannot connect while the process starts is one failure of three."""
TERMINATION_GRACE_PERIOD_SECONDS: Final = 60
CONFIG_VOLUME_MODE: Final = 0o440
"""The config Secret's files: read-only, owner root and group :data:`LISTENER_FS_GROUP`, nothing for others."""
LISTENER_FS_GROUP: Final = 65532
"""The listener image's group (image/spec.py): the kubelet gives the config files this group, so the listener
reads them whichever non-root user it runs as."""
LISTENER_SECURITY_CONTEXT: Final[Mapping[str, Any]] = {
    "runAsNonRoot": True,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""The listener container's securityContext (Kubernetes' "restricted" Pod Security level); a template's listener
container overrides it key by key."""

# Container fields a template's "listener" container replaces (when it sets them), or appends to.
_CONTAINER_REPLACED: Final = (
    "imagePullPolicy",
    "workingDir",
    "resources",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "resizePolicy",
    "restartPolicy",
    "stdin",
    "stdinOnce",
    "tty",
)
# Container fields a template's "listener" container replaces only when it sets them (the defaults stay).
_CONTAINER_REPLACED_IF_SET: Final = ("livenessProbe",)
_CONTAINER_APPENDED: Final = ("env", "args", "ports", "envFrom", "volumeMounts", "volumeDevices")
# Pod fields replaced only when the template sets them.
_POD_REPLACED_IF_SET: Final = ("restartPolicy", "imagePullSecrets", "nodeSelector")
# Pod fields replaced unconditionally (unset in the template clears them, as ARC's Go assignment does).
_POD_REPLACED: Final = (
    "initContainers",
    "ephemeralContainers",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "dnsPolicy",
    "nodeName",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "shareProcessNamespace",
    "hostname",
    "subdomain",
    "affinity",
    "schedulerName",
    "tolerations",
    "hostAliases",
    "priorityClassName",
    "priority",
    "dnsConfig",
    "readinessGates",
    "runtimeClassName",
    "enableServiceLinks",
    "preemptionPolicy",
    "overhead",
    "topologySpreadConstraints",
    "setHostnameAsFQDN",
    "os",
    "hostUsers",
    "schedulingGates",
    "resourceClaims",
)

PROXY_ENV: Final = (("http_proxy", "http"), ("https_proxy", "https"), ("no_proxy", "no_proxy"))


def _proxy_env(listener: AutoscalingListener) -> list[dict[str, Any]]:
    proxy = listener.spec.proxy
    if proxy is None:
        return []
    configured = {
        "http": proxy.http is not None,
        "https": proxy.https is not None,
        "no_proxy": bool(proxy.no_proxy),
    }
    secret = listener_proxy_secret_name(listener.name)
    return [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
        for key, part in PROXY_ENV
        if configured[part]
    ]


def dedicated_probe_port(metrics_addr: str) -> int | None:
    """The port the listener must serve its probes on besides its metrics server, or ``None`` when the metrics
    server (``metrics_addr``, ``""`` or ``"0"`` when off) listens on every interface and can carry them."""
    address = metrics_addr.strip()
    if address not in ("", "0"):
        host, _, port_text = address.rpartition(":")
        if host.strip("[]") in ("", "0.0.0.0", "::"):
            return None
        if port_text == str(PROBE_PORT):
            return PROBE_PORT + 1
    return PROBE_PORT


@dataclass(frozen=True)
class PodIdentity:
    """Whose listener pod it is: its name, metadata, ServiceAccount, and where its container finds its config.

    :func:`per_set_identity` is one scale set's (ARC's shape: a ``config.json`` mounted from the listener's config
    Secret); a shared listener's pod has its group's (controllers/sharedlistener). Everything else about the pod
    (image, command, ports, probes, hardening, ``listenerTemplate``) is the same for both.
    """

    name: str
    namespace: str
    service_account: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owner_references: tuple[Mapping[str, Any], ...]
    env: tuple[Mapping[str, Any], ...]
    volumes: tuple[Mapping[str, Any], ...] = ()
    mounts: tuple[Mapping[str, Any], ...] = ()


def per_set_identity(
    listener_object: Mapping[str, Any], listener: AutoscalingListener, *, config_resource_version: str
) -> PodIdentity:
    """The identity of one scale set's listener pod: named after its listener, owned by it, its config Secret
    mounted as a file, stamped with ``config_resource_version``."""
    return PodIdentity(
        name=listener_pod_name(listener.name),
        namespace=listener.namespace,
        service_account=listener_service_account_name(listener.name),
        labels=dict(listener.metadata.labels or {}),
        annotations={ANNOTATION_LISTENER_CONFIG_RESOURCE_VERSION: config_resource_version},
        owner_references=(controller_ref(listener_object),),
        env=({"name": CONFIG_PATH_ENV, "value": f"{CONFIG_MOUNT_PATH}/config.json"}, *_proxy_env(listener)),
        volumes=(
            {
                "name": CONFIG_VOLUME,
                "secret": {"secretName": listener_config_secret_name(listener.name), "defaultMode": CONFIG_VOLUME_MODE},
            },
        ),
        mounts=({"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT_PATH, "readOnly": True},),
    )


def desired_listener_pod(
    listener_object: Mapping[str, Any],
    listener: AutoscalingListener,
    *,
    command: Iterable[str],
    metrics_port: int | None,
    config_resource_version: str,
    probe_port: int | None = None,
    identity: PodIdentity | None = None,
) -> dict[str, Any]:
    """The listener pod; ``config_resource_version`` is the config Secret's ``metadata.resourceVersion``
    (with a proxy, ``<config>+<proxy Secret>`` resourceVersions: the pod reads its proxy env only at start).

    ``probe_port``: serve the probes on this port of their own (:func:`dedicated_probe_port`); ``None``: on the
    metrics port (no probe when that is ``None`` too). ``identity``: whose pod (``None``: the listener's own,
    :func:`per_set_identity`).
    """
    if identity is None:
        identity = per_set_identity(listener_object, listener, config_resource_version=config_resource_version)
    container = _listener_container(
        listener, identity, command=command, metrics_port=metrics_port, probe_port=probe_port
    )
    spec: dict[str, Any] = {
        "serviceAccountName": identity.service_account,
        "containers": [container],
        "volumes": copy.deepcopy(list(identity.volumes)),
        "securityContext": {"fsGroup": LISTENER_FS_GROUP},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": TERMINATION_GRACE_PERIOD_SECONDS,
    }
    if not spec["volumes"]:
        del spec["volumes"]
    if listener.spec.image_pull_secrets:
        spec["imagePullSecrets"] = [secret.to_json() for secret in listener.spec.image_pull_secrets]
    metadata: dict[str, Any] = {
        "name": identity.name,
        "namespace": identity.namespace,
        "labels": dict(identity.labels),
        "annotations": dict(identity.annotations),
    }
    if identity.owner_references:
        metadata["ownerReferences"] = [dict(reference) for reference in identity.owner_references]
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if listener.spec.template:
        pod = merge_listener_template(pod, listener.spec.template)
    return pod


def configured_listener_pod(
    listener_object: Mapping[str, Any],
    listener: AutoscalingListener,
    settings: ControllerSettings,
    *,
    config_version: str,
    identity: PodIdentity | None = None,
) -> dict[str, Any]:
    """:func:`desired_listener_pod` with the controller's settings (entrypoint, metrics and probe ports)."""
    return desired_listener_pod(
        listener_object,
        listener,
        command=settings.listener_entrypoint,
        metrics_port=settings.listener_metrics_port,
        config_resource_version=config_version,
        probe_port=dedicated_probe_port(settings.listener_metrics_addr if settings.listener_metrics_enabled else ""),
        identity=identity,
    )


def _listener_container(
    listener: AutoscalingListener,
    identity: PodIdentity,
    *,
    command: Iterable[str],
    metrics_port: int | None,
    probe_port: int | None,
) -> dict[str, Any]:
    """The listener container of :func:`desired_listener_pod`: its config, ports and liveness probe."""
    container: dict[str, Any] = {
        "name": LISTENER_CONTAINER_NAME,
        "image": listener.spec.image,
        "command": list(command),
        "env": copy.deepcopy([dict(variable) for variable in identity.env]),
        "securityContext": copy.deepcopy(dict(LISTENER_SECURITY_CONTEXT)),
    }
    if identity.mounts:
        container["volumeMounts"] = copy.deepcopy([dict(mount) for mount in identity.mounts])
    if metrics_port is not None:
        container["ports"] = [{"name": METRICS_PORT_NAME, "containerPort": metrics_port, "protocol": "TCP"}]
    if probe_port is not None:
        container["env"].append({"name": PROBE_ADDR_ENV, "value": f":{probe_port}"})
        container.setdefault("ports", []).append(
            {"name": PROBE_PORT_NAME, "containerPort": probe_port, "protocol": "TCP"}
        )
    probe_port_name = PROBE_PORT_NAME if probe_port is not None else METRICS_PORT_NAME if metrics_port else None
    if probe_port_name is not None:
        container["livenessProbe"] = {
            "httpGet": {"path": "/healthz", "port": probe_port_name, "scheme": "HTTP"},
            **LIVENESS_PROBE,
        }
    return container


def merge_listener_template(pod: Mapping[str, Any], template: Mapping[str, Any]) -> dict[str, Any]:
    """``pod`` with a ``listenerTemplate`` merged in by ARC's rules; neither input is modified."""
    merged = copy.deepcopy(dict(pod))
    template = copy.deepcopy(dict(template))
    meta = merged.setdefault("metadata", {})
    template_meta = template.get("metadata") or {}
    for field in ("labels", "annotations"):
        existing = meta.setdefault(field, {})
        for key, value in (template_meta.get(field) or {}).items():
            existing.setdefault(key, value)

    spec = merged.setdefault("spec", {})
    template_spec = template.get("spec") or {}
    containers = spec.setdefault("containers", [])
    for template_container in template_spec.get("containers") or []:
        if template_container.get("name") == LISTENER_CONTAINER_NAME:
            for container in containers:
                if container.get("name") == LISTENER_CONTAINER_NAME:
                    _merge_listener_container(container, template_container)
        else:
            containers.append(template_container)
    for field in _POD_REPLACED_IF_SET:
        if template_spec.get(field) is not None:
            spec[field] = template_spec[field]
    if template_spec.get("volumes"):
        spec["volumes"] = [*(spec.get("volumes") or []), *template_spec["volumes"]]
    for field in _POD_REPLACED:
        if template_spec.get(field) is not None:
            spec[field] = template_spec[field]
        else:
            spec.pop(field, None)
    _merge_security_context(spec, template_spec)
    return merged


def _merge_security_context(target: dict[str, Any], template: Mapping[str, Any]) -> None:
    """The template's ``securityContext`` keys over ``target``'s (ARC replaces the whole context; here a template
    relaxes a default only by naming it)."""
    overrides = template.get("securityContext")
    if isinstance(overrides, Mapping) and overrides:
        target["securityContext"] = {**(target.get("securityContext") or {}), **overrides}


def _merge_listener_container(container: dict[str, Any], template: Mapping[str, Any]) -> None:
    if template.get("image"):
        container["image"] = template["image"]
    if template.get("command"):
        container["command"] = template["command"]
    for field in _CONTAINER_APPENDED:
        if template.get(field):
            container[field] = [*(container.get(field) or []), *template[field]]
    for field in _CONTAINER_REPLACED:
        if template.get(field) is not None:
            container[field] = template[field]
        else:
            container.pop(field, None)
    for field in _CONTAINER_REPLACED_IF_SET:
        if template.get(field) is not None:
            container[field] = template[field]
    _merge_security_context(container, template)


def recreation_reason(live: Mapping[str, Any], desired: Mapping[str, Any]) -> str | None:
    """Why the live listener pod must be recreated to match ``desired``; ``None`` when it need not be."""
    have, wanted = PodView(live), PodView(desired)
    desired_version = wanted.annotations.get(ANNOTATION_LISTENER_CONFIG_RESOURCE_VERSION, "")
    if desired_version:
        live_version = have.annotations.get(ANNOTATION_LISTENER_CONFIG_RESOURCE_VERSION)
        if live_version is None:
            return "the pod predates the config-version annotation"
        if live_version != desired_version:
            return f"the listener config changed (Secret resourceVersion {live_version} -> {desired_version})"
    live_spec, desired_spec = have.spec, wanted.spec
    live_containers = {c.get("name"): c for c in live_spec.get("containers") or []}
    for container in desired_spec.get("containers") or []:
        counterpart = live_containers.get(container.get("name"))
        if counterpart is not None and len(counterpart.get("ports") or []) > len(container.get("ports") or []):
            return f"container {container.get('name')!r} has ports the desired pod no longer has"
    if not deep_derivative(desired_spec, live_spec):
        return "the pod spec changed"
    return None
