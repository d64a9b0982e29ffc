"""The generated CRDs on the real API server: installation, round trips, validation, pruning, printer columns,
and server-side apply over an older version of themselves."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.api.constants import (
    AUTOSCALING_LISTENERS,
    AUTOSCALING_RUNNER_SETS,
    EPHEMERAL_RUNNER_SETS,
    EPHEMERAL_RUNNERS,
)
from arc_scaleset.api.crd.compat import breaking_changes
from arc_scaleset.api.crd.generate import PRINTER_COLUMNS, custom_resource_definition, custom_resource_definitions
from arc_scaleset.api.ephemeralrunner import EphemeralRunner
from arc_scaleset.api.examples import example_autoscaling_runner_set
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset.kube.errors import BadRequest, Invalid, NotFound
from arc_scaleset.kube.resources import Resource
from arc_scaleset_lab.harness.waiting import eventually

pytestmark = pytest.mark.cluster

FIELD_MANAGER = "arc-scaleset-api-tests"
# What etcd stores at most per object (its default --max-request-bytes).
ETCD_OBJECT_LIMIT = int(1.5 * 1024 * 1024)


def ars_manifest(namespace: str, **spec: Any) -> dict[str, Any]:
    manifest = example_autoscaling_runner_set(name="arc-runners", namespace=namespace)
    manifest["spec"].update(spec)
    return manifest


async def test_the_four_crds_install_and_become_established(kube: KubeClient, crds_installed: list[str]) -> None:
    expected = {crd["metadata"]["name"] for crd in custom_resource_definitions()}
    assert expected <= set(crds_installed)
    for name in expected:
        stored = await kube.get(resources.CUSTOM_RESOURCE_DEFINITIONS, name)
        conditions = {c["type"]: c["status"] for c in stored["status"]["conditions"]}
        assert conditions["Established"] == "True"
        assert conditions["NamesAccepted"] == "True"
        assert conditions.get("NonStructuralSchema") is None
        # Stored object, managedFields included, well inside etcd's per-object limit.
        assert len(json.dumps(stored)) < ETCD_OBJECT_LIMIT / 2


async def test_the_stored_schema_is_the_generated_one(kube: KubeClient, crds_installed: list[str]) -> None:
    for crd in custom_resource_definitions():
        stored = await kube.get(resources.CUSTOM_RESOURCE_DEFINITIONS, crd["metadata"]["name"])
        assert stored["spec"]["versions"] == crd["spec"]["versions"]


async def test_a_realistic_scale_set_round_trips_through_the_api_server_and_the_models(
    kube: KubeClient, namespace: str, crds_installed: list[str]
) -> None:
    manifest = ars_manifest(namespace)
    created = await kube.create(AUTOSCALING_RUNNER_SETS, manifest)
    read = await kube.get(AUTOSCALING_RUNNER_SETS, "arc-runners", namespace=namespace)
    assert read["spec"] == manifest["spec"] == created["spec"]
    assert read["metadata"]["labels"] == manifest["metadata"]["labels"]
    assert read["metadata"]["annotations"] == manifest["metadata"]["annotations"]
    assert [c.get("env") for c in read["spec"]["template"]["spec"]["containers"]][1] == []
    # Through the models: every field the server wrote (managedFields, uid, timestamps) survives.
    assert AutoscalingRunnerSet.from_object(read).to_json() == read


async def test_a_model_written_object_is_read_back_unchanged(
    kube: KubeClient, namespace: str, crds_installed: list[str]
) -> None:
    ars = AutoscalingRunnerSet.from_object(ars_manifest(namespace))
    created = await kube.create(AUTOSCALING_RUNNER_SETS, ars.to_json())
    assert AutoscalingRunnerSet.from_object(created).spec == ars.spec


def _spec_edit(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def edit(manifest: dict[str, Any]) -> None:
        manifest["spec"].update(fields)

    return edit


def _min_alone(value: int) -> Callable[[dict[str, Any]], None]:
    def edit(manifest: dict[str, Any]) -> None:
        manifest["spec"].pop("maxRunners", None)
        manifest["spec"]["minRunners"] = value

    return edit


def _first_container(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def edit(manifest: dict[str, Any]) -> None:
        container = manifest["spec"]["template"]["spec"]["containers"][0]
        container.update(fields)
        for key in [key for key, value in fields.items() if value is None]:
            del container[key]

    return edit


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(
            _spec_edit(minRunners=5, maxRunners=2),
            "minRunners must not be greater than maxRunners",
            id="min-above-max",
        ),
        pytest.param(
            _spec_edit(maxRunners=-1),
            "spec.maxRunners: Invalid value: -1: spec.maxRunners in body should be greater than or equal to 0",
            id="negative-max",
        ),
        pytest.param(
            _spec_edit(maxRunners=2**31),
            "spec.maxRunners in body should be less than or equal to 2147483647",
            id="max-above-what-the-listener-can-hold",
        ),
        pytest.param(
            _min_alone(2**31),
            "spec.minRunners in body should be less than or equal to 2147483647",
            id="min-above-what-the-listener-can-hold",
        ),
        pytest.param(
            _spec_edit(maxRunners="ten"),
            'spec.maxRunners: Invalid value: "string": spec.maxRunners in body must be of type integer',
            id="unknown-type-in-a-known-field",
        ),
        pytest.param(
            _first_container(name=None),
            "spec.template.spec.containers[0].name: Required value",
            id="container-without-a-name",
        ),
        pytest.param(
            _first_container(resources={"requests": {"cpu": "lots"}}),
            "spec.template.spec.containers[0].resources.requests.cpu",
            id="bad-quantity",
        ),
        pytest.param(
            _spec_edit(githubConfigUrl=""),
            "githubConfigUrl must not be empty: set it to the URL of the enterprise, organization or repository",
            id="empty-config-url",
        ),
        pytest.param(
            _spec_edit(githubConfigSecret=""),
            "githubConfigSecret must not be empty",
            id="empty-config-secret",
        ),
    ],
)
async def test_invalid_scale_sets_are_rejected_with_a_clear_message(
    kube: KubeClient,
    namespace: str,
    crds_installed: list[str],
    edit: Callable[[dict[str, Any]], None],
    expected: str,
) -> None:
    manifest = ars_manifest(namespace)
    edit(manifest)
    with pytest.raises(Invalid) as rejected:
        await kube.create(AUTOSCALING_RUNNER_SETS, manifest)
    assert expected in rejected.value.message


async def test_a_scale_set_without_a_config_secret_is_rejected(
    kube: KubeClient, namespace: str, crds_installed: list[str]
) -> None:
    manifest = ars_manifest(namespace)
    del manifest["spec"]["githubConfigSecret"]
    with pytest.raises(Invalid, match=r"spec.githubConfigSecret: Required value"):
        await kube.create(AUTOSCALING_RUNNER_SETS, manifest)


async def test_min_equal_to_max_and_either_alone_are_accepted(
    kube: KubeClient, namespace: str, crds_installed: list[str]
) -> None:
    for name, bounds in (("equal", {"minRunners": 3, "maxRunners": 3}), ("min-only", {"minRunners": 50})):
        manifest = ars_manifest(namespace)
        manifest["metadata"]["name"] = name
        manifest["spec"].pop("maxRunners")
        manifest["spec"].update(bounds)
        await kube.create(AUTOSCALING_RUNNER_SETS, manifest)


async def test_the_quantity_check_accepts_what_pods_accept(
    kube: KubeClient, namespace: str, crds_installed: list[str]
) -> None:
    manifest = ars_manifest(namespace)
    manifest["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "0.5", "memory": "1.5Gi", "ephemeral-storage": "1e9"},
        "limits": {"cpu": 4, "memory": "2G"},
    }
    created = await kube.create(AUTOSCALING_RUNNER_SETS, manifest)
    assert created["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == 4


QUANTITIES = ["500m", "1Gi", "1", "0.5", "1.", ".5", "+1", "1e3", "1E-3", "1e+3", "2Ki", "100n", "3u", "1Ei", "1P"]
NOT_QUANTITIES = ["lots", "1GB", "1gi", "1K", "1 Gi", "1.2.3", "1e", "1e1.5", "1Ki1", "--1", "0x10"]


@pytest.mark.parametrize("value", QUANTITIES + NOT_QUANTITIES)
async def test_the_crd_accepts_a_quantity_exactly_when_the_pod_api_does(
    kube: KubeClient, namespace: str, crds_installed: list[str], value: str
) -> None:
    async def accepted(path: str, obj: dict[str, Any]) -> bool:
        try:
            await kube.request_raw("POST", path, body=obj, params={"dryRun": "All"})
        except (Invalid, BadRequest):  # the Pod API fails to decode a bad quantity (400) before validating (422)
            return False
        return True

    container = {"name": "runner", "image": "runner", "resources": {"limits": {"cpu": value}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [container]}}
    manifest = ars_manifest(namespace)
    manifest["spec"]["template"]["spec"]["containers"] = [container]
    pod_accepted = await accepted(f"/api/v1/namespaces/{namespace}/pods", pod)
    crd_accepted = await accepted(AUTOSCALING_RUNNER_SETS.path(namespace=namespace), manifest)
    assert pod_accepted is (value in QUANTITIES)
    assert crd_accepted is pod_accepted


async def test_unknown_fields_outside_the_templates_are_pruned(
    kube: KubeClient, namespace: str, crds_installed: list[str]
) -> None:
    manifest = ars_manifest(namespace)
    manifest["topLevelJunk"] = True
    manifest["spec"]["notAField"] = "x"
    manifest["spec"]["proxy"]["http"]["password"] = "should-not-be-stored"
    manifest["spec"]["listenerMetrics"]["counters"]["gha_started_jobs_total"]["extra"] = [1]
    manifest["status"] = {"phase": "Running", "bogus": 1}
    created = await kube.create(AUTOSCALING_RUNNER_SETS, manifest)
    read = await kube.get(AUTOSCALING_RUNNER_SETS, "arc-runners", namespace=namespace)
    for obj in (created, read):
        assert "topLevelJunk" not in obj
        assert "notAField" not in obj["spec"]
        assert obj["spec"]["proxy"]["http"] == {
            "url": "http://proxy.internal:3128",
            "credentialSecretRef": "proxy-credentials",
        }
        assert obj["spec"]["listenerMetrics"]["counters"]["gha_started_jobs_total"] == {
            "labels": ["repository", "organization"]
        }
        assert "status" not in obj  # status is written only through the status subresource


async def test_status_is_written_through_the_subresource_and_pruned_there_too(
    kube: KubeClient, namespace: str, crds_installed: list[str]
) -> None:
    await kube.create(AUTOSCALING_RUNNER_SETS, ars_manifest(namespace))
    patched = await kube.patch(
        AUTOSCALING_RUNNER_SETS,
        "arc-runners",
        {"status": {"phase": "Running", "observedGeneration": 1, "unknown": "x"}},
        namespace=namespace,
        subresource="status",
    )
    assert patched["status"] == {"phase": "Running", "observedGeneration": 1}


# --- printer columns ------------------------------------------------------------------------------------


def evaluate(obj: dict[str, Any], json_path: str) -> Any:
    """A printer column's simple ``.a.b.c`` JSONPath against an object (None when a step is missing)."""
    value: Any = obj
    for step in json_path.lstrip(".").split("."):
        if not isinstance(value, dict) or step not in value:
            return None
        value = value[step]
    return value


