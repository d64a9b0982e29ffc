"""The generated CRDs: structural, complete, committed and current, and safe to apply over the committed ones."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from arc_scaleset import cli
from arc_scaleset.api.crd.compat import breaking_changes
from arc_scaleset.api.crd.generate import crd_file_name, custom_resource_definitions, render_yaml
from arc_scaleset.api.crd.k8s_schema import QUANTITY_PATTERN
from tests.paths import REPO_ROOT

CRD_DIR = REPO_ROOT / "config" / "crd"
REGENERATE = "regenerate with: .venv/bin/arc-scaleset crds --output-dir config/crd"

CRDS = custom_resource_definitions()
BY_KIND = {crd["spec"]["names"]["kind"]: crd for crd in CRDS}
# libyaml's loader when present: the committed files are large, and the parsed data is the same either way.
LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.fixture(scope="module")
def committed() -> dict[str, dict[str, Any]]:
    """The committed CRDs, parsed, by file name."""
    return {path.name: yaml.load(path.read_text(encoding="utf-8"), Loader=LOADER) for path in CRD_DIR.glob("*.yaml")}


def schema_of(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = BY_KIND[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema node of a dotted field path (``[]`` steps into list items)."""
    node = schema
    for part in path.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path or ".", schema
    for name, child in schema.get("properties", {}).items():
        yield from nodes(child, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from nodes(schema["additionalProperties"], f"{path}{{}}")


# --- committed files ------------------------------------------------------------------------------------


def test_the_committed_crds_are_current() -> None:
    committed = sorted(path.name for path in CRD_DIR.glob("*.yaml"))
    assert committed == sorted(crd_file_name(crd) for crd in CRDS), REGENERATE
    for crd in CRDS:
        path = CRD_DIR / crd_file_name(crd)
        assert path.read_text(encoding="utf-8") == render_yaml(crd), f"{path.name} is stale; {REGENERATE}"


def test_the_generated_crds_do_not_break_objects_stored_under_the_committed_ones(
    committed: dict[str, dict[str, Any]],
) -> None:
    """A generated CRD that differs from the committed one must not remove a field, narrow a type or require a
    new field. If such a change is intended, regenerating the committed files records the decision."""
    for crd in CRDS:
        name = crd_file_name(crd)
        problems = breaking_changes(committed[name], crd)
        assert not problems, f"{name}: breaking changes {problems}; if intended, {REGENERATE}"


def test_the_committed_files_parse_to_the_generated_objects(committed: dict[str, dict[str, Any]]) -> None:
    for crd in CRDS:
        assert committed[crd_file_name(crd)] == crd


# --- shape ----------------------------------------------------------------------------------------------


def test_four_namespaced_crds_in_the_actions_group_with_a_status_subresource() -> None:
    assert sorted(BY_KIND) == ["AutoscalingListener", "AutoscalingRunnerSet", "EphemeralRunner", "EphemeralRunnerSet"]
    for crd in CRDS:
        spec = crd["spec"]
        assert crd["metadata"]["name"] == f"{spec['names']['plural']}.actions.github.com"
        assert spec["scope"] == "Namespaced"
        assert "shortNames" not in spec["names"]
        [version] = spec["versions"]
        assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
        assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("crd", CRDS, ids=lambda crd: crd["spec"]["names"]["kind"])
def test_every_schema_node_is_structural(crd: dict[str, Any]) -> None:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    text = json.dumps(schema)
    for forbidden in ('"$ref"', '"oneOf"', '"allOf"', '"nullable"', "x-kubernetes-patch", "x-arc-scaleset"):
        assert forbidden not in text
    for path, node in nodes(schema):
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            assert "type" not in node, path
            continue
        assert "anyOf" not in node, path
        assert isinstance(node.get("type"), str), f"{path} has no single type"
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("x-kubernetes-list-type") == "map":
            item = node["items"]
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in item.get("required", ()) or "default" in item["properties"][key], f"{path} key {key}"


@pytest.mark.parametrize("crd", CRDS, ids=lambda crd: crd["spec"]["names"]["kind"])
def test_free_form_fields_exist_only_where_needed(crd: dict[str, Any]) -> None:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    preserved = [path for path, node in nodes(schema) if node.get("x-kubernetes-preserve-unknown-fields")]
    assert preserved == []


@pytest.mark.parametrize("crd", CRDS, ids=lambda crd: crd["spec"]["names"]["kind"])
def test_each_crd_is_well_under_the_api_servers_object_size_limit(crd: dict[str, Any]) -> None:
    # etcd stores at most 1.5 MiB per object, and server-side apply's managedFields roughly double a CRD.
    # Client-side `kubectl apply` also copies the object into a 256 KiB annotation.
    assert len(json.dumps(crd, separators=(",", ":"))) < 256 * 1024


# --- fields ---------------------------------------------------------------------------------------------


def test_runner_bounds_have_a_minimum_of_zero() -> None:
    for kind in ("AutoscalingRunnerSet", "AutoscalingListener"):
        for field in ("minRunners", "maxRunners"):
            node = at(schema_of(kind), f"spec.{field}")
            assert (node["type"], node["minimum"]) == ("integer", 0)


def test_runner_bounds_have_a_maximum_the_listener_can_hold() -> None:
    for kind in ("AutoscalingRunnerSet", "AutoscalingListener"):
        for field in ("minRunners", "maxRunners"):
            assert at(schema_of(kind), f"spec.{field}")["maximum"] == 2**31 - 1


def test_min_above_max_is_rejected_by_a_cel_rule_only_when_both_are_set() -> None:
    [rule] = at(schema_of("AutoscalingRunnerSet"), "spec")["x-kubernetes-validations"]
    assert rule["rule"] == "!has(self.minRunners) || !has(self.maxRunners) || self.minRunners <= self.maxRunners"
    assert "minRunners" in rule["message"]
    assert "maxRunners" in rule["message"]


@pytest.mark.parametrize("field", ["githubConfigUrl", "githubConfigSecret"])
def test_an_empty_github_setting_is_rejected_with_a_helpful_message(field: str) -> None:
    spec = at(schema_of("AutoscalingRunnerSet"), "spec")
    assert field in spec["required"]
    [rule] = spec["properties"][field]["x-kubernetes-validations"]
    assert rule["rule"] == "self != ''"
    assert rule["message"].startswith(f"{field} must not be empty: set it to")


def test_runner_set_requires_patch_id_and_the_runner_spec_fields() -> None:
    spec = at(schema_of("EphemeralRunnerSet"), "spec")
    assert set(spec["required"]) == {"patchID", "ephemeralRunnerSpec"}
    assert set(spec["properties"]["ephemeralRunnerSpec"]["required"]) == {
        "githubConfigUrl",
        "githubConfigSecret",
        "runnerScaleSetId",
    }
    assert set(at(schema_of("EphemeralRunner"), "spec")["required"]) == {
        "githubConfigUrl",
        "githubConfigSecret",
        "runnerScaleSetId",
    }


def test_the_revision_fields_exist() -> None:
    assert at(schema_of("AutoscalingRunnerSet"), "status.observedGeneration")["type"] == "integer"
    assert at(schema_of("EphemeralRunnerSet"), "spec.actionableRevision")["type"] == "integer"
    assert at(schema_of("EphemeralRunnerSet"), "status.appliedActionableRevision")["type"] == "integer"
    assert at(schema_of("EphemeralRunnerSet"), "status.finishedRunnerCleanupPatchID")["type"] == "integer"


def test_the_only_defaults_are_the_pod_apis_own_for_list_map_keys() -> None:
    # Defaults would be written into stored objects; the only ones are those the Pod API applies anyway.
    for kind in BY_KIND:
        defaults = {(path, node["default"]) for path, node in nodes(schema_of(kind)) if "default" in node}
        assert defaults
        for path, value in defaults:
            assert (path.endswith("ports[].protocol") and value == "TCP") or (
                path.endswith("imagePullSecrets[].name") and value == ""
            ), path


@pytest.mark.parametrize(
    ("kind", "template"),
    [
        ("AutoscalingRunnerSet", "spec.template"),
        ("AutoscalingRunnerSet", "spec.listenerTemplate"),
        ("AutoscalingListener", "spec.template"),
        ("EphemeralRunnerSet", "spec.ephemeralRunnerSpec"),
        ("EphemeralRunner", "spec"),
    ],
)
def test_pod_templates_carry_the_real_pod_template_schema(kind: str, template: str) -> None:
    node = at(schema_of(kind), template)
    containers = at(node, "spec.containers")
    assert containers["x-kubernetes-list-type"] == "map"
    assert containers["x-kubernetes-list-map-keys"] == ["name"]
    assert containers["items"]["required"] == ["name"]
    limits = at(containers, "[].resources.limits")["additionalProperties"]
    assert limits["x-kubernetes-int-or-string"] is True
    assert limits["pattern"] == QUANTITY_PATTERN
    assert at(containers, "[].ports")["items"]["properties"]["protocol"]["default"] == "TCP"
    assert at(containers, "[].livenessProbe.httpGet.port")["x-kubernetes-int-or-string"] is True
    assert at(node, "spec.nodeSelector")["x-kubernetes-map-type"] == "atomic"
    assert at(node, "spec.tolerations")["items"]["properties"]["tolerationSeconds"]["format"] == "int64"
    assert sorted(at(node, "metadata")["properties"]) == ["annotations", "finalizers", "labels", "name", "namespace"]


@pytest.mark.parametrize(
    "good", ["500m", "1Gi", "1", "0.5", "1.", ".5", "+1", "-1", "1e3", "1E-3", "2Ki", "100n", "3u"]
)
def test_the_quantity_pattern_accepts_kubernetes_quantities(good: str) -> None:
    assert re.fullmatch(QUANTITY_PATTERN.strip("^$"), good)


@pytest.mark.parametrize("bad", ["", "lots", "1GB", "1gi", "1K", "1 Gi", "1.2.3", "1e", "1e1.5", "1Ki1", "--1", "0x10"])
def test_the_quantity_pattern_rejects_what_kubernetes_rejects(bad: str) -> None:
    assert not re.fullmatch(QUANTITY_PATTERN.strip("^$"), bad)


@pytest.mark.parametrize("degenerate", [".", "Gi", "+"])
def test_the_quantity_pattern_also_rejects_numbers_without_digits(degenerate: str) -> None:
    # Kubernetes' parser reads "." and "Gi" as zero; nobody means that, and controller-gen's pattern (ARC's
    # CRDs) rejects them too.
    assert not re.fullmatch(QUANTITY_PATTERN.strip("^$"), degenerate)


# --- printer columns ------------------------------------------------------------------------------------


@pytest.mark.parametrize("crd", CRDS, ids=lambda crd: crd["spec"]["names"]["kind"])
def test_every_printer_column_points_at_a_field_of_the_schema(crd: dict[str, Any]) -> None:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    age = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    assert columns[-1] in (age, {**age, "priority": 1})
    for column in columns:
        path = column["jsonPath"]
        assert path.startswith("."), path
        if path.startswith(".metadata."):
            assert path in (".metadata.creationTimestamp", ".metadata.annotations.runner-scale-set-id"), path
            continue
        node = at(schema, path[1:])
        expected = {"integer": "integer", "number": "integer", "string": "string"}[column["type"]]
        assert node["type"] == expected, path


# ARC's CRDs as of its current code (after 0.14.2, #4506: the phase columns are named Phase, and the
# EphemeralRunnerSet has one): (name, type) of each column `kubectl get` shows by default, in order.
ARC_DEFAULT_COLUMNS = {
    "AutoscalingRunnerSet": [
        ("Minimum Runners", "integer"), ("Maximum Runners", "integer"), ("Current Runners", "integer"),
        ("Phase", "string"), ("Pending Runners", "integer"), ("Running Runners", "integer"),
        ("Finished Runners", "integer"), ("Deleting Runners", "integer"),
    ],
    "EphemeralRunnerSet": [
        ("DesiredReplicas", "integer"), ("CurrentReplicas", "integer"), ("Pending Runners", "integer"),
        ("Running Runners", "integer"), ("Finished Runners", "integer"), ("Deleting Runners", "integer"),
        ("Phase", "string"),
    ],
    "EphemeralRunner": [
        ("GitHub Config URL", "string"), ("RunnerId", "number"), ("Phase", "string"), ("JobRepository", "string"),
        ("JobWorkflowRef", "string"), ("WorkflowRunId", "number"), ("JobDisplayName", "string"),
        ("JobId", "string"), ("Message", "string"), ("Age", "date"),
    ],
    "AutoscalingListener": [
        ("GitHub Configure URL", "string"), ("AutoscalingRunnerSet Namespace", "string"),
        ("AutoscalingRunnerSet Name", "string"),
    ],
}  # fmt: skip


@pytest.mark.parametrize("crd", CRDS, ids=lambda crd: crd["spec"]["names"]["kind"])
def test_kubectl_get_shows_arcs_columns_and_the_extra_ones_only_in_wide_output(crd: dict[str, Any]) -> None:
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    default = [(column["name"], column["type"]) for column in columns if not column.get("priority")]
    assert default == ARC_DEFAULT_COLUMNS[crd["spec"]["names"]["kind"]]


def test_arcs_columns_that_read_unwritten_fields_read_maintained_ones_here() -> None:
    paths = {
        (crd["spec"]["names"]["kind"], column["name"]): column["jsonPath"]
        for crd in CRDS
        for column in crd["spec"]["versions"][0]["additionalPrinterColumns"]
    }
    # ARC's released CRDs read .status.state (never written) for the phase; .status.finished/deletingEphemeralRunners
    # are not in its schema.
    assert paths["AutoscalingRunnerSet", "Phase"] == ".status.phase"
    for kind in ("AutoscalingRunnerSet", "EphemeralRunnerSet"):
        assert paths[kind, "Finished Runners"] == ".status.finishedEphemeralRunners"
        assert paths[kind, "Deleting Runners"] == ".status.deletingEphemeralRunners"


# --- the command ----------------------------------------------------------------------------------------


def test_the_crds_command_prints_four_documents(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["crds"]) == 0
    documents = [doc for doc in yaml.load_all(capsys.readouterr().out, Loader=LOADER) if doc]
    assert [doc["metadata"]["name"] for doc in documents] == [crd["metadata"]["name"] for crd in CRDS]
    assert documents == CRDS


def test_the_crds_command_writes_one_file_per_crd(tmp_path: Path) -> None:
    out = tmp_path / "crd"
    assert cli.main(["crds", "--output-dir", str(out)]) == 0
    assert sorted(path.name for path in out.iterdir()) == sorted(path.name for path in CRD_DIR.glob("*.yaml"))
    for path in out.iterdir():
        assert path.read_text() == (CRD_DIR / path.name).read_text()
