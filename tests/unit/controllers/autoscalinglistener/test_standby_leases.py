"""The standby Lease watch's pure parts (controllers/autoscalinglistener/standby_leases.py): what is kept of a
Lease, which updates queue its listener, and which listener that is."""

from __future__ import annotations

from typing import Any

from arc_scaleset.api.keys import LABEL_LISTENER_NAME
from arc_scaleset.controllers.autoscalinglistener.standby_leases import (
    holder_changed,
    lease_label_selector,
    lease_listener,
    pair_fields,
)
from arc_scaleset.kube.controller import Request

OWNER = {
    "apiVersion": "actions.github.com/v1alpha1",
    "kind": "AutoscalingListener",
    "name": "arc-runners-754b578d-listener",
    "uid": "u-1",
    "controller": True,
}


def lease(holder: str = "", *, renewed: str = "2026-12-06T12:00:00.000000Z", owners: Any = (OWNER,)) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "arc-runners-754b578d-listener",
            "namespace": "arc-systems",
            "uid": "l-1",
            "resourceVersion": "7",
            "labels": {LABEL_LISTENER_NAME: "arc-runners-754b578d-listener"},
            "managedFields": [{"manager": "listener"}],
            "ownerReferences": list(owners),
        },
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 10, "renewTime": renewed, "leaseTransitions": 3},
    }


def test_of_a_lease_its_metadata_but_the_managed_fields_and_its_holder_are_kept_not_its_renewals() -> None:
    kept = pair_fields(lease("arc-runners-754b578d-listener-standby"))
    assert kept["spec"] == {"holderIdentity": "arc-runners-754b578d-listener-standby"}
    assert set(kept["metadata"]) == {"name", "namespace", "uid", "resourceVersion", "ownerReferences", "labels"}
    assert pair_fields({"metadata": {"name": "new"}})["spec"] == {"holderIdentity": ""}


def test_a_takeover_or_a_release_changes_the_holder_and_a_renewal_does_not() -> None:
    held = pair_fields(lease("pod-a"))
    assert not holder_changed(held, pair_fields(lease("pod-a", renewed="2026-12-06T12:00:02.000000Z")))
    assert holder_changed(held, pair_fields(lease("pod-b")))
    assert holder_changed(held, pair_fields(lease("")))
    assert holder_changed(pair_fields(lease("")), held)


def test_a_lease_queues_the_listener_that_owns_it_and_no_other_lease_queues_anything() -> None:
    assert list(lease_listener(pair_fields(lease()))) == [Request("arc-systems", "arc-runners-754b578d-listener")]
    assert list(lease_listener(pair_fields(lease(owners=())))) == []  # e.g. the controller's own leader Lease
    not_controller = {**OWNER, "controller": False}
    assert list(lease_listener(pair_fields(lease(owners=(not_controller,))))) == []


def test_the_leases_are_selected_by_the_listener_name_label_unless_it_is_kept_off_them() -> None:
    assert lease_label_selector(()) == LABEL_LISTENER_NAME
    assert lease_label_selector(("example.com/",)) == LABEL_LISTENER_NAME
    assert lease_label_selector(("auto-scaling-",)) is None
