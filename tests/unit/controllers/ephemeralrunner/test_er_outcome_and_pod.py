"""The EphemeralRunner's pure parts: pod verdicts, failure backoff, and the objects it builds."""

from __future__ import annotations

import base64
import copy
import datetime as dt
from typing import Any

import pytest

from arc_scaleset.controllers.ephemeralrunner.builders import (
    desired_jit_secret,
    desired_runner_pod,
    secret_runner_id,
)
from arc_scaleset.controllers.ephemeralrunner.outcome import MESSAGE_LIMIT, Verdict, backoff_remaining, pod_outcome
from arc_scaleset.controllers.ephemeralrunnerset.builders import desired_ephemeral_runner

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def pod(phase: str = "Running", *, runner: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    statuses = [] if runner is None else [{"name": "runner", "state": runner}]
    return {"metadata": {"name": "r", "uid": "u1"}, "status": {"phase": phase, "containerStatuses": statuses, **status}}


def terminated(code: int, reason: str = "Error") -> dict[str, Any]:
    return {"terminated": {"exitCode": code, "reason": reason}}


@pytest.mark.parametrize(
    ("the_pod", "has_job", "verdict"),
    [
        (pod("Succeeded", runner=terminated(0, "Completed")), False, Verdict.SUCCEEDED),
        (pod("Failed", runner=terminated(0)), True, Verdict.SUCCEEDED),  # a sidecar failed, the runner did not
        (pod("Failed", runner=terminated(7)), False, Verdict.OUTDATED),
        (pod("Running", runner=terminated(7)), True, Verdict.OUTDATED),
        (pod("Failed", runner=terminated(1)), False, Verdict.RETRY),
        (pod("Failed", runner=terminated(1)), True, Verdict.DELETE_RUNNER),
        (pod("Failed", runner=terminated(137, "OOMKilled")), False, Verdict.LOST),
        (pod("Failed", reason="Evicted", message="low memory"), False, Verdict.LOST),
        (pod("Pending", runner={"waiting": {"reason": "InvalidImageName", "message": "bad ref"}}), False,
         Verdict.CANNOT_START),
        (pod("Pending", runner={"waiting": {"reason": "ErrImageNeverPull"}}), False, Verdict.CANNOT_START),
        (pod("Pending", runner={"waiting": {"reason": "ImagePullBackOff"}}), False, Verdict.MIRROR),  # may resolve
        (pod("Pending"), False, Verdict.WAIT),
        (pod("Running", runner={"running": {}}), False, Verdict.MIRROR),
    ],
)  # fmt: skip
def test_pod_verdicts(the_pod: dict[str, Any], has_job: bool, verdict: Verdict) -> None:
    assert pod_outcome(the_pod, has_job=has_job, runner_phase="Running").verdict is verdict


def created_at(the_pod: dict[str, Any], when: dt.datetime) -> dict[str, Any]:
    the_pod["metadata"]["creationTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    return the_pod


def test_a_runner_that_has_not_started_is_waited_for_until_the_pending_timeout_and_then_retried() -> None:
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
    stuck = created_at(pod("Pending", conditions=[unschedulable]), NOW - dt.timedelta(seconds=600))
    waiting = pod_outcome(stuck, has_job=False, runner_phase="Pending", now=NOW, pending_timeout=900)
    assert waiting.verdict is Verdict.WAIT
    assert waiting.recheck_after == 300, "comes back when the timeout passes: no event would wake it"

    late = NOW + dt.timedelta(seconds=300)
    retried = pod_outcome(stuck, has_job=False, runner_phase="Pending", now=late, pending_timeout=900)
    assert (retried.verdict, retried.reason) == (Verdict.RETRY, "PendingTimeout")
    assert "PodScheduled Unschedulable: 0/3 nodes" in retried.message
    assert pod_outcome(stuck, has_job=False, runner_phase="Pending", now=late).verdict is Verdict.WAIT, "no timeout"

    pulling = created_at(
        pod("Pending", runner={"waiting": {"reason": "ImagePullBackOff", "message": "not found"}}), NOW
    )
    a_minute_later = NOW + dt.timedelta(seconds=60)
    timed_out = pod_outcome(pulling, has_job=False, runner_phase="Pending", now=a_minute_later, pending_timeout=60)
    assert "container runner ImagePullBackOff: not found" in timed_out.message


def test_a_started_runner_is_never_timed_out_however_old_its_pod() -> None:
    old = NOW - dt.timedelta(days=1)
    running = created_at(pod("Running", runner={"running": {}}), old)
    outcome = pod_outcome(running, has_job=True, runner_phase="Running", now=NOW, pending_timeout=60)
    assert (outcome.verdict, outcome.recheck_after) == (Verdict.MIRROR, None)


def test_failed_init_container_is_a_pod_failure() -> None:
    the_pod = pod("Pending", initContainerStatuses=[{"name": "init", "state": terminated(2)}])
    assert pod_outcome(the_pod, has_job=False, runner_phase="Pending").verdict is Verdict.RETRY


def test_pod_deleted_under_a_running_runner_is_lost_but_our_own_retry_deletion_is_not() -> None:
    the_pod = pod("Running", runner={"running": {}})
    the_pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert pod_outcome(the_pod, has_job=True, runner_phase="Running").verdict is Verdict.LOST
    assert pod_outcome(the_pod, has_job=False, runner_phase="Pending").verdict is Verdict.MIRROR


@pytest.mark.parametrize("has_job", [False, True])
@pytest.mark.parametrize("runner_state", [None, {"running": {}}, {"waiting": {"reason": "ContainerCreating"}}])
@pytest.mark.parametrize("pod_phase", ["Succeeded", "Failed"])
def test_a_pod_that_ended_without_the_runners_exit_never_moves_a_running_runner_back_to_pending(
    pod_phase: str, runner_state: dict[str, Any] | None, has_job: bool
) -> None:
    outcome = pod_outcome(pod(pod_phase, runner=runner_state), has_job=has_job, runner_phase="Running")
    # Neither mirrored as Pending nor retried (a retry sets Pending for the next pod): the runner is done.
    expected = Verdict.SUCCEEDED if pod_phase == "Succeeded" else Verdict.LOST
    assert outcome.verdict is expected
    assert outcome.phase != "Pending"


def test_a_failed_pod_whose_runner_never_ran_is_still_retried() -> None:
    assert pod_outcome(pod("Failed"), has_job=False, runner_phase="Pending").verdict is Verdict.RETRY
    # A node's admission refusal: the pod never ran (so its runner was never seen running), a retry may fit.
    refused = pod("Failed", reason="OutOfcpu")
    assert pod_outcome(refused, has_job=False, runner_phase="Pending").verdict is Verdict.RETRY


def test_a_pod_phase_that_says_nothing_keeps_a_running_runner_running() -> None:
    unknown = pod("Unknown", runner={"running": {}})
    assert pod_outcome(unknown, has_job=True, runner_phase="Running").phase == "Running"
    assert pod_outcome(unknown, has_job=False, runner_phase="Pending").phase == "Pending"


def test_mirror_reads_readiness_from_the_latest_ready_condition() -> None:
    the_pod = pod(
        "Running",
        runner={"running": {}},
        conditions=[
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"},
        ],
    )
    outcome = pod_outcome(the_pod, has_job=False, runner_phase="")
    assert (outcome.phase, outcome.ready) == ("Running", True)


@pytest.mark.parametrize(("failures", "age", "remaining"), [(0, 0, 0), (1, 0, 5), (1, 5, 0), (3, 15, 5), (5, 0, 80)])
def test_failure_backoff_is_0_5_10_20_40_80_seconds(failures: int, age: int, remaining: float) -> None:
    stamp = (NOW - dt.timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
    er = {"status": {"failures": {f"uid{i}": stamp for i in range(failures)}}}
    assert backoff_remaining(er, now=NOW) == remaining


# -- builders ---------------------------------------------------------------------------------------------

ERS: dict[str, Any] = {
    "apiVersion": "actions.github.com/v1alpha1",
    "kind": "EphemeralRunnerSet",
    "metadata": {
        "name": "arc",
        "namespace": "ns",
        "uid": "ers-uid",
        "labels": {"app.kubernetes.io/component": "runner-set", "team": "a", "internal.example/x": "1"},
        "annotations": {"actions.github.com/runner-group-name": "Default"},
    },
    "spec": {
        "replicas": 2,
        "patchID": 12,
        "actionableRevision": 3,
        "ephemeralRunnerMetadata": {"labels": {"app.kubernetes.io/component": "mine", "extra": "y"},
                                    "annotations": {"actions.github.com/patch-id": "999", "note": "n"}},
        "ephemeralRunnerSpec": {
            "githubConfigUrl": "https://github.com/org",
            "githubConfigSecret": "gh",
            "runnerScaleSetId": 7,
            "proxy": {"http": {"url": "http://proxy:3128"}, "noProxy": ["a"]},
            "metadata": {"labels": {"tmpl": "t"}},
            "spec": {"containers": [{"name": "runner", "image": "img", "env": [{"name": "A", "value": "1"}]},
                                    {"name": "side", "image": "img2"}]},
        },
    },
}  # fmt: skip


def test_new_runner_is_stamped_with_patch_id_and_revision_and_reserved_keys_win() -> None:
    er = desired_ephemeral_runner(ERS, exclude_label_prefixes=("internal.example/",))
    meta = er["metadata"]
    assert meta["generateName"] == "arc-runner-"
    assert meta["annotations"]["actions.github.com/patch-id"] == "12"
    assert meta["annotations"]["actions.github.com/actionable-revision"] == "3"
    assert meta["annotations"]["note"] == "n"
    assert meta["labels"]["app.kubernetes.io/component"] == "runner"
    assert meta["labels"]["extra"] == "y"
    assert "internal.example/x" not in meta["labels"]
    assert len(meta["finalizers"]) == 2
    assert meta["ownerReferences"][0]["uid"] == "ers-uid"
    assert meta["ownerReferences"][0]["controller"] is True
    assert er["spec"]["proxySecretRef"].startswith("arc-")
    assert er["spec"]["proxySecretRef"].endswith("-runner-proxy")


def test_the_listeners_report_on_the_set_reaches_neither_runner_nor_pod() -> None:
    """The listener writes its state (with its message session's ID) on the set; ARC copies the set's
    annotations to each runner, and the runner's to its pod, but that one is about the listener."""
    ers = copy.deepcopy(ERS)
    ers["metadata"].setdefault("annotations", {})["listener.arc-scaleset.dev/state"] = '{"sessionId":"6a1f"}'
    er = desired_ephemeral_runner(ers)
    er["metadata"].update(name="arc-runner-abcde", uid="er-uid")
    the_pod = desired_runner_pod(er, runner_id=42, version="1.2.3")
    assert "listener.arc-scaleset.dev/state" not in er["metadata"]["annotations"]
    assert "listener.arc-scaleset.dev/state" not in the_pod["metadata"].get("annotations", {})
    assert er["metadata"]["annotations"]["note"] == "n", "the set's other annotations are copied, as ARC does"


def test_the_listeners_message_cursor_on_the_set_reaches_neither_runner_nor_pod() -> None:
    ers = copy.deepcopy(ERS)
    ers["metadata"].setdefault("annotations", {})["listener.arc-scaleset.dev/cursor"] = '{"lastMessageId":4}'
    er = desired_ephemeral_runner(ers)
    er["metadata"].update(name="arc-runner-abcde", uid="er-uid")
    the_pod = desired_runner_pod(er, runner_id=42, version="1.2.3")
    assert "listener.arc-scaleset.dev/cursor" not in er["metadata"]["annotations"]
    assert "listener.arc-scaleset.dev/cursor" not in the_pod["metadata"].get("annotations", {})


def test_runner_pod_gets_the_injected_env_on_the_runner_container_only() -> None:
    er = desired_ephemeral_runner(ERS)
    er["metadata"].update(name="arc-runner-abcde", uid="er-uid")
    the_pod = desired_runner_pod(er, runner_id=42, version="1.2.3")
    runner, side = the_pod["spec"]["containers"]
    names = [e["name"] for e in runner["env"]]
    assert names == ["A", "ACTIONS_RUNNER_INPUT_JITCONFIG", "GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT",
                     "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE", "http_proxy", "no_proxy"]  # fmt: skip
    assert runner["env"][1]["valueFrom"]["secretKeyRef"] == {"name": "arc-runner-abcde", "key": "jitToken"}
    assert "env" not in side
    assert the_pod["metadata"]["labels"]["actions-ephemeral-runner"] == "True"
    assert the_pod["metadata"]["labels"]["tmpl"] == "t"
    assert ERS["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]


def test_jit_secret_round_trips_the_runner_id_and_keeps_the_token_out_of_metadata() -> None:
    er = {"metadata": {"name": "r", "namespace": "ns", "uid": "u"}, "apiVersion": "v", "kind": "EphemeralRunner",
          "spec": {}}  # fmt: skip
    secret = desired_jit_secret(er, encoded_jit_config="SECRET", runner_id=42, runner_name="r", scale_set_id=7)
    assert secret_runner_id(secret) == 42
    assert base64.b64decode(secret["data"]["jitToken"]) == b"SECRET"
    assert "SECRET" not in str(secret["metadata"])
    assert secret_runner_id({"data": {"runnerId": base64.b64encode(b"zero").decode()}}) is None


# -- what a pod says is masked before it reaches the runner's status, Events and logs ------------------------------

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2"  # a personal access token's shape


@pytest.mark.parametrize(
    ("the_pod", "runner_phase", "verdict"),
    [
        (pod("Failed", reason="Evicted", message=f"evicted; env had {TOKEN}"), "Running", Verdict.LOST),
        (pod("Failed", message=f"the runner said: token={TOKEN}"), "Running", Verdict.LOST),
        (pod("Failed", message=f"the runner said: {TOKEN}"), "Pending", Verdict.RETRY),
        (pod("Pending", runner={"waiting": {"reason": "InvalidImageName", "message": f"bad ref ghcr.io/{TOKEN}"}}),
         "Pending", Verdict.CANNOT_START),
        (pod("Running", runner={"running": {}}, message=f"node says {TOKEN}"), "Pending", Verdict.MIRROR),
        (pod("Failed", reason=f"Bearer {TOKEN}"), "Pending", Verdict.RETRY),
    ],
)  # fmt: skip
def test_a_secret_in_the_pods_words_never_reaches_the_runners_status(
    the_pod: dict[str, Any], runner_phase: str, verdict: Verdict
) -> None:
    outcome = pod_outcome(the_pod, has_job=False, runner_phase=runner_phase)
    assert outcome.verdict is verdict
    assert TOKEN not in outcome.message
    assert TOKEN not in outcome.reason
    assert "[REDACTED]" in outcome.message + outcome.reason


def test_a_pending_pods_scheduler_message_is_masked_in_the_pending_timeout_reason() -> None:
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": f"x {TOKEN}"}
    the_pod = created_at(pod("Pending", conditions=[unschedulable]), NOW - dt.timedelta(hours=1))
    outcome = pod_outcome(the_pod, has_job=False, runner_phase="Pending", now=NOW, pending_timeout=60)
    assert outcome.verdict is Verdict.RETRY
    assert TOKEN not in outcome.message
    assert "[REDACTED]" in outcome.message


def test_a_long_pod_message_is_masked_before_it_is_cut_so_no_half_secret_is_left() -> None:
    # The token straddles the message limit: cut first, its first half would no longer look like a token.
    the_pod = pod("Failed", message="x" * (MESSAGE_LIMIT - 10) + f" {TOKEN} and more")
    outcome = pod_outcome(the_pod, has_job=False, runner_phase="Pending")  # a retry quotes the pod's message
    assert outcome.verdict is Verdict.RETRY
    assert len(outcome.message) == MESSAGE_LIMIT
    assert "ghp_" not in outcome.message
