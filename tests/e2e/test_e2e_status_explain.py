"""``arc-scaleset status`` and ``explain`` (``kubectl arc ...``) on the running system, run as a user runs them:
a separate process with the kubeconfig, reading what the controller, the listener and the scheduler wrote."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.github import ActionsClient, PersonalAccessToken, SystemInfo, parse_config_url
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.system import System
from tests.e2e.harness import ScaleSetFactory, ScaleSetHandle, arc


async def status_json(runners: ScaleSetHandle) -> dict[str, Any]:
    code, output = await arc(runners.system, "status", runners.name, "-n", runners.namespace, "-o", "json")
    assert code == 0, output
    doc: dict[str, Any] = json.loads(output)
    return doc


async def explain_lines(runners: ScaleSetHandle) -> list[str]:
    code, output = await arc(runners.system, "explain", runners.name, "-n", runners.namespace, "-o", "json")
    assert code == 0, output
    return [finding["line"] for finding in json.loads(output)["findings"]]


async def test_status_shows_the_scale_sets_numbers_after_a_scale_up_and_explain_says_it_is_at_max(
    system: System, scale_set: ScaleSetFactory
) -> None:
    runners = await scale_set.create(min_runners=0, max_runners=2)
    await runners.wait(lambda s: s.session_owner, timeout=60, what="a listener session")
    await runners.enqueue(4, duration=30.0)
    seen = await runners.wait(lambda s: s.busy == 2, timeout=60, what="2 busy runners (the maximum)")

    doc = await status_json(runners)
    assert doc["github"]["scaleSetId"] == seen.scale_set_id
    assert doc["github"]["runnersPage"].endswith("/settings/actions/runners")
    assert (doc["minRunners"], doc["maxRunners"], doc["desiredRunners"]) == (0, 2, 2)
    assert doc["runners"]["busy"] == 2
    assert doc["runners"]["byPhase"] == {"Running": 2}
    assert doc["runners"]["byRevision"] == {str(seen.desired_revision): 2}
    assert doc["runnerSet"]["patchId"] >= seen.patch_id > 0
    assert doc["listener"]["session"] == "Polling"
    assert doc["listener"]["podPhase"] == "Running"
    assert doc["events"], "the controller's Events are shown"

    async def at_max() -> list[str]:
        return [line for line in await explain_lines(runners) if line.startswith("scale set at maxRunners (2)")]

    (line,) = await runners.wait_until(at_max, timeout=30, what="explain to say the set is at maxRunners")
    assert "all 2 runners busy" in line

    code, text = await arc(system, "status", runners.name, "-n", runners.namespace)
    assert code == 0, text
    assert text.startswith(f"AutoscalingRunnerSet {runners.namespace}/{runners.name}: Running")
    assert "min 0, max 2, desired 2" in text
    print(text)  # shown with -s: the README's sample
    print((await arc(system, "explain", runners.name, "-n", runners.namespace))[1])


async def test_explain_finds_a_runner_whose_pod_no_node_can_take(system: System, scale_set: ScaleSetFactory) -> None:
    runners = await scale_set.create(min_runners=1, max_runners=3)
    await runners.wait_ready()
    template = scale_sets.runner_template(env={scale_sets.TEMPLATE_REVISION_ENV: "unschedulable"})
    template["spec"]["nodeSelector"] = {"arc-scaleset.dev/no-such-node": "true"}
    await system.kube.patch(
        AUTOSCALING_RUNNER_SETS, runners.name, {"spec": {"template": template}}, namespace=runners.namespace
    )

    async def unschedulable() -> list[str]:
        return [line for line in await explain_lines(runners) if "pod unschedulable" in line]

    (line,) = await runners.wait_until(unschedulable, timeout=90, what="explain to find the unschedulable runner")
    assert line.startswith("1 runner Pending for ")
    assert "node(s) didn't match Pod's node affinity/selector" in line

    code, text = await arc(system, "explain", runners.name, "-n", runners.namespace)
    assert code == 0, text
    assert "pod unschedulable" in text
    print(text)


@contextlib.asynccontextmanager
async def session_held_by_another_listener(runners: ScaleSetHandle, scale_set_id: int) -> AsyncIterator[None]:
    """The service drops the listener's session and another owner (an old controller's listener, say) takes the
    scale set and keeps its session alive, until the block ends and it lets go (deletes its session)."""
    system = runners.system
    intruder = ActionsClient(
        parse_config_url(system.config_url()),
        PersonalAccessToken(system.pat),
        system_info=SystemInfo(subsystem="e2e-intruder"),
    )
    async with intruder:
        await system.sim.evict_session(scale_set_id)
        session = await intruder.create_message_session(scale_set_id, "old-controller-listener")

        async def poll_like_a_listener() -> None:
            # An unpolled session lapses after the e2e sim's session timeout (10 s); a listener keeps its session
            # by long-polling it, and a poll in flight never lapses.
            last_message_id = 0
            while True:
                message = await intruder.get_message(session, last_message_id, max_capacity=2)
                if message is not None:
                    last_message_id = message.message_id

        keeping = asyncio.create_task(poll_like_a_listener(), name="intruder-polls")
        try:
            yield
        finally:
            keeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeping
            await intruder.delete_message_session(scale_set_id, session.session_id)


async def test_explain_says_the_listener_is_kept_out_by_a_session_another_listener_holds(
    system: System, scale_set: ScaleSetFactory
) -> None:
    runners = await scale_set.create(min_runners=0, max_runners=2)
    seen = await runners.wait(lambda s: s.session_owner, timeout=60, what="a listener session")
    assert seen.scale_set_id is not None

    async def held_session() -> list[str]:
        return [line for line in await explain_lines(runners) if line.startswith("listener has held no session")]

    async with session_held_by_another_listener(runners, seen.scale_set_id):
        (line,) = await runners.wait_until(held_session, timeout=60, what="explain to find the held session")
        assert line.endswith(
            ": GitHub answered 409 (session held by another listener; an old controller may still run)"
        ), line
        # The scale set's Degraded=True ListenerOffline says the same outage: explain says it once, with its cause.
        assert not [line for line in await explain_lines(runners) if "ListenerOffline" in line]
        doc = await status_json(runners)
        assert (doc["listener"]["session"], doc["listener"]["lastError"]) == ("WaitingForSession", "SessionConflict")
        assert doc["listener"]["pollingSince"] is None, "a listener without a session is not polling"
        code, text = await arc(system, "explain", runners.name, "-n", runners.namespace)
        assert code == 0, text
        print(text)

    async def healthy_again() -> list[str]:
        return [line for line in await explain_lines(runners) if line.startswith("no problem found")]

    # The listener's session retries back off up to 2 minutes (plus jitter) while the session is held.
    await runners.wait_until(healthy_again, timeout=150, what="explain to find nothing wrong once the session is free")
    doc = await status_json(runners)
    assert doc["listener"]["session"] == "Polling"
    assert doc["listener"]["pollingSince"] == doc["listener"]["since"]


async def test_explain_names_the_jobs_of_old_revision_runners_while_a_template_change_rolls_out(
    system: System, scale_set: ScaleSetFactory
) -> None:
    runners = await scale_set.create(min_runners=0, max_runners=3)
    await runners.wait(lambda s: s.session_owner, timeout=60, what="a listener session")
    jobs = await runners.enqueue(2, duration=45.0)
    before = await runners.wait(lambda s: s.busy == 2, timeout=60, what="2 runners busy on long jobs")
    old_revision = before.desired_revision

    await runners.change_template()

    async def rolling() -> list[str]:
        return [line for line in await explain_lines(runners) if line.startswith(f"revision {old_revision + 1} ")]

    async def applied_with_busy_old_runners() -> list[str]:
        return [line for line in await rolling() if line.startswith(f"revision {old_revision + 1} applied;")]

    # The controller removes the old revision's idle runners and marks the revision applied within a pass or two;
    # the busy ones keep running their jobs on the old template, and explain names those jobs.
    (line,) = await runners.wait_until(
        applied_with_busy_old_runners, timeout=60, what="explain to name the old revision's busy runners"
    )
    job_list = ", ".join(sorted(str(job) for job in jobs))
    assert line == (
        f"revision {old_revision + 1} applied; 2 busy runners of revision {old_revision} are finishing jobs {job_list}"
    )
    doc = await status_json(runners)
    assert doc["runnerSet"]["desiredRevision"] == doc["runnerSet"]["appliedRevision"] == old_revision + 1
    assert doc["runners"]["byRevision"].get(str(old_revision)) == 2
    code, text = await arc(system, "explain", runners.name, "-n", runners.namespace)
    assert code == 0, text
    print(text)

    await runners.assert_every_job_ran_once(timeout=120)
    await runners.wait_until(lambda: _no_rollout(runners), timeout=60, what="explain to drop the rollout line")


async def _no_rollout(runners: ScaleSetHandle) -> bool:
    return not any(line.startswith("revision ") for line in await explain_lines(runners))