RUNNER_SPEC = {
    "githubConfigUrl": "https://github.com/my-org",
    "githubConfigSecret": "creds",
    "runnerScaleSetId": 7,
    "metadata": {"labels": {"a": "b"}},
    "spec": {"containers": [{"name": "runner", "image": "ghcr.io/actions/actions-runner:2.330.0"}]},
}


def _set_counts() -> dict[str, int]:
    return {
        "currentReplicas": 3,
        "pendingEphemeralRunners": 1,
        "runningEphemeralRunners": 2,
        "failedEphemeralRunners": 0,
        "finishedEphemeralRunners": 1,
        "deletingEphemeralRunners": 0,
    }


def _ars_counts() -> dict[str, int]:
    counts = _set_counts()
    return {"currentRunners": counts.pop("currentReplicas"), **counts}


def _objects(namespace: str) -> list[tuple[Resource, dict[str, Any], dict[str, Any]]]:
    """(resource, object, status) for one object of each kind, with every printed field set."""
    ars = ars_manifest(namespace)
    ars["metadata"]["annotations"]["runner-scale-set-id"] = "7"
    return [
        (AUTOSCALING_RUNNER_SETS, ars, {"phase": "Running", "observedGeneration": 1, **_ars_counts()}),
        (
            EPHEMERAL_RUNNER_SETS,
            {
                "metadata": {"name": "arc-runners", "namespace": namespace},
                "spec": {"replicas": 3, "patchID": 12, "actionableRevision": 2, "ephemeralRunnerSpec": RUNNER_SPEC},
            },
            {"phase": "Running", "appliedActionableRevision": 2, "finishedRunnerCleanupPatchID": 11, **_set_counts()},
        ),
        (
            EPHEMERAL_RUNNERS,
            {"metadata": {"name": "arc-runners-runner-x7k2p", "namespace": namespace}, "spec": RUNNER_SPEC},
            {
                "phase": "Running",
                "ready": True,
                "runnerId": 4711,
                "runnerName": "arc-runners-runner-x7k2p",
                "jobId": "job-1",
                "jobRequestId": 456,
                "jobRepositoryName": "my-org/my-repo",
                "jobWorkflowRef": "my-org/my-repo/.github/workflows/ci.yml@refs/heads/main",
                "workflowRunId": 123,
                "jobDisplayName": "build",
                "message": "Runner is running",
            },
        ),
        (
            AUTOSCALING_LISTENERS,
            {
                "metadata": {"name": "arc-runners-56b4bcfc-listener", "namespace": namespace},
                "spec": {
                    "githubConfigUrl": "https://github.com/my-org",
                    "githubConfigSecret": "creds",
                    "runnerScaleSetId": 7,
                    "autoscalingRunnerSetNamespace": namespace,
                    "autoscalingRunnerSetName": "arc-runners",
                    "ephemeralRunnerSetName": "arc-runners",
                    "minRunners": 1,
                    "maxRunners": 20,
                    "image": "ghcr.io/example/arc-scaleset:0.1.0",
                },
            },
            {},
        ),
    ]


