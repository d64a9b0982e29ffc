"""The listener pod runs hardened: a restricted security context, its config Secret not world-readable,
and a listenerTemplate relaxes a setting only by naming it."""

from __future__ import annotations

from typing import Any

from arc_scaleset.controllers.autoscalinglistener.pod import desired_listener_pod
from tests.unit.controllers.listener_factory import listener_object, parsed_listener


def listener_pod(**spec: Any) -> dict[str, Any]:
    obj = listener_object(**spec)
    return desired_listener_pod(
        obj, parsed_listener(obj), command=("arc-scaleset", "listener"), metrics_port=8080, config_resource_version="1"
    )


RESTRICTED = {
    "runAsNonRoot": True,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def test_the_listener_runs_restricted_with_its_config_readable_only_by_owner_and_group() -> None:
    pod = listener_pod()
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"] == RESTRICTED
    (volume,) = pod["spec"]["volumes"]
    assert volume["secret"]["defaultMode"] in (0o400, 0o440)
    # Secret files belong to root: the pod's fsGroup is what lets a non-root listener read them.
    assert pod["spec"]["securityContext"] == {"fsGroup": 65532}


def test_a_template_relaxes_the_hardening_only_by_naming_the_setting() -> None:
    unrelated = listener_pod(template={"spec": {"containers": [{"name": "listener", "resources": {}}]}})
    assert unrelated["spec"]["containers"][0]["securityContext"] == RESTRICTED
    assert unrelated["spec"]["securityContext"] == {"fsGroup": 65532}
    relaxed = listener_pod(
        template={
            "spec": {
                "securityContext": {"fsGroup": 1000},
                "containers": [
                    {"name": "listener", "securityContext": {"readOnlyRootFilesystem": False, "runAsUser": 1000}}
                ],
            }
        }
    )
    assert relaxed["spec"]["containers"][0]["securityContext"] == {
        **RESTRICTED,
        "readOnlyRootFilesystem": False,
        "runAsUser": 1000,
    }
    assert relaxed["spec"]["securityContext"] == {"fsGroup": 1000}
