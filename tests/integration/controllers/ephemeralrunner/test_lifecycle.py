"""EphemeralRunner lifecycle on the real control plane: registration, pod failures and their limits, pods
that can never start or are lost, deletion while busy, runner ID 0, and bad input."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.controllers.ephemeralrunner.deletion import finalize_runner
from arc_scaleset.kube.resources import EVENTS, SECRETS
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.runner_harness import harness_fixture, runner_template  # noqa: F401 - fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


def name_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


async def events_for(h: ControllerHarness, name: str) -> list[dict[str, Any]]:
    items = (await h.kube.list(EVENTS, namespace=h.namespace)).items
    return [e for e in items if (e.get("regarding") or {}).get("name") == name]


async def test_runner_registers_and_its_secret_and_pod_are_owned_and_wired(h: ControllerHarness) -> None:
    await h.start()
    await h.create_ers(replicas=1, patch_id=0)
    (er,) = await h.wait_running(1)
    name = name_of(er)
    assert set(er["metadata"]["finalizers"]) == {
        "ephemeralrunner.actions.github.com/finalizer",
        "ephemeralrunner.actions.github.com/runner-registration-finalizer",
    }
    assert er["status"]["runnerName"] == name
    assert er["status"]["ready"] is True
    secret = await h.kube.get(SECRETS, name, namespace=h.namespace)
    assert set(secret["data"]) == {"jitToken", "runnerName", "runnerId", "scaleSetId"}
    assert secret["metadata"]["ownerReferences"][0]["uid"] == er["metadata"]["uid"]
    (pod,) = await h.pods()
    assert pod["metadata"]["ownerReferences"][0]["uid"] == er["metadata"]["uid"]
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["ACTIONS_RUNNER_INPUT_JITCONFIG"]["valueFrom"]["secretKeyRef"] == {"name": name, "key": "jitToken"}
    assert env["ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE"]["value"] == "1"


async def test_runner_whose_pod_cannot_be_scheduled_records_its_registration_and_can_be_scaled_down(
    h: ControllerHarness,
) -> None:
    # A new runner's ID is written together with its pod's first state; a pod that never gets one (no node
    # fits) must not keep the registration out of the status, or the set could never scale the runner down.
    await h.start()
    unschedulable = {"spec": {**runner_template()["spec"], "nodeSelector": {"arc-scaleset.dev/no-such-node": "x"}}}
    await h.create_ers(replicas=1, patch_id=0, template=unschedulable)

    def pending_with_id(runners: list[dict[str, Any]]) -> bool:
        return len(runners) == 1 and all(
            (r.get("status") or {}).get("runnerId") and (r.get("status") or {}).get("phase") == "Pending"
            for r in runners
        )

    (er,) = await h.wait_runners(pending_with_id, what="a Pending runner with its runner ID")
    name = name_of(er)
    assert er["status"]["runnerName"] == name
    assert name in h.registered()
    await h.patch_ers(replicas=0, patchID=0)
    await h.wait_runners(lambda rs: not rs, what="the runner scaled down")
    assert name not in h.registered()


async def test_runner_pod_that_never_starts_is_retried_after_the_pending_timeout_with_a_reason_that_says_why(
    h: ControllerHarness,
) -> None:
    await h.start(runner_pending_timeout=3.0)
    unschedulable = {"spec": {**runner_template()["spec"], "nodeSelector": {"arc-scaleset.dev/no-such-node": "x"}}}
    await h.create_ers(replicas=1, patch_id=0, template=unschedulable)
    (first,) = await h.wait_runners(lambda rs: len(rs) == 1, what="the runner")
    first_pod = await eventually(lambda: h.pods(), what="its pod")

    def timed_out(runners: list[dict[str, Any]]) -> bool:
        status = (runners[0].get("status") or {}) if len(runners) == 1 else {}
        return bool(status.get("failures")) and status.get("reason") == "PendingTimeout"

    (er,) = await h.wait_runners(timed_out, what="a PendingTimeout failure recorded", timeout=30)
    assert name_of(er) == name_of(first), "the runner is kept: only its pod is retried"
    assert "Unschedulable" in er["status"]["message"]
    assert list(er["status"]["failures"]) == [first_pod[0]["metadata"]["uid"]]

    async def replaced() -> bool:
        pods = await h.pods()
        return len(pods) == 1 and pods[0]["metadata"]["uid"] != first_pod[0]["metadata"]["uid"]

    await eventually(replaced, timeout=30, what="a new pod after the retry backoff")


async def test_failed_pod_without_job_is_retried_with_backoff_and_the_runner_deleted_after_five_failures(
    h: ControllerHarness,
) -> None:
    await h.start()
    await h.create_ers(replicas=1, patch_id=0)
    (er,) = await h.wait_running(1)
    name = name_of(er)
    first_uid = (await h.pods())[0]["metadata"]["uid"]
    await h.finish_pod(name, exit_code=1)

    async def retried() -> dict[str, Any] | None:
        runner = await h.kube.get(EPHEMERAL_RUNNERS, name, namespace=h.namespace)
        pods = [
            p for p in await h.pods() if p["metadata"]["uid"] != first_uid and p["status"].get("phase") == "Running"
        ]
        return runner if pods and first_uid in (runner["status"].get("failures") or {}) else None

    runner = await eventually(retried, timeout=30, what="the pod recreated after the 5 s backoff")
    assert len(runner["status"]["failures"]) == 1
    assert h.registered() == {name}

    # Four more recorded failures (long ago, so no backoff), then one more: the sixth deletes the runner.
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    await h.kube.patch(EPHEMERAL_RUNNERS, name, {"status": {"failures": {f"old-{i}": old for i in range(4)}}},
                       namespace=h.namespace, subresource="status")  # fmt: skip
    await h.finish_pod(name, exit_code=1)
    replaced = await h.wait_runners(lambda rs: len(rs) == 1 and name_of(rs[0]) != name, what="runner replaced")
    assert name not in h.registered()
    assert [e["reason"] for e in await events_for(h, name)].count("TooManyFailures") == 1
    del replaced


async def test_pod_that_can_never_start_fails_fast_with_a_reason_and_unregisters(h: ControllerHarness) -> None:
    await h.start()
    # Unschedulable, so kwok leaves the pod alone and we can report what a kubelet would.
    template = runner_template("bad::image")
    template["spec"]["nodeSelector"] = {"arc-scaleset.dev/nowhere": "true"}
    await h.create_ers(replicas=1, patch_id=0, template=template)
    (er,) = await h.wait_runners(lambda rs: len(rs) == 1 and rs[0].get("status", {}).get("runnerId"), what="reg")
    name = name_of(er)
    await eventually(lambda: _pod_exists(h, name), what="runner pod")
    await h.set_pod_status(name, {"phase": "Pending", "containerStatuses": [{
        "name": "runner", "image": "bad::image", "imageID": "", "ready": False, "restartCount": 0,
        "state": {"waiting": {"reason": "InvalidImageName", "message": "couldn't parse image name"}}}]})  # fmt: skip
    runners = await h.wait_runners(
        lambda rs: any(r.get("status", {}).get("phase") == "Failed" for r in rs), what="runner Failed"
    )
    failed = next(r for r in runners if name_of(r) == name)
    assert failed["status"]["reason"] == "InvalidImageName"
    assert "can never start" in failed["status"]["message"]
    await eventually(lambda: _unregistered(h, name), what="registration removed")
    assert "InvalidImageName" in [e["reason"] for e in await events_for(h, name)]
    # A Failed runner does not hold its slot forever: reaped and replaced after failed_runner_min_age.


async def test_oom_killed_runner_is_terminal_and_its_registration_removed(h: ControllerHarness) -> None:
    await h.start()
    await h.create_ers(replicas=1, patch_id=0)
    (er,) = await h.wait_running(1)
    name = name_of(er)
    await h.set_pod_status(name, {"phase": "Failed", "containerStatuses": [{
        "name": "runner", "image": "x", "imageID": "", "ready": False, "restartCount": 0,
        "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]})  # fmt: skip
    await h.wait_runners(lambda rs: len(rs) == 1 and name_of(rs[0]) != name, timeout=45, what="replaced")
    assert name not in h.registered()
    assert "OOMKilled" in [e["reason"] for e in await events_for(h, name)]


async def test_deleting_a_busy_runner_waits_for_its_job_then_unregisters(h: ControllerHarness) -> None:
    await h.start()
    await h.create_ers(replicas=1, patch_id=1)
    (er,) = await h.wait_running(1)
    name = name_of(er)
    await h.make_busy(name)
    await h.kube.delete(EPHEMERAL_RUNNERS, name, namespace=h.namespace)
    await h.wait_runners(lambda rs: any(r["metadata"].get("deletionTimestamp") for r in rs), what="deleting")
    runner = await h.kube.get(EPHEMERAL_RUNNERS, name, namespace=h.namespace)
    assert "ephemeralrunner.actions.github.com/runner-registration-finalizer" in runner["metadata"]["finalizers"]
    assert name in h.registered()
    h.sim.state.runner_exit(name)  # the job ends
    # Poke the runner instead of waiting out the 30 s requeue.
    await h.kube.patch(EPHEMERAL_RUNNERS, name, {"metadata": {"annotations": {"poke": "1"}}}, namespace=h.namespace)
    await h.wait_runners(lambda rs: name not in {name_of(r) for r in rs}, what="runner gone")
    assert name not in h.registered()


async def test_runner_without_runner_id_is_deleted_without_asking_github(h: ControllerHarness) -> None:
    await h.start("EphemeralRunnerSet")
    await h.create_ers(replicas=1, patch_id=0)
    (er,) = await h.wait_runners(lambda rs: len(rs) == 1, what="one runner")
    await h.stop()
    name = name_of(er)
    await h.kube.delete(EPHEMERAL_RUNNERS, name, namespace=h.namespace)
    before = len([r for r in h.sim.requests if r.method == "DELETE"])
    await h.start()
    await h.wait_runners(lambda rs: name not in {name_of(r) for r in rs}, what="runner gone")
    assert len([r for r in h.sim.requests if r.method == "DELETE"]) == before


async def test_a_deleted_runner_whose_cached_copy_is_behind_loses_only_our_finalizers(h: ControllerHarness) -> None:
    # The deletion path drops our finalizers with a patch that tests the list its cached copy shows; here that
    # copy predates another controller's finalizer: the test fails, and the path reads and writes instead.
    await h.start("EphemeralRunnerSet")
    await h.create_ers(replicas=1, patch_id=1)
    (er,) = await h.wait_runners(lambda rs: len(rs) == 1, what="one runner")
    name = name_of(er)
    cached = await h.kube.get(EPHEMERAL_RUNNERS, name, namespace=h.namespace)
    ours = list(cached["metadata"]["finalizers"])
    foreign = "example.com/keep"
    await h.kube.patch(EPHEMERAL_RUNNERS, name, {"metadata": {"finalizers": [*ours, foreign]}}, namespace=h.namespace)
    await h.kube.delete(EPHEMERAL_RUNNERS, name, namespace=h.namespace)
    try:
        await finalize_runner(h.ctx, cached)
        runner = await h.kube.get(EPHEMERAL_RUNNERS, name, namespace=h.namespace)
        assert runner["metadata"]["finalizers"] == [foreign]
    finally:
        await h.kube.patch(EPHEMERAL_RUNNERS, name, {"metadata": {"finalizers": None}}, namespace=h.namespace)


async def test_missing_secret_and_invalid_url_get_a_clear_event_while_other_sets_keep_working(
    h: ControllerHarness,
) -> None:
    await h.start()
    await h.create_ers("no-secret", replicas=1, patch_id=0, secret="does-not-exist")
    await h.create_ers("bad-url", replicas=1, patch_id=0, config_url="not a url")
    await h.create_ers("good", replicas=1, patch_id=0)

    async def reasons() -> set[str] | None:
        items = (await h.kube.list(EVENTS, namespace=h.namespace)).items
        found = {e["reason"] for e in items}
        return found if {"SecretNotFound", "InvalidGitHubConfigURL"} <= found else None

    found = await eventually(reasons, what="SecretNotFound and InvalidGitHubConfigURL events")
    assert found
    runners = await h.wait_runners(
        lambda rs: any(
            r["metadata"]["name"].startswith("good-") and r.get("status", {}).get("phase") == "Running" for r in rs
        ),
        what="the good set's runner running",
    )
    bad = [r for r in runners if r["metadata"]["name"].startswith("no-secret-")]
    assert bad
    assert all(not r.get("status", {}).get("runnerId") for r in bad)
    no_secret = await eventually(
        lambda: _status_reason(h, bad[0]["metadata"]["name"], "SecretNotFound"), what="reason on the runner"
    )
    assert "does-not-exist" in no_secret["status"]["message"]


async def _unregistered(h: ControllerHarness, name: str) -> bool:
    return name not in h.registered()


async def _pod_exists(h: ControllerHarness, name: str) -> bool:
    return any(name_of(p) == name for p in await h.pods())


async def _status_reason(h: ControllerHarness, name: str, reason: str) -> dict[str, Any] | None:
    runner = await h.kube.get(EPHEMERAL_RUNNERS, name, namespace=h.namespace)
    return runner if runner.get("status", {}).get("reason") == reason else None
