"""The standby listener, the controller's pure parts: the pair's pods, Lease and Role, which pod is active and what
``Ready`` says (controllers/autoscalinglistener/standby.py), and the scale set's annotation reaching its listener."""

from __future__ import annotations

from typing import Any

from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.api.listener_group import ANNOTATION_SHARED
from arc_scaleset.api.listener_standby import ANNOTATION_STANDBY, PEER_POD_ENV, STANDBY_LEASE_ENV
from arc_scaleset.controllers.autoscalinglistener.pod import desired_listener_pod, per_set_identity
from arc_scaleset.controllers.autoscalinglistener.pod_plan import PodAction, PodStep
from arc_scaleset.controllers.autoscalinglistener.restart import RestartBackoff
from arc_scaleset.controllers.autoscalinglistener.scope import ListenerMemory
from arc_scaleset.controllers.autoscalinglistener.standby import (
    REASON_NO_ACTIVE_LISTENER,
    StandbyPair,
    active_pod,
    desired_lease,
    desired_standby_role,
    desired_standby_role_binding,
    one_recreation_at_a_time,
    pair_identities,
    pair_readiness,
)
from arc_scaleset.controllers.autoscalinglistener.status import PodReadiness, running_readiness
from arc_scaleset.controllers.autoscalingrunnerset.decisions import listener_differences
from arc_scaleset.controllers.autoscalingrunnerset.desired import desired_autoscaling_listener
from tests.unit.controllers.ars_factory import ars_object
from tests.unit.controllers.listener_factory import listener_object, parsed_listener

NAME = "arc-runners-abc12345-listener"
PAIR = (NAME, f"{NAME}-standby")


def pair_pods() -> list[dict[str, Any]]:
    obj = listener_object()
    listener = parsed_listener(obj)
    identity = per_set_identity(obj, listener, config_resource_version="100")
    return [
        desired_listener_pod(obj, listener, command=("listener",), metrics_port=8080, config_resource_version="100",
                             identity=each)
        for each in pair_identities(identity)
    ]  # fmt: skip


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {env["name"]: env.get("value", "") for env in pod["spec"]["containers"][0]["env"]}


def test_the_pair_are_the_listener_pod_renamed_each_told_the_lease_and_its_peer() -> None:
    first, second = pair_pods()
    obj = listener_object()
    alone = desired_listener_pod(obj, parsed_listener(obj), command=("listener",), metrics_port=8080,
                                 config_resource_version="100")  # fmt: skip
    assert [first["metadata"]["name"], second["metadata"]["name"]] == list(PAIR)
    assert env_of(first)[STANDBY_LEASE_ENV] == env_of(second)[STANDBY_LEASE_ENV] == NAME
    assert (env_of(first)[PEER_POD_ENV], env_of(second)[PEER_POD_ENV]) == (PAIR[1], PAIR[0])
    for pod in (first, second):
        assert {k: v for k, v in env_of(pod).items() if k not in (STANDBY_LEASE_ENV, PEER_POD_ENV)} == env_of(alone)
        pod["metadata"]["name"] = alone["metadata"]["name"]
        pod["spec"]["containers"][0]["env"] = alone["spec"]["containers"][0]["env"]
        assert pod == alone


def test_the_lease_has_no_holder_and_is_owned_by_the_listener() -> None:
    obj = listener_object()
    lease = desired_lease(obj, parsed_listener(obj))
    assert lease["apiVersion"] == "coordination.k8s.io/v1"
    assert (lease["metadata"]["name"], lease["metadata"]["namespace"]) == (NAME, "arc-system")
    assert lease["spec"] == {"leaseDurationSeconds": 10}
    assert [ref["uid"] for ref in lease["metadata"]["ownerReferences"]] == ["al-uid"]


def test_the_role_grants_the_lease_and_the_two_pods_by_name_and_nothing_else() -> None:
    obj = listener_object()
    listener = parsed_listener(obj)
    role, binding = desired_standby_role(obj, listener), desired_standby_role_binding(obj, listener)
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "arc-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [NAME],
         "verbs": ["get", "watch", "update"]},
        {"apiGroups": [""], "resources": ["pods"], "resourceNames": list(PAIR), "verbs": ["get", "list", "watch"]},
    ]  # fmt: skip
    assert binding["roleRef"]["name"] == role["metadata"]["name"] == f"{NAME}-standby"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": "arc-system"}]


def test_the_active_pod_is_the_lease_holder_when_it_is_one_of_the_pair() -> None:
    assert active_pod({"spec": {"holderIdentity": PAIR[1]}}, PAIR) == PAIR[1]
    assert active_pod({"spec": {}}, PAIR) is None
    assert active_pod({"spec": {"holderIdentity": "someone-else"}}, PAIR) is None
    assert active_pod(None, PAIR) is None


def test_ready_is_the_active_pods_and_says_how_the_standby_fares() -> None:
    pending = PodReadiness(False, "PodPending", f"listener pod {PAIR[0]} is not running yet (Pending)")
    found = {PAIR[0]: pending, PAIR[1]: running_readiness(PAIR[1])}
    ready = pair_readiness(StandbyPair(NAME, PAIR, active=PAIR[1]), found)
    assert (ready.ready, ready.runs, ready.reason) == (True, True, "ListenerRunning")
    assert f"holds Lease {NAME}" in ready.message
    assert f"standby pod {PAIR[0]} is not ready: listener pod {PAIR[0]} is not running yet" in ready.message
    both = pair_readiness(StandbyPair(NAME, PAIR, active=PAIR[0]), {PAIR[0]: running_readiness(PAIR[0]),
                                                                     PAIR[1]: running_readiness(PAIR[1])})  # fmt: skip
    assert both.ready
    assert both.message.endswith(f"standby pod {PAIR[1]} is ready")


