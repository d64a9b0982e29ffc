"""The controller's start-up check of the installed CRDs, on the real API server: ARC's CRDs (left in place by a
Helm upgrade, which never upgrades CRDs) are found to lack the fields this version writes, this version's are not.

The copies live in API groups of their own, so the cluster's real ``actions.github.com`` CRDs, which the rest of
the run uses, are never touched. ARC's are those of the chart of the ARC release the side-by-side benchmark
builds (its Go module's ``charts/``).
"""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from arc_scaleset.api.crd.generate import custom_resource_definitions
from arc_scaleset.api.crd.installed import REQUIRED_FIELDS, crd_problems
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.resources import CUSTOM_RESOURCE_DEFINITIONS
from arc_scaleset_lab.cluster import arc_binaries

pytestmark = pytest.mark.cluster


def arcs_crds() -> list[dict[str, Any]]:
    directory = arc_binaries.controller_chart() / "crds"
    return [yaml.safe_load(path.read_text()) for path in sorted(directory.glob("*.yaml"))]


def in_group(crds: list[dict[str, Any]], group: str) -> list[dict[str, Any]]:
    copies = copy.deepcopy(crds)
    for crd in copies:
        crd["spec"]["group"] = group
        crd["metadata"] = {"name": f"{crd['spec']['names']['plural']}.{group}"}
    return copies


@pytest.fixture
async def installed(kube: KubeClient) -> AsyncIterator[list[str]]:
    """The names of the CRDs the test installed (:func:`install` appends them): each is deleted at the end."""
    names: list[str] = []
    yield names
    for name in names:
        with contextlib.suppress(NotFound):
            await kube.delete(CUSTOM_RESOURCE_DEFINITIONS, name)


async def install(kube: KubeClient, crds: list[dict[str, Any]], names: list[str]) -> None:
    for crd in crds:
        await kube.create(CUSTOM_RESOURCE_DEFINITIONS, crd)
        names.append(crd["metadata"]["name"])


async def test_arcs_crds_are_found_to_lack_every_field_this_version_writes(
    kube: KubeClient, installed: list[str]
) -> None:
    group = f"arc-{uuid.uuid4().hex[:6]}.crd-check.test"
    await install(kube, in_group(arcs_crds(), group), installed)

    problems = await crd_problems(kube, group=group)

    expected = {plural: paths for plural, paths in REQUIRED_FIELDS.items() if paths}
    assert len(problems) == len(expected), problems
    for (plural, paths), problem in zip(expected.items(), problems, strict=True):
        assert problem.startswith(f"CustomResourceDefinition {plural}.{group} lacks "), problem
        assert all(path in problem for path in paths), problem


async def test_this_versions_crds_pass_and_a_missing_one_is_named(kube: KubeClient, installed: list[str]) -> None:
    group = f"ours-{uuid.uuid4().hex[:6]}.crd-check.test"
    ours = in_group(custom_resource_definitions(), group)
    await install(kube, [crd for crd in ours if not crd["metadata"]["name"].startswith("ephemeralrunners.")], installed)

    assert await crd_problems(kube, group=group) == [
        f"CustomResourceDefinition ephemeralrunners.{group} is not installed"
    ]
