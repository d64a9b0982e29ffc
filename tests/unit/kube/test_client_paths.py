"""API paths built from resource descriptors."""

from __future__ import annotations

import pytest

from arc_scaleset.kube import resources
from arc_scaleset.kube.resources import Resource

RUNNERS = Resource("actions.github.com", "v1alpha1", "ephemeralrunners", "EphemeralRunner")


def test_core_resources_live_under_api_v1() -> None:
    assert resources.PODS.api_version == "v1"
    assert resources.PODS.path(namespace="ns") == "/api/v1/namespaces/ns/pods"
    assert resources.PODS.path(namespace="ns", name="p") == "/api/v1/namespaces/ns/pods/p"
    assert resources.PODS.path(namespace="ns", name="p", subresource="status") == "/api/v1/namespaces/ns/pods/p/status"


def test_group_resources_live_under_apis() -> None:
    assert RUNNERS.api_version == "actions.github.com/v1alpha1"
    assert RUNNERS.path(namespace="arc", name="r-1", subresource="status") == (
        "/apis/actions.github.com/v1alpha1/namespaces/arc/ephemeralrunners/r-1/status"
    )
    assert resources.EVENTS.path(namespace="ns") == "/apis/events.k8s.io/v1/namespaces/ns/events"
    assert resources.LEASES.api_version == "coordination.k8s.io/v1"


def test_namespaced_collection_without_namespace_spans_all_namespaces() -> None:
    assert resources.CONFIG_MAPS.path() == "/api/v1/configmaps"
    assert RUNNERS.path() == "/apis/actions.github.com/v1alpha1/ephemeralrunners"


def test_cluster_scoped_resources_ignore_the_namespace() -> None:
    assert resources.NAMESPACES.path(namespace="x", name="x") == "/api/v1/namespaces/x"
    assert resources.CUSTOM_RESOURCE_DEFINITIONS.path(name="a.b.c") == (
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/a.b.c"
    )
    assert not resources.CUSTOM_RESOURCE_DEFINITIONS.namespaced
    assert not resources.NODES.namespaced


@pytest.mark.parametrize("name", ["", "a/b", "..", "."])
def test_names_that_would_escape_their_segment_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="invalid name"):
        resources.PODS.path(namespace="ns", name=name)


def test_subresource_needs_a_name() -> None:
    with pytest.raises(ValueError, match="needs an object name"):
        resources.PODS.path(namespace="ns", subresource="status")


def test_namespace_of_path() -> None:
    from arc_scaleset.kube.client import namespace_of_path

    assert namespace_of_path("/api/v1/namespaces/team-a/secrets/gh") == "team-a"
    assert namespace_of_path("/apis/actions.github.com/v1alpha1/namespaces/team-a/ephemeralrunners") == "team-a"
    assert namespace_of_path("/api/v1/namespaces/team-a/pods/p/status") == "team-a"
    assert namespace_of_path("/api/v1/namespaces/team-a") == ""  # the namespace object itself
    assert namespace_of_path("/api/v1/namespaces") == ""
    assert namespace_of_path("/api/v1/secrets") == ""
    assert namespace_of_path("/version") == ""
