"""The listener's outages as a user sees them, with real listener processes and faults injected at the simulated
GitHub (issue 15, items 8 and 9): the AutoscalingListener is not Ready within seconds of a 503 burst, a session
held by someone else or a killed listener, an Event marks each outage's start and end, and a scale set deleted on
GitHub is registered again and takes jobs within seconds. Every job still runs exactly once."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.github import ActionsClient, PersonalAccessToken, SystemInfo, parse_config_url
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.resources import EVENTS
from arc_scaleset_lab.harness.system import System
from arc_scaleset_lab.sim.faults import FaultRule
from tests.e2e.harness import ScaleSetFactory, ScaleSetHandle

WITHIN = 10.0
"""Seconds within which an outage must show (issue 15)."""


async def listener_condition(system: System, name: str, type_: str) -> dict[str, Any]:
    try:
        listener = await system.kube.get(AUTOSCALING_LISTENERS, name, namespace=system.controller_namespace)
    except NotFound:
        return {}
    return get_condition((listener.get("status") or {}).get("conditions"), type_) or {}


async def listener_events(system: System, name: str, reason: str) -> list[dict[str, Any]]:
    listed = await system.kube.list(EVENTS, namespace=system.controller_namespace)
    return [
        event
        for event in listed.items
        if (event.get("regarding") or {}).get("name") == name and event.get("reason") == reason
    ]


def ready_is(system: System, name: str, status: str) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    async def check() -> dict[str, Any] | None:
        ready = await listener_condition(system, name, "Ready")
        return ready if ready.get("status") == status else None

    return check


async def online_listener(runners: ScaleSetHandle) -> str:
    """The scale set's listener, once it holds its session and its AutoscalingListener says Ready."""
    snapshot = await runners.wait_ready()
    assert snapshot.listener_name is not None
    await runners.wait_until(ready_is(runners.system, snapshot.listener_name, "True"), timeout=60, what="Ready=True")
    return snapshot.listener_name


async def outage_marked(runners: ScaleSetHandle, name: str, *, reason: str | frozenset[str]) -> dict[str, Any]:
    """Ready=False with ``reason`` (or one of them) within :data:`WITHIN` seconds, and the outage's Warning
    Event."""
    reasons = frozenset({reason}) if isinstance(reason, str) else reason
    system = runners.system
    started = time.monotonic()

    async def not_ready_for_the_reason() -> dict[str, Any] | None:
        ready = await listener_condition(system, name, "Ready")
        return ready if ready.get("status") == "False" and ready.get("reason") in reasons else None

    what = f"Ready=False ({' or '.join(sorted(reasons))})"
    ready = await runners.wait_until(not_ready_for_the_reason, timeout=WITHIN, what=what)
    assert time.monotonic() - started <= WITHIN
    offline = await runners.wait_until(
        lambda: listener_events(system, name, "ListenerOffline"), timeout=WITHIN, what="a ListenerOffline Event"
    )
    assert offline[0]["type"] == "Warning"
    return ready


async def recovery_marked(runners: ScaleSetHandle, name: str, *, timeout: float) -> None:
    """Ready=True again, and the Event that ends the outage with its length."""
    system = runners.system
    await runners.wait_until(ready_is(system, name, "True"), timeout=timeout, what="Ready=True again")
    online = await runners.wait_until(
        lambda: listener_events(system, name, "ListenerOnline"), timeout=WITHIN, what="a ListenerOnline Event"
    )
    assert "the listener is online again after" in online[0]["note"], online[0]


async def test_a_503_burst_makes_the_listener_not_ready_within_seconds_and_events_mark_the_outage(
    system: System, scale_set: ScaleSetFactory
) -> None:
    runners = await scale_set.create(min_runners=1, max_runners=4)
    name = await online_listener(runners)
    await system.sim.add_fault(FaultRule(route="get_message", status=503, count=None, message="service unavailable"))
    try:
        ready = await outage_marked(runners, name, reason="Failing")
        assert "(TransientError)" in ready["message"], ready
    finally:
        await system.sim.clear_faults()
    await recovery_marked(runners, name, timeout=90)
    await runners.enqueue(2, duration=1.0)
    await runners.assert_every_job_ran_once(timeout=90)


async def test_a_session_held_by_someone_else_makes_the_listener_not_ready_within_seconds(
    system: System, scale_set: ScaleSetFactory
) -> None:
    runners = await scale_set.create(min_runners=1, max_runners=4)
    name = await online_listener(runners)
    scale_set_id = (await runners.snapshot()).scale_set_id
    assert scale_set_id is not None
    intruder = ActionsClient(
        parse_config_url(system.config_url()),
        PersonalAccessToken(system.pat),
        system_info=SystemInfo(subsystem="e2e-intruder"),
    )
    async with intruder:
        # The service drops the listener's session, and another owner takes the scale set before it can.
        await system.sim.evict_session(scale_set_id)
        await intruder.create_message_session(scale_set_id, "intruder")
        ready = await outage_marked(runners, name, reason="WaitingForSession")
        assert "(SessionConflict)" in ready["message"], ready
    # The intruder never polls: the service lets its session lapse (10 s here) and the listener gets one.
    await recovery_marked(runners, name, timeout=90)
    await runners.enqueue(2, duration=1.0)
    await runners.assert_every_job_ran_once(timeout=90)


async def test_a_killed_listener_makes_its_listener_not_ready_within_seconds_until_its_replacement_polls(
    system: System, scale_set: ScaleSetFactory
) -> None:
    runners = await scale_set.create(min_runners=1, max_runners=4)
    name = await online_listener(runners)
    pid = system.listener_pids().get(name)
    assert pid is not None, f"no listener process for {name}: {system.listener_pids()}"
    os.kill(pid, signal.SIGKILL)
    # A listener that ran under 30 s waits out its restart backoff; one that ran longer (a loaded machine) is
    # replaced at once, and its new pod is pending (controllers/autoscalinglistener/restart.py, HEALTHY_RUN).
    await outage_marked(runners, name, reason=frozenset({"WaitingForBackoff", "PodPending"}))
    # Its replacement ends the session the killed one left and polls (the listener's own take-over).
    await recovery_marked(runners, name, timeout=60)
    await runners.enqueue(2, duration=1.0)
    await runners.assert_every_job_ran_once(timeout=90)


async def test_a_scale_set_deleted_on_github_is_registered_again_and_takes_jobs_within_seconds(
    system: System, scale_set: ScaleSetFactory
) -> None:
    runners = await scale_set.create(min_runners=1, max_runners=4)
    await online_listener(runners)
    old_id = (await runners.snapshot()).scale_set_id
    assert old_id is not None
    deleted = time.monotonic()
    await system.sim.delete_scale_set(old_id)
    await runners.enqueue(2, duration=1.0)  # queued while no scale set matches

    async def taken_by_a_new_scale_set() -> bool:
        new_id = (await runners.snapshot()).scale_set_id
        taken = ("acquired", "running", "completed")
        return new_id not in (None, old_id) and any(
            job["scaleSetId"] == new_id and job["state"] in taken for job in await runners.jobs()
        )

    await runners.wait_until(taken_by_a_new_scale_set, timeout=15, what="a job taken by the re-registered scale set")
    assert time.monotonic() - deleted <= 15
    await runners.assert_every_job_ran_once(timeout=90)
