"""``arc-scaleset explain``'s rules on recorded snapshots (tests/unit/diagnose/snapshots/*.json): each finds
its case, says it in one line with the evidence, and stays silent on a healthy set."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from arc_scaleset.diagnose.rules import Finding, Severity, explain, format_age
from arc_scaleset.diagnose.snapshot import EventRecord, Snapshot

SNAPSHOTS = Path(__file__).parent / "snapshots"


def recorded(name: str) -> Snapshot:
    return Snapshot.from_json(json.loads((SNAPSHOTS / f"{name}.json").read_text()))


def lines(name: str) -> list[str]:
    return [finding.line for finding in explain(recorded(name))]


def only(name: str) -> Finding:
    findings = explain(recorded(name))
    assert len(findings) == 1, findings
    return findings[0]


def test_a_healthy_set_gets_one_no_problem_line_with_its_numbers() -> None:
    finding = only("healthy")
    assert finding.rule == "healthy"
    assert finding.line == "no problem found: 1 runner (0 busy), 1 desired, listener Polling since 30m"


def test_unschedulable_runners_are_counted_with_their_age_and_the_schedulers_message() -> None:
    finding = only("unschedulable")
    assert finding.severity is Severity.ERROR
    assert finding.line.startswith("3 runners Pending for 6m: pod unschedulable (0/3 nodes are available: 3 node(s)")
    assert len(finding.objects) == 3


def test_an_image_that_cannot_be_pulled_is_named_at_once() -> None:
    assert lines("image_pull") == [
        "1 runner Pending for 3m: image cannot be pulled: ImagePullBackOff "
        '(Back-off pulling image "ghcr.io/actions/actions-runner:nope")'
    ]


def test_a_listener_kept_out_by_another_session_says_409_and_how_long() -> None:
    # The scale set's Degraded=True ListenerOffline repeats the outage: one line says it, with its cause.
    assert lines("session_conflict") == [
        "listener has held no session for 4m: GitHub answered 409 (session held by another listener; an old "
        "controller may still run)"
    ]


def test_a_listener_whose_polls_fail_says_since_when_and_why() -> None:
    assert lines("listener_failing") == [
        "listener's polls failing for 3m: GitHub failed (5xx, timeout, or an answer that could not be used)"
    ]


def test_a_revision_held_back_by_busy_runners_names_their_jobs() -> None:
    finding = only("revision_rolling")
    assert finding.severity is Severity.INFO
    assert finding.line == (
        "revision 4 not applied yet (applied: 3); 2 busy runners of revision 3 are finishing jobs 81234, 81240"
    )


def test_an_applied_revision_with_an_old_runner_still_busy_says_so() -> None:
    assert lines("revision_applied_busy_old") == [
        "revision 4 applied; 1 busy runner of revision 3 is finishing jobs 81234"
    ]


def test_rejected_credentials_without_a_runner_set_name_the_secret() -> None:
    finding = only("bad_credentials")
    assert finding.severity is Severity.ERROR
    assert finding.line == (
        "no EphemeralRunnerSet: credentials rejected (Secret arc-runners/github: bad or expired token)"
    )


def test_rejected_credentials_from_a_vault_name_the_vault_secret_not_a_kubernetes_secret() -> None:
    document = json.loads((SNAPSHOTS / "bad_credentials.json").read_text())
    document["scaleSet"]["spec"]["vaultConfig"] = {"type": "azure_key_vault"}
    (finding,) = explain(Snapshot.from_json(document))
    assert finding.line == (
        "no EphemeralRunnerSet: credentials rejected (Secret github in the vault: bad or expired token)"
    )


def test_a_scale_set_without_status_asks_whether_the_controller_runs() -> None:
    assert lines("no_status") == [
        "no EphemeralRunnerSet: the scale set has no status (is the controller running, and does it watch "
        "namespace arc-runners?)"
    ]


def test_a_set_at_max_runners_with_every_runner_busy_says_jobs_wait() -> None:
    finding = only("at_max")
    assert finding.line.startswith("scale set at maxRunners (3) with all 3 runners busy (jobs 81201, 81202, 81203)")


def test_failed_runners_are_grouped_by_reason_with_the_message() -> None:
    assert lines("failed_runner") == [
        "1 runner Failed: InvalidPod (Failed to create the pod: spec.containers[0].image: Required value)"
    ]


def test_a_pod_pending_briefly_for_no_stated_reason_is_not_reported() -> None:
    snapshot = recorded("image_pull")
    snapshot.runner_pods[0]["status"] = {"phase": "Pending"}
    snapshot.taken_at -= dt.timedelta(minutes=2)  # the runner was created a minute ago
    assert [f.rule for f in explain(snapshot)] == ["healthy"]
    snapshot.taken_at += dt.timedelta(minutes=5)
    assert lines_of(snapshot) == ["1 runner Pending for 6m: pod Pending"]


def lines_of(snapshot: Snapshot) -> list[str]:
    return [finding.line for finding in explain(snapshot)]


def test_secret_shaped_text_in_a_condition_is_masked() -> None:
    snapshot = recorded("bad_credentials")
    condition = snapshot.scale_set["status"]["conditions"][2]
    condition["message"] = "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 refused"
    (line,) = lines_of(snapshot)
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in line
    assert "[REDACTED]" in line


@pytest.mark.parametrize("name", sorted(p.stem for p in SNAPSHOTS.glob("*.json")))
def test_a_snapshot_survives_its_json_round_trip(name: str) -> None:
    snapshot = recorded(name)
    assert Snapshot.from_json(json.loads(json.dumps(snapshot.to_json()))) == snapshot


def test_events_from_either_api_read_alike() -> None:
    new = EventRecord.from_event(
        {
            "regarding": {"kind": "Pod", "namespace": "ns", "name": "p"},
            "type": "Warning",
            "reason": "FailedScheduling",
            "note": "0/1 nodes",
            "eventTime": "2026-03-01T11:58:00.000000Z",
            "series": {"count": 4, "lastObservedTime": "2026-03-01T11:59:00.000000Z"},
        }
    )
    old = EventRecord.from_event(
        {
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p"},
            "type": "Warning",
            "reason": "FailedScheduling",
            "message": "0/1 nodes",
            "count": 4,
            "lastTimestamp": "2026-03-01T11:59:00Z",
        }
    )
    assert new == old
    assert new.time == dt.datetime(2026, 3, 1, 11, 59, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("seconds", "text"), [(45, "45s"), (119, "119s"), (360, "6m"), (7500, "2h5m"), (7200, "2h"), (280800, "3d6h")]
)
def test_ages_read_like_kubectls(seconds: int, text: str) -> None:
    assert format_age(dt.timedelta(seconds=seconds)) == text


def capacity_limited_snapshot() -> Snapshot:
    """The healthy set, its runner set limited to 5 runners by the namespace's quota (docs/capacity.md)."""
    document = json.loads((SNAPSHOTS / "healthy.json").read_text())
    status = document["runnerSets"][0]["status"]
    status["advertisedCapacity"] = 5
    status["conditions"] = [
        {"type": "CapacityLimited", "status": "True", "reason": "ResourceQuotaExhausted",
         "message": "ResourceQuota runners admits 5 runners", "lastTransitionTime": "2026-03-01T12:00:00Z"}
    ]  # fmt: skip
    return Snapshot.from_json(document)


