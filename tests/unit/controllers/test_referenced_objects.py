"""Which Secrets and ConfigMaps a listener is built from, and that each is watched once while referenced (issue 15,
item 8: a rotated credentials Secret reached the listener only after about 5 minutes)."""

from __future__ import annotations

from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.controllers.referenced_objects import (
    Reference,
    ReferencedObjectWatch,
    listener_references,
    scale_set_references,
)
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Request
from arc_scaleset.kube.credentials import ConnectionConfig
from tests.unit.controllers.ars_factory import ars_object
from tests.unit.controllers.listener_factory import listener_object, parsed_listener

PROXY = {
    "http": {"url": "http://proxy:3128", "credentialSecretRef": "proxy-creds"},
    "https": {"url": "http://proxy:3128", "credentialSecretRef": "proxy-creds-tls"},
}
TLS = {"certificateFrom": {"configMapKeyRef": {"name": "github-ca", "key": "ca.crt"}}}


def test_a_listener_is_built_from_its_credentials_secret_its_proxy_secrets_and_its_ca_config_map() -> None:
    listener = parsed_listener(listener_object(proxy=PROXY, githubServerTLS=TLS))
    assert listener_references(listener) == {
        Reference("Secret", "team", "gh-secret"),
        Reference("Secret", "team", "proxy-creds"),
        Reference("Secret", "team", "proxy-creds-tls"),
        Reference("ConfigMap", "team", "github-ca"),
    }


def test_a_scale_set_is_built_from_what_its_listener_will_be_built_from() -> None:
    scale_set = AutoscalingRunnerSet.from_object(ars_object(proxy=PROXY, githubServerTLS=TLS))
    listener = parsed_listener(listener_object(proxy=PROXY, githubServerTLS=TLS))
    assert scale_set_references(scale_set) == listener_references(listener)
    vaulted = AutoscalingRunnerSet.from_object(ars_object(vaultConfig={"type": "azure_key_vault"}))
    assert scale_set_references(vaulted) == set()


def test_a_vault_lookup_key_is_no_secret_of_the_cluster() -> None:
    listener = parsed_listener(listener_object(vaultConfig={"type": "azure_key_vault"}))
    assert listener_references(listener) == set()


def test_an_object_shared_by_listeners_is_watched_once_and_until_the_last_one_lets_go() -> None:
    watch = ReferencedObjectWatch(KubeClient(ConnectionConfig(server="http://127.0.0.1:1")))
    first, second = Request("arc-system", "a-listener"), Request("arc-system", "b-listener")
    shared, own = Reference("Secret", "team", "gh-secret"), Reference("ConfigMap", "team", "github-ca")
    watch.track(first, {shared, own})
    watch.track(second, {shared})
    assert watch.watched == {shared, own}

    watch.track(first, {shared})  # the CA was removed from the scale set
    assert watch.watched == {shared}
    watch.forget(first)
    assert watch.watched == {shared}, "still referenced by the second listener"
    watch.forget(second)
    assert watch.watched == set()


def test_many_objects_referenced_in_one_namespace_share_one_watch_per_kind() -> None:
    # Issue 26, item 9: one informer per referenced object used the controller's whole request budget.
    watch = ReferencedObjectWatch(KubeClient(ConnectionConfig(server="http://127.0.0.1:1")))
    listeners = [Request("arc-system", f"listener-{number}") for number in range(500)]
    for number, listener in enumerate(listeners):
        watch.track(
            listener, {Reference("Secret", "team", f"gh-secret-{number}"), Reference("ConfigMap", "team", "ca")}
        )
    watch.track(Request("arc-system", "other-team"), {Reference("Secret", "other", "gh-secret")})
    assert watch.scopes == {("Secret", "team"), ("ConfigMap", "team"), ("Secret", "other")}
    assert len(watch.watched) == 502

    for listener in listeners:
        watch.forget(listener)
    assert watch.scopes == {("Secret", "other")}, "a namespace nothing references any more is no longer watched"
    assert watch.watched == {Reference("Secret", "other", "gh-secret")}


def test_a_scale_set_holds_its_objects_watched_apart_from_a_listener_of_the_same_key() -> None:
    # A scale set's key and a listener's may be equal (a scale set named like a listener, in the controller's
    # namespace): letting go of one never lets go of the other's objects.
    watch = ReferencedObjectWatch(KubeClient(ConnectionConfig(server="http://127.0.0.1:1")))
    key = Request("arc-system", "arc-runners-7b8c9d-listener")
    held, built_from = Reference("Secret", "arc-system", "held"), Reference("Secret", "arc-system", "built-from")
    watch.hold(key, {held})
    watch.track(key, {built_from})
    watch.forget(key)
    assert watch.watched == {held}
    watch.track(key, {built_from})
    watch.release(key)
    assert watch.watched == {built_from}
    watch.forget(key)
    assert watch.watched == set()
    assert watch.scopes == set(), "nothing held or referenced: no watch left"
