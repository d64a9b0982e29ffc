"""What an ARC-made EphemeralRunnerSet needs to be adopted, and the dry-run write that checks it
(controllers/autoscalingrunnerset/adoption.py; docs/migration.md)."""

from __future__ import annotations

from typing import Any

from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.controllers.autoscalingrunnerset.adoption import (
    adoption_fields,
    arcs_live_listeners,
    refusal_message,
    writability_probe,
)


def runner_set(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "arc-x7k2p", "resourceVersion": "812"},
            "spec": {"ephemeralRunnerSpec": {"githubConfigUrl": "https://github.com/org"}, **spec}}  # fmt: skip


def test_a_set_from_before_arc_0_9_lacks_patch_id_and_gets_zero() -> None:
    assert adoption_fields(runner_set()) == {"patchID": 0}
    assert adoption_fields(runner_set(patchID=0)) == {}
    assert adoption_fields(runner_set(patchID=17)) == {}


def test_the_probe_writes_the_spec_as_a_listener_would_under_the_sets_resource_version() -> None:
    assert writability_probe(runner_set(patchID=17)) == {
        "metadata": {"resourceVersion": "812"},
        "spec": {"patchID": 18},
    }
    assert writability_probe(runner_set())["spec"] == {"patchID": 1}


def test_the_refusal_names_the_set_the_error_and_arcs_listener_kept() -> None:
    message = refusal_message("arc-x7k2p", "arc-1234abcd-listener", "422 Invalid: spec.foo: Required value")
    assert "arc-x7k2p" in message
    assert "spec.foo: Required value" in message
    assert "arc-1234abcd-listener is kept running" in message


def test_only_arcs_listeners_not_yet_being_deleted_hold_back_the_takeover() -> None:
    def listener(name: str, **metadata: Any) -> AutoscalingListenerView:
        return AutoscalingListenerView({"metadata": {"name": name, **metadata}})

    arcs = {"annotations": {"actions.github.com/runner-spec-hash": "5f8d7c6b9"}}
    found = arcs_live_listeners([
        listener("arcs", **arcs),
        listener("arcs-going", **arcs, deletionTimestamp="2026-01-01T00:00:00Z"),
        listener("ours", annotations={"actions.github.com/autoscaling-runner-set-uid": "u"}),
    ])  # fmt: skip
    assert found == ["arcs"]
