"""Pool membership by runner shape, and the placeholder pod: only the shape crosses into the controller namespace."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from arc_scaleset.api.warm_capacity import LABEL_WARM_POOL
from arc_scaleset.controllers.settings import parse_resource_bound
from arc_scaleset.controllers.warmcapacity.placeholder import bound_violations, placeholder_pod
from arc_scaleset.controllers.warmcapacity.shape import ShapeError, runner_shape

PLACEMENT: dict[str, Any] = {
    "nodeSelector": {"arc-scaleset.dev/node-pool": "runners"},
    "tolerations": [{"key": "arc-scaleset.dev/node-pool", "operator": "Equal", "value": "runners"}],
}


def _template(*, cpu: str = "1", memory: str = "2Gi", image: str = "runner:1", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"team": "a"}, "annotations": {"secret-ish": "x"}},
        "spec": {
            "serviceAccountName": "team-a-deployer",
            "volumes": [{"name": "work", "emptyDir": {}}],
            "containers": [
                {
                    "name": "runner",
                    "image": image,
                    "command": ["/home/runner/run.sh"],
                    "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "team-a", "key": "t"}}}],
                    "volumeMounts": [{"name": "work", "mountPath": "/work"}],
                    "securityContext": {"privileged": True},
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
            **PLACEMENT,
            **spec,
        },
    }


def test_scale_sets_with_the_same_runner_shape_share_one_pool_whatever_else_differs() -> None:
    a = _template()
    b = copy.deepcopy(a)
    b["spec"]["containers"][0]["env"] = []
    b["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1000m", "memory": "2048Mi"}
    b["metadata"] = {"labels": {"team": "b"}}
    assert runner_shape(a) == runner_shape(b)
    assert runner_shape(a).pool_id == runner_shape(b).pool_id


@pytest.mark.parametrize(
    "other",
    [
        _template(cpu="2"),
        _template(image="runner:2"),
        _template(nodeSelector={"arc-scaleset.dev/node-pool": "gpu"}),
        _template(tolerations=[]),
        _template(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}),
    ],
)  # fmt: skip
def test_a_different_request_image_or_node_selection_is_another_pool(other: dict[str, Any]) -> None:
    assert runner_shape(other).pool_id != runner_shape(_template()).pool_id


def test_requests_are_what_the_scheduler_reserves_containers_summed_init_containers_at_their_peak() -> None:
    template = _template(
        initContainers=[{"name": "init", "image": "i", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]
    )
    template["spec"]["containers"].append(
        {"name": "dind", "image": "docker:dind", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
    )
    assert runner_shape(template).requests_map() == {"cpu": "3", "memory": str(3 * 2**30)}


def test_pod_affinity_and_spread_constraints_are_no_part_of_the_shape() -> None:
    # They select pods in the runner's namespace: for a placeholder elsewhere they would mean something else.
    template = _template(
        affinity={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
        topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
    )
    assert runner_shape(template) == runner_shape(_template())


@pytest.mark.parametrize(
    "template",
    [
        {"spec": {"containers": [{"name": "not-runner", "image": "x"}]}},
        {"spec": {"containers": [{"name": "runner"}]}},
        _template(cpu="one"),
    ],
)
def test_a_template_without_a_runner_image_or_with_a_bad_request_has_no_shape(template: dict[str, Any]) -> None:
    with pytest.raises(ShapeError):
        runner_shape(template)


def test_the_placeholder_takes_only_the_shape_from_the_template() -> None:
    shape = runner_shape(_template())
    pod = placeholder_pod(name="warm-x-0", namespace="arc-system", shape=shape, priority_class="warm")
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert container["image"] == "runner:1"
    requests = {"cpu": "1", "memory": str(2 * 2**30)}
    assert container["resources"] == {"requests": requests, "limits": requests}
    assert container["command"] == ["sleep", "infinity"]
    assert spec["nodeSelector"] == PLACEMENT["nodeSelector"]
    assert spec["tolerations"] == PLACEMENT["tolerations"]
    assert spec["priorityClassName"] == "warm"
    # Nothing else of the tenant's template: no service account, env, volumes, mounts, privileges, metadata.
    assert "serviceAccountName" not in spec
    assert "volumes" not in spec
    assert set(container) == {"name", "image", "imagePullPolicy", "command", "resources", "securityContext"}
    assert spec["automountServiceAccountToken"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert pod["metadata"]["labels"][LABEL_WARM_POOL] == shape.pool_id
    assert not any(key.startswith("actions.github.com/") for key in pod["metadata"]["labels"])
    assert spec["terminationGracePeriodSeconds"] == 0


def test_an_extended_resource_is_requested_with_its_limit_as_every_resource_is() -> None:
    template = _template()
    template["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    pod = placeholder_pod(name="p", namespace="n", shape=runner_shape(template), priority_class="warm")
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_a_shape_above_the_bound_or_asking_for_an_unnamed_resource_is_refused() -> None:
    bound = parse_resource_bound("cpu=2,memory=4Gi", flag="--warm-placeholder-max-resources")
    assert bound_violations(runner_shape(_template()), bound, flag="--f") == []
    assert bound_violations(runner_shape(_template(cpu="3")), bound, flag="--f") == [
        "requests cpu=3 (above 2 allowed by --f)"
    ]
    template = _template()
    template["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    refused = bound_violations(runner_shape(template), bound, flag="--f")
    assert refused == ["requests nvidia.com/gpu (not allowed by --f)"]


def test_a_placeholder_made_again_after_a_preemption_keeps_off_the_node_it_gave_up() -> None:
    shape = runner_shape(_template())
    pod = placeholder_pod(name="p", namespace="n", shape=shape, priority_class="warm", avoid_node="node-1")
    (term,) = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term == {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-1"]}]}
    assert pod["spec"]["nodeSelector"] == PLACEMENT["nodeSelector"]  # still where the runners may run


def test_the_node_to_keep_off_is_added_to_every_term_of_the_runners_own_node_affinity() -> None:
    zones = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]} for zone in ("a", "b")]
    affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": zones}}
    shape = runner_shape(_template(affinity={"nodeAffinity": affinity}))
    pod = placeholder_pod(name="p", namespace="n", shape=shape, priority_class="warm", avoid_node="node-1")
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert [term["matchExpressions"][0]["values"] for term in terms] == [["a"], ["b"]]
    assert all(term["matchFields"][0]["values"] == ["node-1"] for term in terms)
    plain = placeholder_pod(name="p", namespace="n", shape=shape, priority_class="warm")
    assert plain["spec"]["affinity"]["nodeAffinity"] == affinity
