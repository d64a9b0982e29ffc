"""Are the CRDs installed in the cluster this version's, or ARC's (or an older version's)?

Helm never upgrades a chart's ``crds/`` folder, so a release switched from ARC's charts to this project's keeps
ARC's CustomResourceDefinitions until someone applies ours (docs/migration.md). The API server then silently
prunes every field ARC's schema lacks, among them the revision counters of ARC #4575: an AutoscalingRunnerSet
would bump ``spec.actionableRevision`` on its EphemeralRunnerSet and read back 0, and a template change would
never reach a runner. :func:`crd_problems` names what is missing, so the controller can refuse to start with
the command that fixes it instead of running without update propagation.

Only the fields this project writes beyond ARC's released CRDs are checked (:data:`REQUIRED_FIELDS`), so the
check costs four GETs, not the generation of the full schemas.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from arc_scaleset.api.common import GROUP, VERSION
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.resources import CUSTOM_RESOURCE_DEFINITIONS

REQUIRED_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "autoscalingrunnersets": ("status.observedGeneration", "status.conditions"),
    "ephemeralrunnersets": (
        "spec.actionableRevision",
        "status.appliedActionableRevision",
        "status.finishedRunnerCleanupPatchID",
        "status.conditions",
    ),
    "ephemeralrunners": (),
    "autoscalinglisteners": ("status.conditions",),
}
"""By resource plural: the dotted field paths of this version's CRDs that ARC's released CRDs lack."""

APPLY_COMMAND: Final = "kubectl apply --server-side --force-conflicts -f config/crd/"
"""What installs this version's CRDs (Helm does not): docs/migration.md."""


def missing_fields(crd: Mapping[str, Any], paths: tuple[str, ...]) -> list[str]:
    """Those of ``paths`` that the served ``v1alpha1`` schema of ``crd`` does not declare (pure); every one of
    them when that version is not served. A node that keeps unknown fields keeps everything below it."""
    versions = crd.get("spec", {}).get("versions") or []
    served = next((v for v in versions if v.get("name") == VERSION and v.get("served")), None)
    if served is None:
        return list(paths)
    root = served.get("schema", {}).get("openAPIV3Schema", {})
    return [path for path in paths if not _declares(root, path.split("."))]


def _declares(schema: Mapping[str, Any], names: list[str]) -> bool:
    node = schema
    for name in names:
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return True
        properties = node.get("properties") or {}
        if name not in properties:
            return False
        node = properties[name]
    return True


async def crd_problems(kube: KubeClient, *, group: str = GROUP) -> list[str]:
    """One sentence per CRD that is not installed or lacks a field this version writes (empty: all is well).
    Errors reading the CRDs (no permission, an unreachable API server) are raised to the caller. ``group``:
    another API group than ARC's, where a test installs copies."""
    problems = []
    for plural, paths in REQUIRED_FIELDS.items():
        name = f"{plural}.{group}"
        try:
            crd = await kube.get(CUSTOM_RESOURCE_DEFINITIONS, name)
        except NotFound:
            problems.append(f"CustomResourceDefinition {name} is not installed")
            continue
        missing = missing_fields(crd, paths)
        if missing:
            problems.append(f"CustomResourceDefinition {name} lacks {', '.join(missing)} (ARC's or an older one)")
    return problems
