"""EventRecorder writes events.k8s.io/v1 Events, folds repeats into a series, and never raises."""

from __future__ import annotations

from typing import Any

import pytest

from arc_scaleset.clock import FakeClock
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.events import EventRecorder
from arc_scaleset.observability.logging import register_secret, unregister_secret

pytestmark = pytest.mark.cluster


async def _regarding(kube: KubeClient, namespace: str, name: str = "subject") -> dict[str, Any]:
    return await kube.create(resources.CONFIG_MAPS, {"metadata": {"name": name}}, namespace=namespace)


async def _events(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    return (await kube.list(resources.EVENTS, namespace=namespace)).items


async def test_an_event_is_written_about_the_object(kube: KubeClient, namespace: str) -> None:
    subject = await _regarding(kube, namespace)
    recorder = EventRecorder(kube, component="arc-scaleset.dev/test", clock=FakeClock(), instance="test-1")
    await recorder.event(
        subject, type="Warning", reason="BadConfig", note="githubConfigUrl is empty", action="Validate"
    )

    [event] = await _events(kube, namespace)
    assert event["regarding"]["uid"] == subject["metadata"]["uid"]
    assert event["regarding"]["kind"] == "ConfigMap"
    assert (event["type"], event["reason"], event["note"], event["action"]) == (
        "Warning",
        "BadConfig",
        "githubConfigUrl is empty",
        "Validate",
    )
    assert (event["reportingController"], event["reportingInstance"]) == ("arc-scaleset.dev/test", "test-1")
    assert "series" not in event
    assert recorder.dropped == 0


async def test_repeated_events_are_folded_into_one_series(kube: KubeClient, namespace: str) -> None:
    subject = await _regarding(kube, namespace)
    clock = FakeClock()
    recorder = EventRecorder(kube, component="arc-scaleset.dev/test", clock=clock)
    for _ in range(3):
        await recorder.event(subject, type="Normal", reason="Scaled", note="scaled to 2", action="Scale")
        await clock.advance(1)
    await recorder.event(subject, type="Normal", reason="Scaled", note="scaled to 3", action="Scale")

    events = await _events(kube, namespace)
    by_note = {e["note"]: e for e in events}
    assert sorted(by_note) == ["scaled to 2", "scaled to 3"]
    assert by_note["scaled to 2"]["series"]["count"] == 3
    assert "series" not in by_note["scaled to 3"]


async def test_a_repeat_after_the_window_starts_a_new_event(kube: KubeClient, namespace: str) -> None:
    subject = await _regarding(kube, namespace)
    clock = FakeClock()
    recorder = EventRecorder(kube, component="arc-scaleset.dev/test", clock=clock, dedup_window=60)
    await recorder.event(subject, type="Normal", reason="Synced", note="ok", action="Sync")
    await clock.advance(61)
    await recorder.event(subject, type="Normal", reason="Synced", note="ok", action="Sync")
    assert len(await _events(kube, namespace)) == 2


async def test_events_per_object_are_rate_limited(kube: KubeClient, namespace: str) -> None:
    subject = await _regarding(kube, namespace)
    other = await _regarding(kube, namespace, "other")
    recorder = EventRecorder(kube, component="arc-scaleset.dev/test", clock=FakeClock(), burst=2)
    for i in range(4):
        await recorder.event(subject, type="Normal", reason="Tick", note=f"tick {i}", action="Tick")
    await recorder.event(other, type="Normal", reason="Tick", note="tick other", action="Tick")

    notes = sorted(e["note"] for e in await _events(kube, namespace))
    assert notes == ["tick 0", "tick 1", "tick other"]
    assert recorder.dropped == 2


async def test_long_notes_are_truncated_to_1024_bytes(kube: KubeClient, namespace: str) -> None:
    subject = await _regarding(kube, namespace)
    recorder = EventRecorder(kube, component="arc-scaleset.dev/test", clock=FakeClock())
    await recorder.event(subject, type="Warning", reason="Long", note="é" * 2000, action="Say")
    [event] = await _events(kube, namespace)
    assert event["note"] == "é" * 512


async def test_a_failed_write_is_dropped_not_raised(kube: KubeClient) -> None:
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "no-such-namespace-xyz"}}
    recorder = EventRecorder(kube, component="arc-scaleset.dev/test", clock=FakeClock())
    await recorder.event(ghost, type="Normal", reason="Nothing", note="nowhere to go", action="Try")
    assert recorder.dropped == 1


async def test_an_event_note_never_carries_a_secret(kube: KubeClient, namespace: str) -> None:
    subject = await _regarding(kube, namespace)
    recorder = EventRecorder(kube, component="arc-scaleset.dev/test", clock=FakeClock())
    registered = "registered-credential-" + "5d2f8a1c7e"
    admin_token = "eyJhbGciOiJIUzI1NiJ9.eyJ0aWQiOjF9.c2lnbmF0dXJl"
    register_secret(registered)
    try:
        await recorder.event(
            subject,
            type="Warning",
            reason="GitHubRequestFailed",
            note=f"GitHub answered 400: echo {registered}; Authorization: Bearer {admin_token}",
            action="CallGitHub",
        )
    finally:
        unregister_secret(registered)

    [event] = await _events(kube, namespace)
    assert registered not in event["note"]
    assert admin_token not in event["note"]
    assert event["note"].startswith("GitHub answered 400: echo [REDACTED]")