def test_a_set_the_cluster_cannot_give_max_runners_says_what_github_is_told_and_why() -> None:
    (finding,) = explain(capacity_limited_snapshot())
    assert finding.rule == "capacity-limited"
    assert finding.severity is Severity.WARNING
    assert finding.line.startswith(
        "GitHub is told the scale set can run 5 runners now, not its maxRunners 10 (ResourceQuotaExhausted: "
        "ResourceQuota runners admits"
    )


WARM_MESSAGE = (
    "warm pool 8a8ca605 (cpu=1, memory=2Gi, image runner:2.330, shared by 3 scale sets) keeps 4 placeholder(s): the"
    " largest ask of its members, arc-runners/arc-runner-set's, from a warmCapacity.schedule window open now; this"
    " scale set asks for 4: a warmCapacity.schedule window open now asks for 10, capped at 4 by warmCapacity.max"
)


def warm_snapshot(*, status: str = "True", reason: str = "Schedule", message: str = WARM_MESSAGE) -> Snapshot:
    """The healthy set asking for warm capacity, its pool's condition, and two placeholder preemptions."""
    document = json.loads((SNAPSHOTS / "healthy.json").read_text())
    document["scaleSet"]["spec"]["warmCapacity"] = {"max": 4, "schedule": [{"start": "08:00", "end": "18:00"}]}
    document["scaleSet"]["status"]["conditions"].append(
        {"type": "WarmCapacity", "status": status, "reason": reason, "message": message,
         "lastTransitionTime": "2026-03-01T11:00:00Z"}
    )  # fmt: skip
    event = {"kind": "AutoscalingRunnerSet", "namespace": "arc-runners", "name": "arc-runner-set", "type": "Normal"}
    document["events"] += [
        {**event, "reason": "WarmPlaceholderPreempted", "note": "runner pods took the room of 1 placeholder(s)",
         "time": "2026-03-01T11:58:00Z", "count": 2},
        {**event, "reason": "WarmPoolResized", "note": "warm pool 8a8ca605 now keeps 4 placeholder(s), was 0: ...",
         "time": "2026-03-01T11:00:00Z", "count": 1},
    ]  # fmt: skip
    return Snapshot.from_json(document)


def test_a_warm_set_is_told_its_pools_size_why_and_the_placeholders_runner_pods_took() -> None:
    (finding,) = explain(warm_snapshot())
    assert finding.rule == "warm-capacity"
    assert finding.severity is Severity.INFO
    assert finding.line == (
        f"{WARM_MESSAGE}; runner pods took placeholders' room (2 Events, the last 2m ago), the placeholders wait "
        "for a node again"
    )


def test_a_warm_set_without_placeholders_is_a_warning_with_the_controllers_words() -> None:
    refused = "no placeholders: the runner shape requests nvidia.com/gpu=1 (not allowed by --warm-placeholder-max..."
    (finding,) = explain(warm_snapshot(status="False", reason="WarmShapeRefused", message=refused))
    assert finding.severity is Severity.WARNING
    assert finding.line == f"no warm placeholders (WarmShapeRefused): {refused}"


def test_warm_capacity_asked_for_and_never_reported_points_at_the_controllers_flag() -> None:
    document = json.loads((SNAPSHOTS / "healthy.json").read_text())
    document["scaleSet"]["spec"]["warmCapacity"] = {"runners": 2}
    (finding,) = explain(Snapshot.from_json(document))
    assert finding.severity is Severity.WARNING
    assert "--warm-capacity" in finding.line
