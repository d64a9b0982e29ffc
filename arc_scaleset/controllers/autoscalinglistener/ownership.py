"""Which AutoscalingListeners are served, where their credentials come from, and which existing objects a
listener may take over.

One controller serves many teams; nothing a listener object says may reach another team's credentials or
namespace (docs/controllers.md, "AutoscalingListener"). Pure decisions on objects as read:

- :func:`listener_refusal`: a listener is served only in the controller namespace, and only while its
  ``actions.github.com/autoscaling-runner-set-uid`` annotation matches the UID of the live
  AutoscalingRunnerSet its spec names. The listener lives in another namespace than its scale set, so no owner
  reference can say so; the AutoscalingRunnerSet controller writes the annotation when it creates the
  listener, and recreates a listener whose annotation differs.
- :func:`with_scale_set_credentials`: the fields that decide which credentials a listener gets and where they
  are sent (``githubConfigUrl``, ``githubConfigSecret``, ``vaultConfig``, ``githubServerTLS``, ``proxy``) are
  taken from the scale set, read in the scale set's namespace, never from the listener's own spec.
- :func:`foreign_reason`: an object found under a child's deterministic name is adopted (its labels merged,
  its rules, subjects or data replaced) only when it is this listener's: in the controller namespace, a
  controller owner reference to this listener (by UID); in the scale set namespace, where no owner reference
  can point, the ``auto-scaling-listener-namespace``/``-name`` labels naming it, and for a RoleBinding the
  listener's own Role as ``roleRef`` (immutable: binding subjects to another Role would grant that Role).
  Anything else is left untouched and named in the listener's ``Degraded`` condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.api.keys import ANNOTATION_AUTOSCALING_RUNNER_SET_UID, LABEL_LISTENER_NAME, LABEL_LISTENER_NAMESPACE
from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.kube.ownerrefs import is_controlled_by
from arc_scaleset.kube.views import ObjectView

REASON_NOT_IN_CONTROLLER_NAMESPACE: Final = "NotInControllerNamespace"
REASON_NOT_OWNED_BY_SCALE_SET: Final = "NotOwnedByScaleSet"


@dataclass(frozen=True)
class Refusal:
    """Why a listener is not served: a CamelCase ``reason`` and a message for its condition and Event."""

    reason: str
    message: str


def listener_refusal(
    listener: Mapping[str, Any], *, controller_namespace: str, scale_set: Mapping[str, Any] | None
) -> Refusal | None:
    """Why ``listener`` must get no credentials and no pod, or ``None`` when it is served.

    ``scale_set`` is the live AutoscalingRunnerSet its spec names (``None``: not found; the caller deletes
    such a listener, as before). The namespace is checked first, so a listener elsewhere is refused whatever
    its scale set.
    """
    view = AutoscalingListenerView(listener)
    if view.namespace != controller_namespace:
        return Refusal(
            REASON_NOT_IN_CONTROLLER_NAMESPACE,
            f"AutoscalingListener {view.namespace}/{view.name} is outside the controller namespace"
            f" {controller_namespace!r}: listeners are served only there, so it gets no credentials and no pod"
            " (the AutoscalingRunnerSet controller creates each scale set's listener itself)",
        )
    if scale_set is None:
        return None
    claimed = view.annotation(ANNOTATION_AUTOSCALING_RUNNER_SET_UID)
    actual = ObjectView(scale_set).uid
    if not claimed or claimed != actual:
        found = f"is {claimed!r}" if claimed else "is missing"
        return Refusal(
            REASON_NOT_OWNED_BY_SCALE_SET,
            f"AutoscalingListener {view.namespace}/{view.name} was not made by AutoscalingRunnerSet"
            f" {view.scale_set_namespace}/{view.scale_set_name} (its annotation"
            f" {ANNOTATION_AUTOSCALING_RUNNER_SET_UID} {found}, the scale set's UID is {actual!r}): it gets no"
            " credentials and no pod; the scale set's controller replaces a listener it did not make",
        )
    return None


def with_scale_set_credentials(listener: AutoscalingListener, scale_set: AutoscalingRunnerSet) -> AutoscalingListener:
    """``listener`` with the credential fields of its spec replaced by ``scale_set``'s (neither is modified).

    Only a served listener gets here (:func:`listener_refusal` found its scale set by the spec's namespace and
    name and matched its UID), so the Secret, CA and proxy are those of that scale set, in its namespace.
    """
    spec = scale_set.spec
    trusted = listener.spec.model_copy(
        update={
            "github_config_url": spec.github_config_url,
            "github_config_secret": spec.github_config_secret,
            "vault_config": spec.vault_config,
            "github_server_tls": spec.github_server_tls,
            "proxy": spec.proxy,
            "autoscaling_runner_set_namespace": scale_set.namespace,
            "autoscaling_runner_set_name": scale_set.name,
        }
    )
    return listener.model_copy(update={"spec": trusted})


def foreign_reason(
    kind: str,
    live: Mapping[str, Any],
    listener: Mapping[str, Any],
    *,
    desired: Mapping[str, Any] | None = None,
) -> str | None:
    """Why ``live`` (found under the name of ``listener``'s child of ``kind``) is not this listener's, or
    ``None`` when it may be adopted. ``desired``: the child as it should be (a RoleBinding's ``roleRef``)."""
    have, owner = ObjectView(live), ObjectView(listener)
    what = f"{kind} {have.namespace}/{have.name}"
    if kind in ("Role", "RoleBinding"):
        named = (have.label(LABEL_LISTENER_NAMESPACE), have.label(LABEL_LISTENER_NAME))
        if named != (owner.namespace, owner.name):
            return (
                f"{what} exists but is not this listener's (its labels {LABEL_LISTENER_NAMESPACE} and"
                f" {LABEL_LISTENER_NAME} do not name AutoscalingListener {owner.namespace}/{owner.name}); it is"
                " left untouched: delete or rename it"
            )
        wanted = (desired or {}).get("roleRef")
        if kind == "RoleBinding" and wanted is not None and live.get("roleRef") != wanted:
            bound = (live.get("roleRef") or {}).get("name", "")
            return (
                f"{what} binds {bound!r}, not the listener's Role {wanted.get('name')!r}, and a roleRef cannot be"
                " changed; it is left untouched: delete it"
            )
        return None
    if not is_controlled_by(live, listener):
        return (
            f"{what} exists but is not this listener's (no controller owner reference to AutoscalingListener"
            f" {owner.namespace}/{owner.name}); it is left untouched: delete or rename it"
        )
    return None
