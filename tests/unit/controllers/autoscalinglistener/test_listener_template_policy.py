"""The listenerTemplate policy: a template may reference only the scale set's own Secrets and ConfigMaps (or ones
a cluster admin labelled shareable), whatever else the controller allows; the pod it makes is checked by
test_listener_pod_security.py."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.common import ProxyConfig, TLSConfig
from arc_scaleset.cli import build_parser
from arc_scaleset.cmd.controller import settings_from_args
from arc_scaleset.controllers.autoscalinglistener.pod import desired_listener_pod
from arc_scaleset.controllers.autoscalinglistener.pod_security import PodRules
from arc_scaleset.controllers.autoscalinglistener.template_policy import (
    AllowedReferences,
    ListenerPolicy,
    Reference,
    check_listener_template,
    is_shareable,
    own_references,
    references,
    refusal_message,
)
from arc_scaleset.controllers.autoscalinglistener.violation import Violation
from tests.unit.controllers.listener_factory import listener_object, parsed_listener

LISTENER = "arc-runners-abc12345-listener"
OWN = own_references(
    listener_name=LISTENER, scale_set_namespace="team-a", controller_namespace="arc-system", pull_secrets=["regcred"]
)
OTHER_CONFIG = "team-b-runners-def67890-listener-config"


def template(**spec: Any) -> dict[str, Any]:
    return {"spec": spec}


def fields(found: list[Any]) -> list[str]:
    return [violation.field for violation in found]


PERMISSIVE = ListenerPolicy(pod=PodRules(allow_privileged=True, allow_scheduling=True))
"""Everything the admin can allow about the pod: what is left is about references."""


def violations(
    tmpl: dict[str, Any], *, allowed: AllowedReferences = OWN, policy: ListenerPolicy = PERMISSIVE
) -> list[Violation]:
    obj = listener_object(template=tmpl)
    pod = desired_listener_pod(obj, parsed_listener(obj), command=["arc-scaleset", "listener"], metrics_port=8080,
                               config_resource_version="1")  # fmt: skip
    return check_listener_template(tmpl, pod=pod, allowed=allowed, policy=policy)


def check(tmpl: dict[str, Any], *, allowed: AllowedReferences = OWN) -> list[str]:
    return fields(violations(tmpl, allowed=allowed))


# -- references ---------------------------------------------------------------------------------------------


def test_another_scale_sets_config_secret_mounted_as_a_volume_is_refused_by_field_and_name() -> None:
    found = violations(
        template(volumes=[{"name": "x", "emptyDir": {}}, {"name": "steal", "secret": {"secretName": OTHER_CONFIG}}])
    )
    (violation,) = found
    assert violation.field == "listenerTemplate.spec.volumes[1].secret.secretName"
    assert f"Secret {OTHER_CONFIG!r}" in violation.problem
    assert 'actions.github.com/listener-shareable: "true"' in violation.problem
    assert str(violation) in refusal_message(found)


def test_the_scale_sets_own_config_and_proxy_secrets_may_be_referenced() -> None:
    tmpl = template(
        volumes=[{"name": "own", "secret": {"secretName": f"{LISTENER}-config"}}],
        containers=[
            {
                "name": "listener",
                "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": f"{LISTENER}-proxy", "key": "http"}}}],
            }
        ],
    )
    assert check(tmpl) == []


def test_env_and_env_from_of_every_kind_of_container_are_checked() -> None:
    tmpl = template(
        containers=[
            {"name": "listener", "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s1", "key": "k"}}}]},
            {"name": "side", "envFrom": [{"configMapRef": {"name": "c1"}}, {"secretRef": {"name": "s2"}}]},
        ],
        initContainers=[{"name": "i", "env": [{"name": "C", "valueFrom": {"configMapKeyRef": {"name": "c2"}}}]}],
        ephemeralContainers=[{"name": "e", "envFrom": [{"secretRef": {"name": "s3"}}]}],
    )
    assert check(tmpl) == [
        "listenerTemplate.spec.containers[0].env[0].valueFrom.secretKeyRef.name",
        "listenerTemplate.spec.containers[1].envFrom[0].configMapRef.name",
        "listenerTemplate.spec.containers[1].envFrom[1].secretRef.name",
        "listenerTemplate.spec.initContainers[0].env[0].valueFrom.configMapKeyRef.name",
        "listenerTemplate.spec.ephemeralContainers[0].envFrom[0].secretRef.name",
    ]


def test_config_map_projected_and_storage_driver_volumes_are_checked() -> None:
    tmpl = template(
        volumes=[
            {"name": "a", "configMap": {"name": "ca-bundle"}},
            {
                "name": "b",
                "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}, {"secret": {"name": "s"}}]},
            },
            {"name": "c", "csi": {"driver": "x", "nodePublishSecretRef": {"name": "csi-creds"}}},
            {"name": "d", "cephfs": {"monitors": ["m"], "secretRef": {"name": "ceph"}}},
            {"name": "e", "azureFile": {"secretName": "azure", "shareName": "s"}},
            {"name": "f", "emptyDir": {}},
            {"name": "g", "downwardAPI": {"items": []}},
        ]
    )
    assert check(tmpl) == [
        "listenerTemplate.spec.volumes[0].configMap.name",
        "listenerTemplate.spec.volumes[1].projected.sources[1].secret.name",
        "listenerTemplate.spec.volumes[2].csi.nodePublishSecretRef.name",
        "listenerTemplate.spec.volumes[3].cephfs.secretRef.name",
        "listenerTemplate.spec.volumes[4].azureFile.secretName",
    ]


def test_image_pull_secrets_may_be_the_controllers_but_not_another_teams() -> None:
    tmpl = template(imagePullSecrets=[{"name": "regcred"}, {"name": "team-b-registry"}])
    found = violations(tmpl)
    assert fields(found) == ["listenerTemplate.spec.imagePullSecrets[1].name"]
    assert "image pull Secret 'team-b-registry'" in found[0].problem
    # A pull secret given to listeners is for pulling only: mounting it is another matter.
    assert check(template(volumes=[{"name": "r", "secret": {"secretName": "regcred"}}])) == [
        "listenerTemplate.spec.volumes[0].secret.secretName"
    ]


def test_objects_labelled_shareable_may_be_referenced_by_every_scale_set() -> None:
    tmpl = template(
        volumes=[{"name": "ca", "configMap": {"name": "corporate-ca"}}],
        containers=[{"name": "listener", "envFrom": [{"secretRef": {"name": "shared-proxy"}}]}],
    )
    assert len(check(tmpl)) == 2
    allowed = OWN.including({("ConfigMap", "corporate-ca"), ("Secret", "shared-proxy")})
    assert check(tmpl, allowed=allowed) == []
    # A shareable ConfigMap does not make a Secret of the same name shareable.
    assert check(template(volumes=[{"name": "x", "secret": {"secretName": "corporate-ca"}}]), allowed=allowed)


def test_the_shareable_label_must_say_true() -> None:
    assert is_shareable({"metadata": {"labels": {"actions.github.com/listener-shareable": "true"}}})
    assert not is_shareable({"metadata": {"labels": {"actions.github.com/listener-shareable": "yes"}}})
    assert not is_shareable({"metadata": {}})


def test_an_object_another_object_controls_is_never_shareable() -> None:
    # A listener's config Secret carries the labels its scale set chose (listenerConfigSecretMetadata).
    labels = {"actions.github.com/listener-shareable": "true"}
    owner = {"apiVersion": "actions.github.com/v1alpha1", "kind": "AutoscalingListener", "name": "l", "uid": "u"}
    assert not is_shareable({"metadata": {"labels": labels, "ownerReferences": [{**owner, "controller": True}]}})
    assert is_shareable({"metadata": {"labels": labels, "ownerReferences": [owner]}})


def test_a_shared_listeners_config_secret_is_never_shareable_though_nothing_controls_it() -> None:
    # Its labels include its members' listenerConfigSecretMetadata; its group label says whose it is.
    labels = {"actions.github.com/listener-shareable": "true", "listener.arc-scaleset.dev/group": "7d258c87e0"}
    assert not is_shareable({"metadata": {"name": "arc-shared-listener-7d258c87e0", "labels": labels}})


def test_references_list_what_a_template_names_and_skip_empty_names() -> None:
    tmpl = template(volumes=[{"name": "a", "secret": {"secretName": ""}}, {"name": "b", "secret": {"secretName": "x"}}])
    assert references(tmpl) == [Reference("Secret", "x", "listenerTemplate.spec.volumes[1].secret.secretName")]
    assert references(None) == []
    assert references({"spec": {"volumes": "not a list", "containers": [None, "x"]}}) == []


def test_a_scale_set_in_the_controller_namespace_owns_the_objects_its_spec_names_there() -> None:
    proxy = ProxyConfig.model_validate({"http": {"url": "http://p:3128", "credentialSecretRef": "proxy-creds"}})
    tls = TLSConfig.model_validate({"certificateFrom": {"configMapKeyRef": {"name": "ca", "key": "ca.crt"}}})
    common: dict[str, Any] = {
        "listener_name": LISTENER,
        "controller_namespace": "arc-system",
        "github_config_secret": "gh-secret",
        "proxy": proxy,
        "tls": tls,
    }
    there = own_references(scale_set_namespace="arc-system", **common)
    assert there.secrets == {f"{LISTENER}-config", f"{LISTENER}-proxy", "gh-secret", "proxy-creds"}
    assert there.config_maps == {"ca"}
    # Elsewhere those names belong to the scale set's namespace: the same names here are somebody else's.
    elsewhere = own_references(scale_set_namespace="team-a", **common)
    assert elsewhere.secrets == {f"{LISTENER}-config", f"{LISTENER}-proxy"}
    assert elsewhere.config_maps == frozenset()


# -- what the admin allows ----------------------------------------------------------------------------------


def test_the_controller_flags_allow_privileges_and_scheduling_but_never_another_teams_secret() -> None:
    stealing = template(
        hostNetwork=True, nodeName="node-1", volumes=[{"name": "s", "secret": {"secretName": OTHER_CONFIG}}]
    )
    assert check(stealing) == ["listenerTemplate.spec.volumes[0].secret.secretName"]


@pytest.mark.parametrize(("argv", "expected"), [([], False), (["--allow-privileged-listener-template"], True)])
def test_the_controller_allows_privileged_listener_templates_only_when_started_with_the_flag(
    argv: list[str], expected: bool
) -> None:
    args_list = ["controller", *argv]
    args = build_parser(args_list).parse_args(args_list)
    environ = {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc-system", "CONTROLLER_MANAGER_CONTAINER_IMAGE": "img:1"}
    assert settings_from_args(args, environ).allow_privileged_listener_template is expected
