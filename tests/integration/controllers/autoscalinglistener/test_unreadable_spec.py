"""An AutoscalingListener whose spec this controller cannot read (a hand edit, a field another version wrote in
another shape) gets a clear answer on the real control plane: ``Ready`` and one Warning Event name the field, the
listener pod keeps serving on its previous config, no retry runs, and fixing the field clears it; deleting it
deletes it, unread."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.listener_state import ListenerPhase
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.autoscalinglistener.test_health import (
    condition,
    events,
    listener_controller_idle,
    running_listener,
)
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

# The CRD schema takes any string as a time zone; the listener's model knows no "Europe/Berlim".
UNREADABLE_WINDOW = {"days": "Mon-Fri", "start": "08:00", "end": "18:00", "timeZone": "Europe/Berlim", "runners": 0}
FIELD = "spec.minRunnersSchedule.0.timeZone"


def reconcile_errors(env: ControllerHarness) -> float:
    assert env.manager is not None
    errors = env.manager.metrics.reconcile_total.labels(controller="autoscalinglistener", result="error")
    return float(errors._value.get())


async def patch_spec(env: ControllerHarness, name: str, spec: dict[str, Any]) -> None:
    await env.kube.patch(AUTOSCALING_LISTENERS, name, {"spec": spec}, namespace=env.controller_namespace)


async def test_a_listener_whose_spec_cannot_be_read_says_so_in_its_ready_condition_once_and_recovers_when_fixed(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        name, _ = await running_listener(env)
        await env.report_listener_state(ListenerPhase.POLLING)
        await eventually(lambda: _ready(env, name, reason="ListenerRunning"), "Ready=True once the listener polls")
        # The scale set's controller replaces a listener whose spec is not the one it wants: with it stopped, the
        # listener keeps the spec it is given, as one whose scale set's controller is not running (yet) would.
        await env.stop()
        await env.start("AutoscalingListener")
        await eventually(lambda: listener_controller_idle(env, name), "the listener's controller idle")
        errors_before = reconcile_errors(env)

        await patch_spec(env, name, {"minRunnersSchedule": [UNREADABLE_WINDOW]})
        ready = await eventually(lambda: _ready(env, name, naming=FIELD), f"Ready naming {FIELD}")
        # The pod runs on the config it was made from: the listener serves, and Ready says on what.
        assert ready["status"] == "True"
        assert ready["message"].startswith(
            f"the listener pod runs on its previous config; the AutoscalingListener cannot be read: {FIELD}: "
        ), ready["message"]
        assert "'Europe/Berlim' is not an IANA time zone name" in ready["message"]
        await env.wait_for_event("InvalidSpec", regarding=name, namespace=env.controller_namespace)

        # More passes (an annotation edit, the pod's events) find the same: nothing written, no second Event, and
        # no pass fails, so no retry with backoff runs for a listener only an edit can fix.
        await env.kube.patch(AUTOSCALING_LISTENERS, name, {"metadata": {"annotations": {"test/poke": "1"}}},
                             namespace=env.controller_namespace)  # fmt: skip
        await eventually(lambda: listener_controller_idle(env, name), "the poke's pass done")
        announced = await events(env, name, "InvalidSpec")
        assert len(announced) == 1, announced
        assert not announced[0].get("series"), "one Event per change, not one per pass"
        assert reconcile_errors(env) == errors_before

        await patch_spec(env, name, {"minRunnersSchedule": None})
        fixed = await eventually(lambda: _ready(env, name, reason="ListenerRunning", naming="polls it"), "Ready again")
        assert "cannot be read" not in fixed["message"]
        assert (await condition(env, name, "Degraded"))["status"] == "False"


async def _ready(
    env: ControllerHarness, name: str, *, reason: str | None = None, naming: str = ""
) -> dict[str, Any] | None:
    found = await condition(env, name, "Ready")
    if reason is not None and found.get("reason") != reason:
        return None
    return found if naming in found.get("message", "") else None


async def test_a_listener_whose_spec_cannot_be_read_is_still_deleted_with_its_pod(start_env: EnvFactory) -> None:
    async with start_env() as env:
        name, _ = await running_listener(env)
        await env.stop()
        await env.start("AutoscalingListener")
        await patch_spec(env, name, {"minRunnersSchedule": [UNREADABLE_WINDOW]})
        await eventually(lambda: _ready(env, name, naming=FIELD), f"Ready naming {FIELD}")

        # Its finalizer must not hold it (nor its scale set's deletion, which waits for it) until someone fixes it.
        await env.kube.delete(AUTOSCALING_LISTENERS, name, namespace=env.controller_namespace)
        await eventually(lambda: _gone(env, name), "the listener and its pod gone")


async def _gone(env: ControllerHarness, name: str) -> bool:
    return await env.listener(name) is None and await env.listener_pod(name) is None
