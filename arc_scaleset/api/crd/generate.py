"""The four CustomResourceDefinitions, generated from the API models.

:func:`custom_resource_definitions` builds the ``apiextensions.k8s.io/v1`` objects; :func:`render_yaml` and
:func:`crd_file_name` give the committed form under ``config/crd/`` (one file per kind; a unit test fails when
those files are stale, so they are never edited by hand).

Each CRD has the status subresource, printer columns and a structural schema generated from the pydantic
model, with pod templates carrying the real PodTemplateSpec schema (see :mod:`arc_scaleset.api.crd.k8s_schema`).

The printer columns ``kubectl get`` shows by default are ARC's released ones (0.9 through 0.14), names and
order, so scripts and habits keep working; every one of them points at a field this controller maintains. Two
of ARC's read fields nobody wrote (``Finished Runners``, ``Deleting Runners``) and ARC's ``State`` read the
never-written ``.status.state``: here they show the maintained counts and ``.status.phase``. This controller's
own columns (revisions, scale set ID, URL, age where ARC has none) are in ``kubectl get -o wide`` (priority 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml

from arc_scaleset.api.autoscalinglistener import AutoscalingListener
from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset.api.common import GROUP, VERSION, KubeObject
from arc_scaleset.api.crd.structural import canonical_order, to_structural
from arc_scaleset.api.ephemeralrunner import EphemeralRunner
from arc_scaleset.api.ephemeralrunnerset import EphemeralRunnerSet

CRD_API_VERSION: Final = "apiextensions.k8s.io/v1"


@dataclass(frozen=True)
class PrinterColumn:
    """One ``kubectl get`` column."""

    name: str
    json_path: str
    type: str = "string"
    priority: int = 0

    def to_json(self) -> dict[str, Any]:
        column: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.priority:
            column["priority"] = self.priority
        return column


AGE: Final = PrinterColumn("Age", ".metadata.creationTimestamp", "date")
WIDE_AGE: Final = PrinterColumn("Age", ".metadata.creationTimestamp", "date", priority=1)

PRINTER_COLUMNS: Final[dict[type[KubeObject], tuple[PrinterColumn, ...]]] = {
    AutoscalingRunnerSet: (
        PrinterColumn("Minimum Runners", ".spec.minRunners", "integer"),
        PrinterColumn("Maximum Runners", ".spec.maxRunners", "integer"),
        PrinterColumn("Current Runners", ".status.currentRunners", "integer"),
        PrinterColumn("Phase", ".status.phase"),
        PrinterColumn("Pending Runners", ".status.pendingEphemeralRunners", "integer"),
        PrinterColumn("Running Runners", ".status.runningEphemeralRunners", "integer"),
        PrinterColumn("Finished Runners", ".status.finishedEphemeralRunners", "integer"),
        PrinterColumn("Deleting Runners", ".status.deletingEphemeralRunners", "integer"),
        PrinterColumn("Failed Runners", ".status.failedEphemeralRunners", "integer", priority=1),
        PrinterColumn("Scale Set ID", ".metadata.annotations.runner-scale-set-id", priority=1),
        PrinterColumn("GitHub Config URL", ".spec.githubConfigUrl", priority=1),
        WIDE_AGE,
    ),
    EphemeralRunnerSet: (
        PrinterColumn("DesiredReplicas", ".spec.replicas", "integer"),
        PrinterColumn("CurrentReplicas", ".status.currentReplicas", "integer"),
        PrinterColumn("Pending Runners", ".status.pendingEphemeralRunners", "integer"),
        PrinterColumn("Running Runners", ".status.runningEphemeralRunners", "integer"),
        PrinterColumn("Finished Runners", ".status.finishedEphemeralRunners", "integer"),
        PrinterColumn("Deleting Runners", ".status.deletingEphemeralRunners", "integer"),
        PrinterColumn("Phase", ".status.phase"),
        PrinterColumn("Failed Runners", ".status.failedEphemeralRunners", "integer", priority=1),
        PrinterColumn("Revision", ".spec.actionableRevision", "integer", priority=1),
        PrinterColumn("Applied Revision", ".status.appliedActionableRevision", "integer", priority=1),
        PrinterColumn("Patch ID", ".spec.patchID", "integer", priority=1),
        WIDE_AGE,
    ),
    EphemeralRunner: (
        PrinterColumn("GitHub Config URL", ".spec.githubConfigUrl"),
        PrinterColumn("RunnerId", ".status.runnerId", "number"),
        PrinterColumn("Phase", ".status.phase"),
        PrinterColumn("JobRepository", ".status.jobRepositoryName"),
        PrinterColumn("JobWorkflowRef", ".status.jobWorkflowRef"),
        PrinterColumn("WorkflowRunId", ".status.workflowRunId", "number"),
        PrinterColumn("JobDisplayName", ".status.jobDisplayName"),
        PrinterColumn("JobId", ".status.jobId"),
        PrinterColumn("Message", ".status.message"),
        AGE,
    ),
    AutoscalingListener: (
        PrinterColumn("GitHub Configure URL", ".spec.githubConfigUrl"),
        PrinterColumn("AutoscalingRunnerSet Namespace", ".spec.autoscalingRunnerSetNamespace"),
        PrinterColumn("AutoscalingRunnerSet Name", ".spec.autoscalingRunnerSetName"),
        PrinterColumn("Scale Set ID", ".spec.runnerScaleSetId", "integer", priority=1),
        WIDE_AGE,
    ),
}

KINDS: Final[tuple[type[KubeObject], ...]] = tuple(PRINTER_COLUMNS)

_ROOT_FIELDS: Final = {
    "apiVersion": {
        "type": "string",
        "description": "The versioned schema of this representation of an object.",
    },
    "kind": {"type": "string", "description": "The REST resource this object represents."},
    "metadata": {"type": "object"},
}


def object_schema(kind: type[KubeObject]) -> dict[str, Any]:
    """The structural ``openAPIV3Schema`` of ``kind``: standard root fields, then spec and status."""
    generated = to_structural(kind.model_json_schema(by_alias=True))
    properties = generated["properties"]
    schema: dict[str, Any] = {
        "description": generated.get("description", kind.KIND),
        "type": "object",
        "properties": {**_ROOT_FIELDS, "spec": properties["spec"], "status": properties["status"]},
    }
    required = [name for name in generated.get("required", ()) if name in ("spec", "status")]
    if required:
        schema["required"] = required
    return canonical_order(schema)


def custom_resource_definition(kind: type[KubeObject]) -> dict[str, Any]:
    """The ``CustomResourceDefinition`` of one kind."""
    resource = kind.RESOURCE
    return {
        "apiVersion": CRD_API_VERSION,
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{resource.plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind.KIND,
                "listKind": f"{kind.KIND}List",
                "plural": resource.plural,
                "singular": kind.KIND.lower(),
            },
            "scope": "Namespaced" if resource.namespaced else "Cluster",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": [column.to_json() for column in PRINTER_COLUMNS[kind]],
                    "schema": {"openAPIV3Schema": object_schema(kind)},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def custom_resource_definitions() -> list[dict[str, Any]]:
    """All four CRDs, in a fixed order."""
    return [custom_resource_definition(kind) for kind in KINDS]


def crd_file_name(crd: dict[str, Any]) -> str:
    """``actions.github.com_autoscalingrunnersets.yaml``: controller-gen's naming, as in ARC's repository."""
    return f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"


class _NoAliasDumper(yaml.SafeDumper):
    """Writes a repeated value out again instead of as a YAML anchor and alias (``&id001`` / ``*id001``)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_HEADER: Final = "# Generated by `arc-scaleset crds` from arc_scaleset/api; do not edit.\n"


def render_yaml(crd: dict[str, Any]) -> str:
    """One CRD as a YAML document (with a header comment naming the generator)."""
    # The pure-Python dumper on purpose: libyaml's emitter may format differently, and the committed files
    # must come out byte-identical on every machine.
    return _HEADER + yaml.dump(crd, Dumper=_NoAliasDumper, sort_keys=False, default_flow_style=False, width=120)


def render_all(crds: Sequence[dict[str, Any]]) -> str:
    """Several CRDs as one multi-document YAML stream."""
    return "---\n".join(render_yaml(crd) for crd in crds)
