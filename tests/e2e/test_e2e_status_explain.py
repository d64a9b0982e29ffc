"""``arc-scaleset status`` and ``explain`` (``kubectl arc ...``) on the running system, run as a user runs them:
a separate process with the kubeconfig, reading what the controller, the listener and the scheduler wrote."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.system import System
from tests.e2e.harness import ScaleSetFactory, ScaleSetHandle


async def arc(system: System, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "arc_scaleset.cli", *args, "--kubeconfig", str(system.kubeconfig),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, output.decode()


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
