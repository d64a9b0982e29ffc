"""A standby listener in ``status``: which of the two pods is active (the Lease holder) and whether the other
stands by ready (arc_scaleset/diagnose/standby.py)."""

from __future__ import annotations

import copy
from typing import Any

from arc_scaleset.api.listener_standby import ANNOTATION_STANDBY
from arc_scaleset.diagnose.render import render_status
from arc_scaleset.diagnose.standby import listener_pods
from arc_scaleset.diagnose.summary import summarize
from tests.unit.diagnose.test_explain_rules import recorded

NAME = "set-abc-listener"


def listener(*, standby: bool = True) -> dict[str, Any]:
    annotations = {ANNOTATION_STANDBY: "true"} if standby else {}
    return {"metadata": {"name": NAME, "namespace": "arc", "uid": "al-uid", "annotations": annotations}}


def pod(name: str, phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "arc"}, "status": {"phase": phase}}


def lease(holder: str | None) -> dict[str, Any]:
    spec = {"holderIdentity": holder} if holder else {}
    return {"metadata": {"name": NAME, "namespace": "arc"}, "spec": spec}


def test_the_active_pod_is_the_lease_holder_and_the_other_stands_by() -> None:
    first, second = pod(NAME), pod(f"{NAME}-standby")
    found = listener_pods(listener(), [first, second], [lease(f"{NAME}-standby")])
    assert (found.pod, found.standby, found.holder) == (second, first, f"{NAME}-standby")
    unheld = listener_pods(listener(), [first, second], [lease(None)])
    assert (unheld.pod, unheld.standby, unheld.holder) == (first, second, "")


def test_a_listener_without_a_standby_has_its_one_pod() -> None:
    only = pod(NAME)
    found = listener_pods(listener(standby=False), [only], [lease(NAME)])
    assert (found.pod, found.standby, found.holder) == (only, None, "")


def test_status_says_which_pod_is_active_and_that_the_standby_is_ready() -> None:
    snapshot = copy.deepcopy(recorded("revision_rolling"))
    snapshot.standby_pod, snapshot.lease_holder = pod(f"{NAME}-standby"), NAME
    doc = summarize(snapshot)
    assert doc["listener"]["standby"] == {
        "pod": f"{NAME}-standby",
        "podPhase": "Running",
        "ready": True,
        "leaseHolder": NAME,
    }
    text = render_status(doc)
    assert f"standby: active {NAME}; standby pod {NAME}-standby ready" in text
    assert summarize(recorded("revision_rolling"))["listener"]["standby"] is None