async def test_every_printer_column_shows_a_value_for_a_real_object(
    kube: KubeClient, namespace: str, crds_installed: list[str]
) -> None:
    kinds = {model.RESOURCE.kind: model for model in PRINTER_COLUMNS}
    for resource, obj, status in _objects(namespace):
        await kube.create(resource, obj)
        if status:
            await kube.patch(
                resource, obj["metadata"]["name"], {"status": status}, namespace=namespace, subresource="status"
            )
        read = await kube.get(resource, obj["metadata"]["name"], namespace=namespace)
        for column in PRINTER_COLUMNS[kinds[resource.kind]]:
            value = evaluate(read, column.json_path)
            assert value is not None, f"{resource.kind} column {column.name!r} ({column.json_path}) is empty"
            if column.type in ("integer", "number"):
                assert isinstance(value, int), column.name


async def test_a_runner_read_back_satisfies_the_model_helpers(
    kube: KubeClient, namespace: str, crds_installed: list[str]
) -> None:
    obj = {"metadata": {"name": "r", "namespace": namespace}, "spec": RUNNER_SPEC}
    await kube.create(EPHEMERAL_RUNNERS, obj)
    patched = await kube.patch(
        EPHEMERAL_RUNNERS,
        "r",
        {"status": {"phase": "Failed", "jobId": "j", "failures": {"uid-1": "2026-07-01T10:00:00Z"}}},
        namespace=namespace,
        subresource="status",
    )
    runner = EphemeralRunner.from_object(patched)
    assert runner.is_done
    assert runner.has_job
    assert runner.last_failure is not None
    assert runner.to_json() == patched


