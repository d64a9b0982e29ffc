"""A shared listener as a user runs it (issue 30): three scale sets of one namespace with one credentials Secret,
annotated ``listener.arc-scaleset.dev/shared``, are served by one listener pod -- one process, started by the lab's
node agent -- each with its own session. One of them loses its credentials (the token may no longer register
runners for its repository): the other two keep scaling and every job runs exactly once. A scale set of another
namespace with an equally named Secret never joins that listener.

The system is the module's own: the controller watches two scale-set namespaces (the shared one watches one).
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.api.listener_group import ANNOTATION_SHARED, LABEL_GROUP, group_object_name
from arc_scaleset.kube import resources
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.harness import scale_sets
from arc_scaleset_lab.harness.cluster import TestCluster
from arc_scaleset_lab.harness.system import ORG, System, SystemOptions
from arc_scaleset_lab.sim.auth import DEFAULT_PAT_SCOPES, SCOPE_ORG
from tests.e2e.harness import ScaleSetHandle, started_system

RUN_ID = uuid.uuid4().hex[:6]
TEAM_A = f"e2e-shared-a-{RUN_ID}"
TEAM_B = f"e2e-shared-b-{RUN_ID}"
SECRET = "github-token"


@pytest.fixture(name="system", scope="module")
async def two_team_system(cluster: TestCluster) -> AsyncIterator[System]:
    """A system whose controller watches two team namespaces, each with a PAT Secret of the same name."""
    workdir = Path(tempfile.mkdtemp(prefix="arc-scaleset-e2e-shared-"))
    options = SystemOptions(
        controller_namespace=f"arc-e2e-shared-{RUN_ID}",
        watch_namespace=TEAM_A,
        long_poll_seconds=2.0,
        session_timeout=10.0,
        controller_args=(f"--watch-single-namespace={TEAM_B}",),  # cached beside --watch-namespace
    )
    try:
        async with started_system(workdir, kubeconfig=cluster.kubeconfig, namespace=TEAM_A, options=options) as system:
            await system.ensure_namespace(TEAM_B, labels={"arc-scaleset.dev/test": "true"})
            for namespace in (TEAM_A, TEAM_B):
                await system.create_pat_secret(namespace, SECRET)
            yield system
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def create_shared(system: System, namespace: str, name: str, *, config_url: str) -> ScaleSetHandle:
    manifest = scale_sets.autoscaling_runner_set(
        name=name,
        namespace=namespace,
        config_url=config_url,
        secret=SECRET,
        min_runners=0,
        max_runners=5,
        template=scale_sets.runner_template(),
    )
    manifest["metadata"]["annotations"] = {ANNOTATION_SHARED: "true"}
    handle = ScaleSetHandle.tracked(system, namespace=namespace, name=name, min_runners=0)
    await system.kube.create(AUTOSCALING_RUNNER_SETS, manifest, namespace=namespace)
    return handle


async def group_of(handle: ScaleSetHandle) -> str:
    async def labelled() -> str | None:
        listener = (await handle.snapshot()).listener_name
        if listener is None:
            return None
        found = await handle.system.kube.get(
            AUTOSCALING_LISTENERS, listener, namespace=handle.system.controller_namespace
        )
        return ObjectView(found).labels.get(LABEL_GROUP) or None

    group: str = await handle.wait_until(labelled, timeout=90, what=f"{handle.name}'s listener in a group")
    return group


async def member_ready_reason(handle: ScaleSetHandle) -> str:
    snapshot = await handle.snapshot()
    if snapshot.listener_name is None:
        return ""
    listener = await handle.system.kube.get(
        AUTOSCALING_LISTENERS, snapshot.listener_name, namespace=handle.system.controller_namespace
    )
    ready = get_condition((listener.get("status") or {}).get("conditions"), "Ready") or {}
    return str(ready.get("reason", ""))


async def test_three_scale_sets_share_one_listener_and_one_losing_its_credentials_stops_neither_other(
    system: System,
) -> None:
    handles: list[ScaleSetHandle] = []
    try:
        a = await create_shared(system, TEAM_A, "shared-a", config_url=system.config_url())
        b = await create_shared(system, TEAM_A, "shared-b", config_url=system.config_url())
        # Its jobs come from a repository: registering runners there needs the token's "repo" scope.
        c = await create_shared(system, TEAM_A, "shared-c", config_url=system.config_url(f"{ORG}/e2e"))
        other = await create_shared(system, TEAM_B, "shared-d", config_url=system.config_url())
        handles = [a, b, c, other]

        # One listener pod, run as one process by the node agent, holds the three sessions.
        group = await group_of(a)
        assert {await group_of(b), await group_of(c)} == {group}
        pod_name = group_object_name(group)
        for handle in (a, b, c):
            await handle.wait(lambda s: s.session_owner == pod_name, timeout=90, what=f"a session held by {pod_name}")
        pod = await system.kube.get(resources.PODS, pod_name, namespace=system.controller_namespace)
        assert (pod.get("status") or {}).get("phase") == "Running"
        assert any(path.name == f"{pod_name}.log" for path in system.log_files()), "the node agent ran its process"

        # Team B's scale set, with a Secret of the same name, is another group with a pod of its own.
        other_group = await group_of(other)
        assert other_group != group
        await other.wait(
            lambda s: s.session_owner == group_object_name(other_group), timeout=90, what="team B's own listener"
        )
        secret = await system.kube.get(resources.SECRETS, pod_name, namespace=system.controller_namespace)
        members = [ListenerConfig.from_json(base64.b64decode(v)) for v in (secret.get("data") or {}).values()]
        assert sorted(m.ephemeral_runner_set_name for m in members) == ["shared-a", "shared-b", "shared-c"]
        assert {m.ephemeral_runner_set_namespace for m in members} == {TEAM_A}

        # shared-c's credentials break: the token keeps its org scope only, and every session must log in again.
        c_id = (await c.snapshot()).scale_set_id
        assert c_id is not None
        await system.sim.add_token(system.pat, scopes=[SCOPE_ORG])
        await system.sim.expire_admin_tokens()
        await system.sim.evict_session(c_id)
        await c.wait_until(
            lambda: _not_ready(c), timeout=90, what="shared-c's listener reporting that it holds no session"
        )

        # The other two keep scaling, in the same process: every job exactly once.
        for handle in (a, b):
            await handle.enqueue(3, duration=2.0)
        for handle in (a, b):
            await handle.assert_every_job_ran_once(timeout=120)
            assert handle.tracker.created >= 1, "the set scaled up for its jobs"
        still = await system.kube.get(resources.PODS, pod_name, namespace=system.controller_namespace)
        assert ObjectView(still).uid == ObjectView(pod).uid, "one member's failure never restarts the listener"
        assert (await c.snapshot()).session_owner is None
    finally:
        await system.sim.add_token(system.pat, scopes=sorted(DEFAULT_PAT_SCOPES))
        for handle in handles:
            await handle.stop_tracking()
            with contextlib.suppress(Exception, pytest.fail.Exception):
                await handle.delete(timeout=60.0)


async def _not_ready(handle: ScaleSetHandle) -> bool:
    return await member_ready_reason(handle) not in ("", "ListenerRunning")