def test_with_no_holder_the_listener_is_not_ready() -> None:
    found = {name: running_readiness(name) for name in PAIR}
    ready = pair_readiness(StandbyPair(NAME, PAIR, active=None), found)
    assert (ready.ready, ready.reason, ready.runs) == (False, REASON_NO_ACTIVE_LISTENER, True)


def test_each_pod_of_the_pair_has_its_own_backoff_and_the_status_reports_the_worse() -> None:
    memory = ListenerMemory(RestartBackoff(base=1.0, cap=60.0))
    assert memory.pod_restarts(second=False) is memory.restarts
    second = memory.pod_restarts(second=True)
    assert second is not memory.restarts
    assert second is memory.pod_restarts(second=True)
    second.record_failure(pod_uid="a", now=0.0)
    second.record_failure(pod_uid="b", now=0.0)
    memory.restarts.record_failure(pod_uid="c", now=0.0)
    state = memory.restart_state(now=0.0)
    assert state is not None
    assert state.failures == 2


def listener_of(**annotations: str) -> dict[str, Any]:
    ars = AutoscalingRunnerSet.from_object(ars_object(annotations=annotations))
    return desired_autoscaling_listener(ars, namespace="arc-system", scale_set_id=7, ephemeral_runner_set="arc-runners",
                                        image="img:1", url_labels={})  # fmt: skip


def test_the_scale_sets_annotation_reaches_its_listener_unless_it_shares_one() -> None:
    assert listener_of(**{ANNOTATION_STANDBY: "true"})["metadata"]["annotations"][ANNOTATION_STANDBY] == "true"
    assert ANNOTATION_STANDBY not in listener_of()["metadata"]["annotations"]
    assert ANNOTATION_STANDBY not in listener_of(**{ANNOTATION_STANDBY: "false"})["metadata"]["annotations"]
    shared = listener_of(**{ANNOTATION_STANDBY: "true", ANNOTATION_SHARED: "true"})
    assert ANNOTATION_STANDBY not in shared["metadata"]["annotations"]


def test_turning_the_standby_on_or_off_is_a_listener_difference() -> None:
    standby, alone = listener_of(**{ANNOTATION_STANDBY: "true"}), listener_of()
    assert listener_differences(alone, standby) == ("metadata.annotations",)
    assert listener_differences(standby, alone) == (f"metadata.annotations[{ANNOTATION_STANDBY}]",)
    assert listener_differences(standby, standby) == ()


RECREATE = PodStep(PodAction.RECREATE, why="the pod spec changed")
KEEP = PodStep(PodAction.KEEP, running=True)


def staggered(steps: dict[str, PodStep], running: dict[str, bool], active: str | None) -> dict[str, PodAction]:
    plan = one_recreation_at_a_time(steps, running, StandbyPair(NAME, PAIR, active=active))
    return {name: step.action for name, step in plan.items()}


def test_of_two_pods_to_recreate_the_standby_goes_first_and_the_holder_waits() -> None:
    both = {PAIR[0]: RECREATE, PAIR[1]: RECREATE}
    up = {PAIR[0]: True, PAIR[1]: True}
    assert staggered(both, up, active=PAIR[0]) == {PAIR[0]: PodAction.WAIT_PEER, PAIR[1]: PodAction.RECREATE}
    assert staggered(both, up, active=PAIR[1]) == {PAIR[0]: PodAction.RECREATE, PAIR[1]: PodAction.WAIT_PEER}


def test_a_pod_is_recreated_only_while_its_peer_runs() -> None:
    starting = PodStep(PodAction.KEEP, running=False)
    waiting = staggered({PAIR[0]: RECREATE, PAIR[1]: starting}, {PAIR[0]: True, PAIR[1]: False}, active=PAIR[0])
    assert waiting == {PAIR[0]: PodAction.WAIT_PEER, PAIR[1]: PodAction.KEEP}
    gone = PodStep(PodAction.WAIT_TERMINATING)
    assert (
        staggered({PAIR[0]: RECREATE, PAIR[1]: gone}, {PAIR[0]: True, PAIR[1]: False}, active=PAIR[0])[PAIR[0]]
        is PodAction.WAIT_PEER
    )
    assert staggered({PAIR[0]: RECREATE, PAIR[1]: KEEP}, {PAIR[0]: True, PAIR[1]: True}, active=PAIR[0]) == {
        PAIR[0]: PodAction.RECREATE,
        PAIR[1]: PodAction.KEEP,
    }


def test_pods_that_do_not_run_are_recreated_at_once_never_waiting_for_each_other() -> None:
    down = {PAIR[0]: False, PAIR[1]: False}
    both = staggered({PAIR[0]: RECREATE, PAIR[1]: RECREATE}, down, active=None)
    assert both == {PAIR[0]: PodAction.RECREATE, PAIR[1]: PodAction.RECREATE}
    plan = one_recreation_at_a_time(
        {PAIR[0]: RECREATE, PAIR[1]: RECREATE}, {PAIR[0]: True, PAIR[1]: True}, StandbyPair(NAME, PAIR, PAIR[0])
    )
    assert plan[PAIR[0]].running
    assert f"waiting for its peer {PAIR[1]} to run first" in plan[PAIR[0]].why