# --- upgrades -------------------------------------------------------------------------------------------


def _renamed(crd: dict[str, Any], group: str) -> dict[str, Any]:
    """``crd`` in another API group, so the test can upgrade it without touching the shared CRDs."""
    renamed = copy.deepcopy(crd)
    renamed["spec"]["group"] = group
    renamed["metadata"]["name"] = f"{renamed['spec']['names']['plural']}.{group}"
    return renamed


async def _established(kube: KubeClient, name: str) -> bool:
    try:
        crd = await kube.get(resources.CUSTOM_RESOURCE_DEFINITIONS, name)
    except NotFound:
        return False
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


@pytest.mark.parametrize("older_installed_by", ["server-side apply", "create"])
async def test_crds_apply_server_side_over_an_older_version_of_themselves(
    kube: KubeClient, namespace: str, older_installed_by: str
) -> None:
    """The older version is installed as this project installs it (server-side apply, same field manager) or as
    Helm installs CRDs from a chart's crds/ directory (a plain create); the new one is applied server-side,
    forcing ownership in the second case (as `kubectl apply --server-side --force-conflicts` does)."""
    group = f"{namespace}.upgrade.arc-scaleset.test"
    current = _renamed(custom_resource_definition(AutoscalingRunnerSet), group)
    older = copy.deepcopy(current)
    older_spec = older["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    del older_spec["properties"]["runnerGroup"]  # a field the new version adds
    older_spec["properties"]["legacyField"] = {"type": "string"}  # a field the new version drops
    older["spec"]["versions"][0]["additionalPrinterColumns"].pop(0)
    assert breaking_changes(older, current) == ["v1alpha1: .spec.legacyField: field removed"]

    name = current["metadata"]["name"]
    resource = Resource(group, "v1alpha1", "autoscalingrunnersets", "AutoscalingRunnerSet")
    crd_resource = resources.CUSTOM_RESOURCE_DEFINITIONS
    try:
        if older_installed_by == "create":
            await kube.create(crd_resource, older)
        else:
            await kube.patch(crd_resource, name, older, patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER)
        await eventually(lambda: _established(kube, name), timeout=30, what=f"{name} Established")
        stored_object = ars_manifest(namespace, legacyField="kept-by-the-old-schema", runnerGroup="pruned-by-old")
        stored_object["apiVersion"] = f"{group}/v1alpha1"

        async def create_object() -> dict[str, Any] | None:
            try:
                return await kube.create(resource, stored_object)
            except NotFound:  # the new resource is not served yet
                return None

        created = await eventually(create_object, timeout=30, what="the old-schema object to be created")
        assert created["spec"]["legacyField"] == "kept-by-the-old-schema"
        assert "runnerGroup" not in created["spec"]

        applied = await kube.patch(
            crd_resource,
            name,
            current,
            patch_type=PatchType.APPLY,
            field_manager=FIELD_MANAGER,
            force=older_installed_by == "create",
        )
        assert applied["spec"]["versions"] == current["spec"]["versions"]
        await eventually(lambda: _established(kube, name), timeout=30, what=f"{name} Established after upgrade")

        async def new_schema_served() -> dict[str, Any] | None:
            patched = await kube.patch(resource, "arc-runners", {"spec": {"runnerGroup": "new"}}, namespace=namespace)
            return patched if patched["spec"].get("runnerGroup") == "new" else None

        upgraded = await eventually(new_schema_served, timeout=30, what="the new schema to be served")
        assert "legacyField" not in upgraded["spec"]  # pruned under the new schema, as the checker warned
        assert upgraded["spec"]["template"] == stored_object["spec"]["template"]
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(crd_resource, name)
