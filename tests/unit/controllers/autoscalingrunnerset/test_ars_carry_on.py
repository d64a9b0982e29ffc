"""A pass of an AutoscalingRunnerSet goes on after its own metadata writes with the object the server returned
(ScaleSetPass.carry_on), and ends after a write that made a new generation."""

from __future__ import annotations

import copy
from typing import Any

from arc_scaleset.api.views import AutoscalingRunnerSetView
from arc_scaleset.controllers.autoscalingrunnerset.scope import ScaleSetMemory, ScaleSetPass
from arc_scaleset.controllers.autoscalingrunnerset.status import ReconcileReport
from arc_scaleset.kube.controller import Request
from tests.unit.controllers.ars_factory import ars_object, parsed

ID = "runner-scale-set-id"


def scope_of(obj: dict[str, Any]) -> ScaleSetPass:
    view = AutoscalingRunnerSetView(obj)
    report = ReconcileReport(generation=view.generation, observed_generation=0, stored_phase="")
    request = Request(view.namespace, view.name)
    return ScaleSetPass(obj, view, parsed(obj), request, report, ScaleSetMemory(), listener=None)


def stored_after(obj: dict[str, Any], *, generation: int, **annotations: str) -> dict[str, Any]:
    """``obj`` as the server returns it after a write of ``annotations`` (and a spec change: ``generation``)."""
    stored = copy.deepcopy(obj)
    stored["metadata"]["annotations"].update(annotations)
    stored["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
    stored["metadata"]["generation"] = generation
    return stored


def test_after_a_metadata_write_the_pass_goes_on_with_the_stored_object() -> None:
    cached = ars_object(registered=False)
    scope = scope_of(cached)
    stored = stored_after(cached, generation=1, **{ID: "42"})
    assert scope.carry_on(stored)
    assert scope.obj is stored
    assert scope.view.resource_version == "11"
    assert scope.ars.metadata.annotations[ID] == "42"
    # The status written at the end of the pass is diffed against the write's answer, not the cache's copy.
    assert scope.memory.writes.freshest(cached) is stored


def test_after_a_write_that_made_a_new_generation_the_pass_ends_on_the_object_it_had() -> None:
    cached = ars_object(registered=False)
    scope = scope_of(cached)
    stored = stored_after(cached, generation=2, **{ID: "42"})
    assert not scope.carry_on(stored)
    assert scope.obj is cached
    assert ID not in (scope.ars.metadata.annotations or {})
    assert scope.memory.writes.freshest(cached) is stored
