"""listener/publish_plan.py: which decisions are patched onto the EphemeralRunnerSet; and the Scaler applying it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from arc_scaleset.api.keys import ANNOTATION_LISTENER_CURSOR
from arc_scaleset.api.listener_cursor import ListenerCursor
from arc_scaleset.clock import FakeClock
from arc_scaleset.kube import errors as kube_errors
from arc_scaleset.kube.client import ObjectList, PatchType, WatchEvent
from arc_scaleset.kube.resources import Resource
from arc_scaleset.listener.desired_state import ScaleDecision
from arc_scaleset.listener.publish_plan import (
    ABSENT,
    UNWATCHED_REFRESH_SECONDS,
    Reason,
    SetContent,
    content_of,
    plan_publish,
    refresh_due,
)
from arc_scaleset.listener.scaler import Scaler
from arc_scaleset.listener.set_watch import SetWatch, publication_fields, set_content

AT_REST = SetContent(replicas=1, patch_id=0, cursor='{"lastMessageId":3}')


def plan(
    wanted: SetContent,
    *,
    landed: SetContent | None = AT_REST,
    watched: SetContent | None = AT_REST,
    refresh_due: bool = False,
) -> Reason:
    decided = plan_publish(wanted, landed=landed, watched=watched, refresh_due=refresh_due)
    assert decided.send is (decided.reason is not Reason.UNCHANGED)
    return decided.reason


def test_the_repeated_force_state_decision_is_skipped_while_the_set_carries_it() -> None:
    assert plan(AT_REST) is Reason.UNCHANGED


def test_a_decision_without_a_cursor_leaves_the_sets_cursor_and_is_skipped_when_nothing_else_changed() -> None:
    assert plan(SetContent(replicas=1, patch_id=0, cursor=None)) is Reason.UNCHANGED


def test_without_a_live_watch_the_repeated_force_state_decision_is_skipped_until_a_refresh_is_due() -> None:
    assert plan(AT_REST, watched=None) is Reason.UNCHANGED
    assert plan(AT_REST, watched=None, refresh_due=True) is Reason.REFRESH
    assert plan(SetContent(replicas=2, patch_id=0, cursor=None), watched=None) is Reason.DECISION_CHANGED


def test_a_watched_set_is_never_refreshed_by_a_timer() -> None:
    assert plan(AT_REST, refresh_due=True) is Reason.UNCHANGED


@pytest.mark.parametrize(
    ("since_landed", "capacity", "due"),
    [
        (0.0, None, False),  # no figure: nothing to learn, the set at rest
        (0.0, 5, False),  # the figure does not hold the set back
        (0.0, 9, False),
        (0.0, 4, True),  # below maxRunners: it may have risen since, and jobs would wait on a stale one
        (0.0, 0, True),
        (UNWATCHED_REFRESH_SECONDS - 1, None, False),
        (UNWATCHED_REFRESH_SECONDS, None, True),  # to put back a set someone else edited
    ],
)
def test_a_refresh_is_due_while_the_capacity_holds_the_set_back_or_after_the_refresh_period(
    since_landed: float, capacity: int | None, due: bool
) -> None:
    assert refresh_due(since_landed=since_landed, capacity=capacity, max_runners=5) is due


def test_the_first_decision_of_a_process_is_sent() -> None:
    assert plan(AT_REST, landed=None) is Reason.FIRST


@pytest.mark.parametrize("patch_id", [1, 7, 2**31 - 1])
def test_a_patch_id_above_zero_is_always_sent_even_with_the_same_target(patch_id: int) -> None:
    landed = SetContent(replicas=1, patch_id=patch_id, cursor=AT_REST.cursor)
    assert plan(landed, landed=landed, watched=landed) is Reason.NEW_PATCH_ID


def test_the_force_state_after_a_numbered_patch_is_sent() -> None:
    landed = SetContent(replicas=1, patch_id=5, cursor=AT_REST.cursor)
    assert plan(AT_REST, landed=landed, watched=landed) is Reason.DECISION_CHANGED


def test_another_target_is_sent() -> None:
    assert plan(SetContent(replicas=2, patch_id=0, cursor=AT_REST.cursor)) is Reason.DECISION_CHANGED


def test_a_message_acted_on_moves_the_cursor_and_is_sent_before_its_acknowledgement() -> None:
    assert plan(SetContent(replicas=1, patch_id=0, cursor='{"lastMessageId":4}')) is Reason.CURSOR_CHANGED


@pytest.mark.parametrize(
    "watched",
    [
        SetContent(replicas=3, patch_id=0, cursor=AT_REST.cursor),  # someone edited replicas
        SetContent(replicas=1, patch_id=9, cursor=AT_REST.cursor),  # or the patch ID
        SetContent(replicas=1, patch_id=0, cursor=None),  # the set was created again
        ABSENT,  # the set is gone: the patch says so (NotFound), and the loop retries it
    ],
)
def test_a_set_that_no_longer_carries_the_last_publication_gets_it_again(watched: SetContent) -> None:
    assert plan(AT_REST, watched=watched) is Reason.SET_DIFFERS


def test_content_of_a_decision_is_what_the_set_reads_back() -> None:
    assert content_of(ScaleDecision(target=0, patch_id=3), None) == SetContent(replicas=0, patch_id=3, cursor=None)


def test_the_watch_keeps_only_the_fields_it_compares_and_the_capacity() -> None:
    ers: dict[str, Any] = {
        "apiVersion": "actions.github.com/v1alpha1",
        "metadata": {
            "name": "set-a",
            "namespace": "arc",
            "uid": "u-1",
            "resourceVersion": "42",
            "annotations": {ANNOTATION_LISTENER_CURSOR: "{}", "other": "x" * 1000},
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {"replicas": 2, "patchID": 4, "ephemeralRunnerSpec": {"spec": {"containers": []}}},
        "status": {"advertisedCapacity": 3, "recentJobs": [{"jobId": "1"}] * 50, "currentReplicas": 2},
    }
    kept = publication_fields(ers)
    assert kept == {
        "metadata": {
            "name": "set-a",
            "namespace": "arc",
            "uid": "u-1",
            "resourceVersion": "42",
            "annotations": {ANNOTATION_LISTENER_CURSOR: "{}"},
        },
        "spec": {"replicas": 2, "patchID": 4},
        "status": {"advertisedCapacity": 3},
    }
    assert set_content(kept) == SetContent(replicas=2, patch_id=4, cursor="{}")
    assert set_content({"spec": {"replicas": None, "patchID": True}}) == SetContent(replicas=0, patch_id=0, cursor=None)


# ---- the Scaler with a watch -----------------------------------------------------------------------------------


class ApiServerSet:
    """One EphemeralRunnerSet as the API server keeps it under merge patches; also the watch of it (always live and
    up to date)."""

    def __init__(self) -> None:
        self.obj: dict[str, Any] = {"metadata": {"name": "set-a", "annotations": {}}, "spec": {}, "status": {}}
        self.patches: list[Mapping[str, Any]] = []
        self.live = True

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | list[Any],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        assert isinstance(patch, Mapping)
        self.patches.append(patch)
        for key, value in (patch.get("spec") or {}).items():
            if value is None:
                self.obj["spec"].pop(key, None)
            else:
                self.obj["spec"][key] = value
        self.obj["metadata"]["annotations"].update((patch.get("metadata") or {}).get("annotations") or {})
        return self.obj

    def content(self) -> SetContent | None:
        return set_content(self.obj) if self.live else None

    def capacity(self) -> int | None:
        value = self.obj["status"].get("advertisedCapacity")
        return value if isinstance(value, int) else None


def cursor(last_message_id: int) -> ListenerCursor:
    session_id = "6a1f2c9e-0000-4000-8000-000000000001"
    return ListenerCursor(scale_set_id=1, session_id=session_id, last_message_id=last_message_id)


async def test_an_idle_scaler_patches_the_set_once_and_then_only_what_changes_it() -> None:
    server = ApiServerSet()
    scaler = Scaler(server, namespace="arc", ephemeral_runner_set="set-a", min_runners=1, max_runners=5, watch=server)
    decisions = [await scaler.publish(0, cursor=cursor(0)) for _ in range(5)]
    assert [d.patch_id for d in decisions] == [0, 0, 0, 0, 0]
    assert len(server.patches) == 1
    assert scaler.skipped == 4

    scaler.note_job_event()  # a job started: a new patch ID, sent
    assert (await scaler.publish(1, cursor=cursor(1))).patch_id > 0
    await scaler.publish(1, cursor=cursor(1))  # still a job assigned: the target is above the minimum, a new ID
    await scaler.publish(0, cursor=cursor(2))  # the job completed: down to the minimum
    await scaler.publish(0, cursor=cursor(2))  # nothing happened since: force state, sent once
    await scaler.publish(0, cursor=cursor(2))
    specs = [p["spec"] for p in server.patches]
    assert [s["replicas"] for s in specs] == [1, 2, 2, 1, 1]
    assert specs[-1]["patchID"] == 0
    assert all(s["patchID"] > 0 for s in specs[1:-1])
    assert scaler.skipped == 5

    server.obj["spec"]["replicas"] = 4  # someone edits the set: the next decision puts it back
    await scaler.publish(0, cursor=cursor(2))
    assert server.obj["spec"]["replicas"] == 1
    assert scaler.skipped == 5


async def test_the_capacity_comes_from_the_watch_while_it_is_live_else_from_the_last_patch() -> None:
    server = ApiServerSet()
    scaler = Scaler(server, namespace="arc", ephemeral_runner_set="set-a", min_runners=0, max_runners=5, watch=server)
    server.obj["status"]["advertisedCapacity"] = 3
    await scaler.publish(0)
    server.obj["status"]["advertisedCapacity"] = 2  # the controller writes a new figure; no patch is sent
    await scaler.publish(0)
    assert scaler.skipped == 1
    assert scaler.cluster_capacity == 2
    server.live = False  # the watch gave up (a Role without the grant): the figure of the last patch's answer
    server.obj["status"]["advertisedCapacity"] = 1
    await scaler.publish(0)
    assert scaler.skipped == 1
    assert scaler.cluster_capacity == 1


async def test_a_scaler_without_a_watch_repeats_the_force_state_only_when_a_refresh_is_due() -> None:
    server, clock = ApiServerSet(), FakeClock()
    scaler = Scaler(server, namespace="arc", ephemeral_runner_set="set-a", min_runners=1, max_runners=5, clock=clock)
    for _ in range(5):
        await scaler.publish(0, cursor=cursor(0))
    assert len(server.patches) == 1  # a shared listener's member used to send all five

    await clock.advance(UNWATCHED_REFRESH_SECONDS)
    await scaler.publish(0, cursor=cursor(0))
    await scaler.publish(0, cursor=cursor(0))
    assert len(server.patches) == 2  # the refresh, then the period starts again


async def test_a_scaler_without_a_watch_repeats_every_decision_while_the_capacity_holds_its_set_back() -> None:
    server = ApiServerSet()
    server.obj["status"]["advertisedCapacity"] = 2  # the cluster gives less than maxRunners
    scaler = Scaler(server, namespace="arc", ephemeral_runner_set="set-a", min_runners=0, max_runners=5)
    for _ in range(3):
        await scaler.publish(0)
    assert (len(server.patches), scaler.cluster_capacity) == (3, 2)

    server.obj["status"]["advertisedCapacity"] = 5  # room again: learned from the next answer, then repeats stop
    for _ in range(3):
        await scaler.publish(0)
    assert (len(server.patches), scaler.cluster_capacity) == (4, 5)


# ---- the watch's own loop --------------------------------------------------------------------------------------


def ers_object(version: str, *, replicas: int, capacity: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "set-a", "namespace": "arc", "resourceVersion": version},
        "spec": {"replicas": replicas, "patchID": 0},
        "status": {"advertisedCapacity": capacity},
    }


class ScriptedApi:
    """Answers the watch's list and watch calls from a script: each list returns the next listing, each watch
    yields the next batch of events then ends (or raises the next error)."""

    def __init__(self, listings: list[ObjectList | Exception], watches: list[list[WatchEvent] | Exception]) -> None:
        self.listings = listings
        self.watches = watches
        self.watched_from: list[str | None] = []
        self.selectors: list[str | None] = []
        self.exhausted = asyncio.Event()

    async def list(self, resource: Resource, *, field_selector: str | None = None, **_: Any) -> ObjectList:
        self.selectors.append(field_selector)
        answer = self.listings.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def watch(self, resource: Resource, *, resource_version: str | None = None, **_: Any) -> AsyncIterator[WatchEvent]:
        self.watched_from.append(resource_version)
        return self._events()

    async def _events(self) -> AsyncIterator[WatchEvent]:
        if not self.watches:
            self.exhausted.set()
            await asyncio.Event().wait()  # a quiet watch, until the test stops it
        answer = self.watches.pop(0)
        if isinstance(answer, Exception):
            raise answer
        for event in answer:
            yield event


async def test_the_watch_lists_follows_relists_after_gone_and_stops_for_good_when_refused() -> None:
    api = ScriptedApi(
        listings=[
            ObjectList(items=[ers_object("10", replicas=1, capacity=5)], resource_version="10"),
            ObjectList(items=[], resource_version="30"),  # after Gone: the set was deleted meanwhile
        ],
        watches=[
            [WatchEvent("MODIFIED", ers_object("11", replicas=2, capacity=3)), WatchEvent("BOOKMARK", {
                "metadata": {"resourceVersion": "12"}})],
            kube_errors.Gone(410, "Expired", "too old"),
        ],
    )  # fmt: skip
    watch = SetWatch(api, namespace="arc", name="set-a", clock=FakeClock())  # type: ignore[arg-type]
    assert watch.content() is None
    watch.start()
    await asyncio.wait_for(api.exhausted.wait(), timeout=5)
    assert api.selectors == ["metadata.name=set-a", "metadata.name=set-a"]
    assert api.watched_from == ["10", "12", "30"]  # resumed from the bookmark, then from the new list
    assert watch.content() is ABSENT
    assert watch.capacity() is None
    await watch.stop()

    refusing = ScriptedApi(listings=[kube_errors.Forbidden(403, "Forbidden", "no")], watches=[])
    refused = SetWatch(refusing, namespace="arc", name="set-a", clock=FakeClock())  # type: ignore[arg-type]
    await asyncio.wait_for(refused.run(), timeout=5)  # returns: refused for good
    assert refused.refused is not None
    assert refused.content() is None
