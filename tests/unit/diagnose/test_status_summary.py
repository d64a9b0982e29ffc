"""``arc-scaleset status``'s document and text on recorded snapshots: the numbers a user asks for, and nothing
secret."""

from __future__ import annotations

import json

from arc_scaleset.cli import COMMANDS, build_parser
from arc_scaleset.diagnose.render import render_status
from arc_scaleset.diagnose.summary import summarize
from tests.unit.diagnose.test_explain_rules import WARM_MESSAGE, capacity_limited_snapshot, recorded, warm_snapshot


def test_status_shows_github_bounds_runners_revisions_and_listener() -> None:
    doc = summarize(recorded("revision_rolling"))
    assert doc["github"] == {
        "configUrl": "https://github.com/my-org",
        "scaleSetId": 7,
        "scaleSetName": "arc-runner-set",
        "runnerGroup": "Default",
        "runnersPage": "https://github.com/my-org/settings/actions/runners",
    }
    assert (doc["minRunners"], doc["maxRunners"], doc["desiredRunners"]) == (1, 10, 3)
    assert doc["runners"] == {"total": 3, "busy": 2, "byPhase": {"Running": 3}, "byRevision": {"3": 2, "4": 1}}
    assert doc["runnerSet"]["desiredRevision"] == 4
    assert doc["runnerSet"]["appliedRevision"] == 3
    assert doc["runnerSet"]["patchId"] == 3
    assert doc["listener"]["session"] == "Polling"
    assert doc["listener"]["pollingSince"] == doc["listener"]["since"]
    assert doc["listener"]["lastSuccessfulPoll"] == "2026-03-01T12:00:00Z"
    assert [c["type"] for c in doc["conditions"]] == ["Ready", "Progressing", "Degraded"]


def test_status_never_shows_the_listeners_session_id() -> None:
    snapshot = recorded("healthy")
    assert "6a1f0000-aaaa" in json.dumps(snapshot.to_json())
    doc = summarize(snapshot)
    assert "6a1f0000-aaaa" not in json.dumps(doc)
    assert "6a1f0000-aaaa" not in render_status(doc)


def test_status_lists_events_newest_first() -> None:
    doc = summarize(recorded("healthy"))
    assert [e["reason"] for e in doc["events"]] == ["RunnerCreated", "ScaleSetRegistered"]


def test_status_text_is_one_screen_with_every_section() -> None:
    text = render_status(summarize(recorded("revision_rolling")))
    assert text.splitlines()[0] == "AutoscalingRunnerSet arc-runners/arc-runner-set: Running (generation 2, observed 2)"
    for expected in (
        'scale set 7 "arc-runner-set", runner group Default',
        "min 1, max 10, desired 3; 3 exist, 2 busy",
        "by phase: Running 3; by revision: 3 2, 4 1",
        "revision desired 4 applied 3 (rolling out)",
        "session Polling since 30m ago, no failed poll reported since",
        "Ready=True Running",
    ):
        assert expected in text, text
    assert len(text.splitlines()) < 40


def test_a_scale_set_without_runner_set_or_listener_renders() -> None:
    text = render_status(summarize(recorded("bad_credentials")))
    assert "RunnerSet   none" in text
    assert "Degraded=True GitHubAuthenticationFailed: bad or expired token" in text


def test_status_and_explain_are_commands_with_kubectl_like_flags() -> None:
    assert {"status", "explain"} <= COMMANDS.keys()
    for command in ("status", "explain"):
        args = build_parser([command]).parse_args([command, "my-set", "-n", "arc-runners", "-o", "json"])
        assert (args.name, args.namespace, args.output, args.all_namespaces) == ("my-set", "arc-runners", "json", False)


def test_kubectl_arc_is_installed_as_the_same_command_for_kubectls_plugin_convention() -> None:
    import tomllib

    from tests.paths import REPO_ROOT

    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-arc"] == scripts["arc-scaleset"]


def test_status_says_since_when_the_listener_polls_not_a_last_poll_it_does_not_record() -> None:
    # The listener records state changes, not polls (docs/listener.md): a Polling listener is shown "polling since".
    text = render_status(summarize(recorded("healthy")))
    assert "session Polling since 30m ago, no failed poll reported since" in text
    assert "last successful poll" not in text
    assert "not recorded" not in text


def test_status_of_a_listener_without_a_session_shows_its_last_success_before_that_or_none() -> None:
    doc = summarize(recorded("session_conflict"))
    assert doc["listener"]["pollingSince"] is None
    text = render_status(doc)
    assert "session WaitingForSession for 4m, no successful poll before it, last error SessionConflict" in text


def test_status_shows_the_capacity_github_is_told_and_what_limits_it() -> None:
    snapshot = capacity_limited_snapshot()
    doc = summarize(snapshot)
    assert doc["runnerSet"]["capacity"] == {
        "advertised": 5,
        "limitedBy": "ResourceQuotaExhausted",
        "message": "ResourceQuota runners admits 5 runners",
    }
    text = render_status(doc)
    assert "GitHub is told 5 runners (ResourceQuotaExhausted: ResourceQuota runners admits 5 runners)" in text
    assert summarize(recorded("healthy"))["runnerSet"]["capacity"] is None


def test_status_shows_the_warm_pool_its_size_why_and_the_preemptions() -> None:
    doc = summarize(warm_snapshot())
    assert doc["warmCapacity"] == {
        "asked": {"max": 4, "schedule": [{"start": "08:00", "end": "18:00"}]},
        "status": "True",
        "reason": "Schedule",
        "message": WARM_MESSAGE,
        "preemptionEvents": 2,
        "lastPreemption": "2026-03-01T11:58:00Z",
        "lastResize": "warm pool 8a8ca605 now keeps 4 placeholder(s), was 0: ...",
    }
    text = render_status(doc)
    assert f"Warm pool   {WARM_MESSAGE}" in text
    assert "runner pods took placeholders' room (2 Event(s), last 2m ago)" in text
    assert summarize(recorded("healthy"))["warmCapacity"] is None
